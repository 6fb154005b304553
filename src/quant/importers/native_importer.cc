// The native importer: a directory written by `oasr quantize` (oasr_config.json,
// format_version 2) carries its QuantizationSpec, which is authoritative. The
// plan names every quantized layer by its exact path with its scheme; layers
// the spec does not list (its skipped ones included) stay full precision.
#include <map>

#include "core/error.h"
#include "quant/importers/importer.h"
#include "quant/spec.h"

namespace oasr::quant {
namespace {

constexpr int kQuantizedFormatVersion = 2;

class NativeImporter final : public QuantImporter {
 public:
  std::string_view name() const override { return "native"; }

  bool detect(const ConfigSources& sources) const override {
    if (!sources.oasr_config || !sources.oasr_config->is_object()) return false;
    const nlohmann::json& config = *sources.oasr_config;
    const bool version_2 = config.contains("format_version") &&
                           config.at("format_version").is_number_integer() &&
                           config.at("format_version").get<int64_t>() == kQuantizedFormatVersion;
    return version_2 || config.contains("quantization");
  }

  QuantPlan build_plan(const ConfigSources& sources) const override {
    const std::string what = (sources.dir / "oasr_config.json").string();
    const nlohmann::json& config = *sources.oasr_config;
    const nlohmann::json version = config.value("format_version", nlohmann::json());
    OASR_CHECK(version.is_number_integer() && version.get<int64_t>() == kQuantizedFormatVersion,
               kCorruptFile, what, ": a \"quantization\" section needs format_version ",
               kQuantizedFormatVersion, ", found ", version.dump(),
               " (format_version 1 is full precision)");
    OASR_CHECK(config.contains("quantization") && config.at("quantization").is_object(),
               kCorruptFile, what, ": format_version ", kQuantizedFormatVersion,
               " (quantized) needs a \"quantization\" object, the spec written by oasr quantize");
    const QuantizationSpec spec = QuantizationSpec::from_json(config.at("quantization"), what);

    QuantPlan plan;
    plan.kv_cache = spec.kv_cache;
    std::map<std::string, size_t> rule_of_scheme;
    for (const LayerQuantization& layer : spec.layers) {
      auto [it, added] = rule_of_scheme.emplace(layer.scheme, plan.rules.size());
      if (added) plan.rules.push_back({{}, spec.scheme(layer.scheme)});
      plan.rules[it->second].targets.push_back(layer.path);
    }
    for (const SkippedLayer& skipped : spec.skipped) {
      plan.notes.push_back("kept full precision: " + skipped.path + " (" + skipped.reason + ")");
    }
    return plan;
  }
};

}  // namespace

const QuantImporter& native_importer() {
  static const NativeImporter kImporter;
  return kImporter;
}

}  // namespace oasr::quant
