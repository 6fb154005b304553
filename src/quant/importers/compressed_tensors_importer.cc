// The compressed-tensors importer: config.json "quantization_config" with
// quant_method "compressed-tensors" (llm-compressor's output; older files
// call the section "compression_config"):
//   {"quant_method": "compressed-tensors", "format": "int-quantized",
//    "quantization_status": "compressed",
//    "config_groups": {"group_0": {"targets": ["Linear"],
//        "weights": {"num_bits": 8, "type": "int", "symmetric": true,
//                    "strategy": "channel", "dynamic": false, ...},
//        "input_activations": {"num_bits": 8, "type": "int", "symmetric": true,
//                              "strategy": "token", "dynamic": true, ...}}},
//    "ignore": ["lm_head", "re:.*output_layer"], "kv_cache_scheme": null}
// Each group becomes a rule whose scheme must equal one of our presets:
//   int 8,  weights channel|tensor, inputs token dynamic   -> int8_w8a8
//   int 8,  weights channel|tensor, inputs tensor static   -> int8_w8a8_static
//   float 8 (e4m3), the same two input forms               -> fp8_w8a8, fp8_w8a8_static
//   float 4, tensor_group 16, inputs tensor_group dynamic  -> nvfp4 (serving refuses it)
// A per-tensor weight scale is a per-channel one repeated, so it maps to the
// per-channel preset (noted in the plan). Everything else -- group/block
// strategies, asymmetric, weight-only, per-tensor dynamic inputs, int4,
// sparsity, transforms -- is refused naming the field.
#include <cctype>
#include <set>

#include "core/error.h"
#include "quant/importers/importer.h"
#include "quant/number_format.h"
#include "quant/spec.h"

namespace oasr::quant {
namespace {

using nlohmann::json;

constexpr const char* kMethod = "compressed-tensors";

// Where a field sits, for messages: "DIR/config.json: quantization_config.ignore".
struct Where {
  std::string file;
  std::string field;
  Where at(const std::string& key) const { return {file, field + "." + key}; }
  std::string str() const { return file + ": " + field; }
};

const json* section(const ConfigSources& sources, std::string* key_out) {
  if (!sources.hf_config || !sources.hf_config->is_object()) return nullptr;
  for (const char* key : {"quantization_config", "compression_config"}) {
    const auto it = sources.hf_config->find(key);
    if (it == sources.hf_config->end() || !it->is_object()) continue;
    const auto method = it->find("quant_method");
    if (method != it->end() && method->is_string() && method->get<std::string>() == kMethod) {
      if (key_out != nullptr) *key_out = key;
      return &*it;
    }
  }
  return nullptr;
}

bool is_null_or_absent(const json& object, const char* key) {
  return !object.contains(key) || object.at(key).is_null();
}

std::string string_field(const json& object, const char* key, const Where& where) {
  OASR_CHECK(object.contains(key) && object.at(key).is_string(), kCorruptFile, where.at(key).str(),
             " must be a string, found ",
             object.contains(key) ? object.at(key).dump() : std::string("nothing"));
  return object.at(key).get<std::string>();
}

std::vector<std::string> string_list(const json& value, const Where& where) {
  if (value.is_null()) return {};
  OASR_CHECK(value.is_array(), kCorruptFile, where.str(), " must be a list of strings, found ",
             value.dump());
  std::vector<std::string> out;
  for (const json& item : value) {
    OASR_CHECK(item.is_string(), kCorruptFile, where.str(), " must hold strings, found ",
               item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

// A target or ignore entry: "re:" regexes and module names pass through;
// torch class names become our layer kinds (a torch Conv1d is either of our
// 1-d kinds). A class we have no kind for is refused.
std::vector<std::string> translate_target(const std::string& target, const Where& where) {
  if (target.rfind("re:", 0) == 0) return {target};
  if (target == "Linear") return {"linear"};
  if (target == "Conv1d") return {"pointwise_conv", "conv1d"};
  if (target == "Conv2d") return {"conv2d"};
  const bool looks_like_class = !target.empty() &&
                                std::isupper(static_cast<unsigned char>(target[0])) != 0 &&
                                target.find('.') == std::string::npos;
  OASR_CHECK(!looks_like_class, kUnsupported, where.str(), " names the module class '", target,
             "', which oasr does not quantize (classes: Linear, Conv1d, Conv2d; or give a "
             "module name or a \"re:\" pattern)");
  return {target};
}

// One QuantizationArgs object (weights or input_activations) as a TensorQuant.
TensorQuant parse_args(const json& args, const Where& where, bool is_weight,
                       std::vector<std::string>* notes) {
  OASR_CHECK(args.is_object(), kCorruptFile, where.str(), " must be an object, found ",
             args.dump());
  OASR_CHECK(args.contains("num_bits") && args.at("num_bits").is_number_integer(), kCorruptFile,
             where.at("num_bits").str(), " must be an integer");
  const int64_t bits = args.at("num_bits").get<int64_t>();
  const std::string type = args.contains("type") ? string_field(args, "type", where) : "int";
  TensorQuant q;
  const NumberFormat* format = nullptr;
  std::string supported;
  for (QDType id : number_formats()) {
    const NumberFormat& row = number_format(id);
    if (row.compressed_tensors_type.empty()) continue;
    if (row.compressed_tensors_type == type && row.compressed_tensors_bits == bits) format = &row;
    supported += (supported.empty() ? "" : ", ") + row.compressed_tensors_type + " " +
                 std::to_string(row.compressed_tensors_bits) + " (" + row.name + ")";
  }
  OASR_CHECK(format != nullptr, kUnsupported, where.str(), ": num_bits ", bits, " with type '",
             type, "' is not supported (supported: ", supported, ")");
  q.dtype = format->id;

  const bool symmetric = args.value("symmetric", true);
  OASR_CHECK(symmetric, kUnsupported, where.at("symmetric").str(),
             " is false: asymmetric quantization (a zero point) is not supported; oasr's "
             "formats are symmetric");
  OASR_CHECK(is_null_or_absent(args, "actorder") || args.at("actorder") == false, kUnsupported,
             where.at("actorder").str(), " ", args.value("actorder", json()).dump(),
             " is not supported (activation reordering belongs to group quantization)");
  OASR_CHECK(is_null_or_absent(args, "block_structure"), kUnsupported,
             where.at("block_structure").str(), " ", args.value("block_structure", json()).dump(),
             " is not supported (block-wise scales)");

  // Dynamic: true, false, or "local" (a dynamic micro-scale with a static global one).
  const json dynamic = args.value("dynamic", json(false));
  OASR_CHECK(dynamic.is_boolean() || dynamic == "local", kCorruptFile, where.at("dynamic").str(),
             " must be true, false or \"local\", found ", dynamic.dump());
  q.dynamic = dynamic.is_boolean() ? dynamic.get<bool>() : true;
  OASR_CHECK(!(is_weight && q.dynamic), kUnsupported, where.at("dynamic").str(),
             " is true: weights are quantized once, when the checkpoint is written");

  const bool has_group = !is_null_or_absent(args, "group_size");
  std::string strategy = is_null_or_absent(args, "strategy")
                             ? (has_group ? "group" : "tensor")
                             : string_field(args, "strategy", where);
  if (format->micro_scaled) {
    OASR_CHECK(strategy == "tensor_group" && args.value("group_size", json()) == 16, kUnsupported,
               where.str(),
               ": float 4 is read as NVFP4, which needs strategy \"tensor_group\" "
               "with group_size 16; found strategy '",
               strategy, "', group_size ", args.value("group_size", json()).dump());
    q.granularity = Granularity::kBlock;
    q.micro_scaled = true;
    q.block_n = 1;
    q.block_k = 16;
    return q;
  }
  OASR_CHECK(!has_group, kUnsupported, where.at("group_size").str(), " ",
             args.at("group_size").dump(),
             " is not supported: int8 and fp8 scales are per channel, per token or per tensor");
  if (is_weight) {
    if (strategy == "channel") {
      q.granularity = Granularity::kPerChannel;
    } else if (strategy == "tensor") {
      q.granularity = Granularity::kPerChannel;
      notes->push_back(where.at("strategy").field +
                       " is \"tensor\": one weight scale per tensor, served as the same scale "
                       "repeated per output channel");
    } else {
      OASR_THROW(kUnsupported, where.at("strategy").str(), " '", strategy,
                 "' is not supported for weights (supported: channel, tensor)");
    }
    return q;
  }
  if (strategy == "token") {
    OASR_CHECK(q.dynamic, kUnsupported, where.str(),
               ": a static per-token activation scale is not supported (strategy token needs "
               "dynamic true)");
    q.granularity = Granularity::kPerToken;
  } else if (strategy == "tensor") {
    OASR_CHECK(!q.dynamic, kUnsupported, where.str(),
               ": a per-tensor dynamic activation scale is refused: padding and co-batched "
               "utterances would change every row's quantization (use strategy token)");
    q.granularity = Granularity::kPerTensor;
  } else {
    OASR_THROW(kUnsupported, where.at("strategy").str(), " '", strategy,
               "' is not supported for input_activations (supported: token with dynamic true, "
               "tensor with dynamic false)");
  }
  return q;
}

// The storage formats a preset's tensors can come in.
void check_format(const std::string& format, QDType dtype, const Where& where) {
  // "naive-quantized" stores any format; the others name the one they store.
  std::set<std::string> known = {"naive-quantized"};
  for (QDType id : number_formats()) {
    if (!number_format(id).compressed_tensors_format.empty()) {
      known.insert(number_format(id).compressed_tensors_format);
    }
  }
  std::string supported;
  for (const std::string& name : known) supported += (supported.empty() ? "" : ", ") + name;
  OASR_CHECK(known.count(format) > 0, kUnsupported, where.str(), " '", format,
             "' is not supported (supported: ", supported, ")");
  const bool consistent =
      format == "naive-quantized" || number_format(dtype).compressed_tensors_format == format;
  OASR_CHECK(consistent, kCorruptFile, where.str(), " '", format, "' does not store ",
             to_string(dtype), " weights");
}

class CompressedTensorsImporter final : public QuantImporter {
 public:
  std::string_view name() const override { return kMethod; }

  bool detect(const ConfigSources& sources) const override {
    return section(sources, nullptr) != nullptr;
  }

  QuantPlan build_plan(const ConfigSources& sources) const override {
    std::string key;
    const json& config = *section(sources, &key);
    const Where top{(sources.dir / "config.json").string(), key};
    QuantPlan plan;

    for (const char* absent : {"sparsity_config", "transform_config"}) {
      const bool empty = is_null_or_absent(config, absent) ||
                         (config.at(absent).is_object() && config.at(absent).empty());
      OASR_CHECK(empty, kUnsupported, top.at(absent).str(),
                 " is set: sparse or transformed checkpoints are not supported");
    }
    if (config.contains("quantization_status") && !config.at("quantization_status").is_null()) {
      const std::string status = string_field(config, "quantization_status", top);
      OASR_CHECK(status == "compressed" || status == "frozen", kUnsupported,
                 top.at("quantization_status").str(), " '", status,
                 "' is not a finished checkpoint (expected compressed or frozen)");
    }
    const std::string format =
        is_null_or_absent(config, "format") ? "" : string_field(config, "format", top);

    OASR_CHECK(config.contains("config_groups") && config.at("config_groups").is_object() &&
                   !config.at("config_groups").empty(),
               kCorruptFile, top.at("config_groups").str(),
               " must be a non-empty object of groups");
    for (const auto& [group_name, group] : config.at("config_groups").items()) {
      const Where where = top.at("config_groups").at(group_name);
      OASR_CHECK(group.is_object(), kCorruptFile, where.str(), " must be an object");
      OASR_CHECK(is_null_or_absent(group, "output_activations"), kUnsupported,
                 where.at("output_activations").str(),
                 " is set: output activation quantization is not supported");
      OASR_CHECK(group.contains("weights") && !group.at("weights").is_null(), kUnsupported,
                 where.at("weights").str(),
                 " is missing: activation-only quantization is not supported");
      const TensorQuant weight =
          parse_args(group.at("weights"), where.at("weights"), true, &plan.notes);
      OASR_CHECK(!is_null_or_absent(group, "input_activations"), kUnsupported,
                 where.at("input_activations").str(),
                 " is null: weight-only quantization is not served; oasr serves W8A8 schemes "
                 "(int8_w8a8, fp8_w8a8 and their static forms)");
      const TensorQuant input = parse_args(group.at("input_activations"),
                                           where.at("input_activations"), false, &plan.notes);
      OASR_CHECK(input.dtype == weight.dtype, kUnsupported, where.str(), ": ",
                 to_string(weight.dtype), " weights with ", to_string(input.dtype),
                 " input_activations is not supported (both must use one format)");
      const std::string group_format =
          is_null_or_absent(group, "format") ? format : string_field(group, "format", where);
      if (!group_format.empty() && group_format != "mixed-precision") {
        check_format(group_format, weight.dtype,
                     is_null_or_absent(group, "format") ? top.at("format") : where.at("format"));
      }
      const std::optional<std::string> preset = matching_preset(weight, input);
      OASR_CHECK(preset.has_value(), kUnsupported, where.str(),
                 ": this combination of weights and input_activations matches no oasr scheme");

      QuantRule rule;
      rule.scheme = scheme_preset(*preset);
      OASR_CHECK(group.contains("targets"), kCorruptFile, where.at("targets").str(), " is missing");
      for (const std::string& target : string_list(group.at("targets"), where.at("targets"))) {
        for (std::string& t : translate_target(target, where.at("targets"))) {
          rule.targets.push_back(std::move(t));
        }
      }
      OASR_CHECK(!rule.targets.empty(), kCorruptFile, where.at("targets").str(), " is empty");
      plan.rules.push_back(std::move(rule));
    }

    if (config.contains("ignore")) {
      for (const std::string& target : string_list(config.at("ignore"), top.at("ignore"))) {
        for (std::string& t : translate_target(target, top.at("ignore"))) {
          plan.ignore.push_back(std::move(t));
        }
      }
    }

    if (!is_null_or_absent(config, "kv_cache_scheme")) {
      const json& kv = config.at("kv_cache_scheme");
      const Where where = top.at("kv_cache_scheme");
      OASR_CHECK(kv.is_object() && kv.value("num_bits", json()) == 8 &&
                     kv.value("type", json("int")) == "float",
                 kUnsupported, where.str(), " ", kv.dump(),
                 " is not supported (the accepted KV-cache format is 8-bit float, fp8_e4m3)");
      plan.kv_cache = kKvCacheFp8;
      plan.notes.push_back(where.field +
                           ": fp8 KV cache; its calibrated k/v scales are not used (oasr scales "
                           "each token and KV head by a power of two as it is written)");
    }
    return plan;
  }
};

}  // namespace

const QuantImporter& compressed_tensors_importer() {
  static const CompressedTensorsImporter kImporter;
  return kImporter;
}

}  // namespace oasr::quant
