// The ModelOpt importer (NVIDIA TensorRT Model Optimizer's Hugging Face
// export): hf_quant_config.json
//   {"producer": {"name": "modelopt", "version": "..."},
//    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
//                     "exclude_modules": ["lm_head", "model.layers.0.*"]}}
// or the same keys in config.json "quantization_config" with quant_method
// "modelopt". ModelOpt quantizes every dense layer, so the plan has no rules,
// only a default scheme from quant_algo:
//   FP8                                   -> fp8_w8a8_static (per-tensor weight
//                                            scale, repeated per channel)
//   FP8_PER_CHANNEL_PER_TOKEN             -> fp8_w8a8
//   W8A8_SQ_PER_CHANNEL,
//   W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN -> int8_w8a8_static
//   W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN  -> int8_w8a8
//   W8A8_SQ_PER_TENSOR_PLUGIN             -> int8_w8a8_static (per-tensor weights)
//   W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN   -> int8_w8a8 (per-tensor weights)
//   NVFP4 (group_size 16)                 -> nvfp4 (serving refuses it)
// Any other quant_algo is refused by name. An exclude_modules entry keeps
// the module it names and everything below it full precision.
#include <array>

#include "core/error.h"
#include "quant/importers/importer.h"
#include "quant/spec.h"

namespace oasr::quant {
namespace {

using nlohmann::json;

struct AlgoMapping {
  const char* quant_algo;
  const char* preset;
  bool per_tensor_weights;
};

constexpr std::array<AlgoMapping, 8> kAlgorithms = {{
    {"FP8", "fp8_w8a8_static", true},
    {"FP8_PER_CHANNEL_PER_TOKEN", "fp8_w8a8", false},
    {"W8A8_SQ_PER_CHANNEL", "int8_w8a8_static", false},
    {"W8A8_SQ_PER_CHANNEL_PER_TENSOR_PLUGIN", "int8_w8a8_static", false},
    {"W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN", "int8_w8a8", false},
    {"W8A8_SQ_PER_TENSOR_PLUGIN", "int8_w8a8_static", true},
    {"W8A8_SQ_PER_TENSOR_PER_TOKEN_PLUGIN", "int8_w8a8", true},
    {"NVFP4", "nvfp4", false},
}};

std::string known_algorithms() {
  std::string known;
  for (const AlgoMapping& mapping : kAlgorithms) {
    known += known.empty() ? "" : ", ";
    known += mapping.quant_algo;
  }
  return known;
}

// The "quantization" object and the name of the file it came from.
const json* section(const ConfigSources& sources, std::string* where) {
  if (sources.hf_quant_config && sources.hf_quant_config->is_object()) {
    const auto it = sources.hf_quant_config->find("quantization");
    if (it != sources.hf_quant_config->end() && it->is_object()) {
      if (where != nullptr) {
        *where = (sources.dir / "hf_quant_config.json").string() + ": quantization";
      }
      return &*it;
    }
  }
  if (sources.hf_config && sources.hf_config->is_object()) {
    const auto it = sources.hf_config->find("quantization_config");
    if (it != sources.hf_config->end() && it->is_object() &&
        it->value("quant_method", json()) == "modelopt") {
      if (where != nullptr) {
        *where = (sources.dir / "config.json").string() + ": quantization_config";
      }
      return &*it;
    }
  }
  return nullptr;
}

class ModelOptImporter final : public QuantImporter {
 public:
  std::string_view name() const override { return "modelopt"; }

  bool detect(const ConfigSources& sources) const override {
    return section(sources, nullptr) != nullptr;
  }

  QuantPlan build_plan(const ConfigSources& sources) const override {
    std::string where;
    const json& config = *section(sources, &where);
    OASR_CHECK(config.contains("quant_algo") && config.at("quant_algo").is_string(), kCorruptFile,
               where, ".quant_algo must be a string, found ",
               config.value("quant_algo", json()).dump());
    const std::string algo = config.at("quant_algo").get<std::string>();
    const AlgoMapping* mapping = nullptr;
    for (const AlgoMapping& candidate : kAlgorithms) {
      if (algo == candidate.quant_algo) mapping = &candidate;
    }
    OASR_CHECK(mapping != nullptr, kUnsupported, where, ".quant_algo '", algo,
               "' is not supported (supported: ", known_algorithms(), ")");

    QuantPlan plan;
    plan.default_scheme = scheme_preset(mapping->preset);
    if (mapping->per_tensor_weights) {
      plan.notes.push_back("quant_algo " + algo +
                           ": one weight scale per tensor, served as the same scale repeated per "
                           "output channel");
    }
    if (algo == "NVFP4" && config.contains("group_size")) {
      OASR_CHECK(config.at("group_size") == 16, kUnsupported, where, ".group_size ",
                 config.at("group_size").dump(), " is not supported (NVFP4 blocks are 16)");
    }

    if (config.contains("exclude_modules") && !config.at("exclude_modules").is_null()) {
      const json& excluded = config.at("exclude_modules");
      OASR_CHECK(excluded.is_array(), kCorruptFile, where,
                 ".exclude_modules must be a list of module names, found ", excluded.dump());
      for (const json& item : excluded) {
        OASR_CHECK(item.is_string(), kCorruptFile, where,
                   ".exclude_modules must hold strings, found ", item.dump());
        const std::string name = item.get<std::string>();
        plan.ignore.push_back(name);
        plan.ignore.push_back(name + ".*");  // and everything inside it
      }
    }

    const json kv = config.value("kv_cache_quant_algo", json());
    if (!kv.is_null()) {
      OASR_CHECK(kv == "FP8", kUnsupported, where, ".kv_cache_quant_algo ", kv.dump(),
                 " is not supported (supported: FP8)");
      plan.kv_cache = kKvCacheFp8;
      plan.notes.push_back(
          "kv_cache_quant_algo FP8: fp8 KV cache; its calibrated k/v scales are not used (oasr "
          "scales each token and KV head by a power of two as it is written)");
    }
    return plan;
  }
};

}  // namespace

const QuantImporter& modelopt_importer() {
  static const ModelOptImporter kImporter;
  return kImporter;
}

}  // namespace oasr::quant
