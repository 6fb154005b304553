#include "quant/importers/importer.h"

#include <fnmatch.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"

namespace oasr::quant {

namespace fs = std::filesystem;

namespace {

bool is_kind_name(std::string_view target, LayerKind* kind) {
  for (LayerKind k :
       {LayerKind::kLinear, LayerKind::kPointwiseConv, LayerKind::kConv1d, LayerKind::kConv2d}) {
    if (to_string(k) == target) {
      *kind = k;
      return true;
    }
  }
  return false;
}

bool regex_matches_from_start(std::string_view pattern, const std::string& path) {
  try {
    const std::regex regex{std::string(pattern)};
    // match_continuous anchors the match at the start, like Python's re.match.
    return std::regex_search(path, regex, std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    OASR_THROW(kInvalidArgument, "quantization target 're:", pattern,
               "' is not a valid regular expression: ", e.what());
  }
}

// How specific a matching target is: lower wins (compressed-tensors' order).
enum class Specificity { kExactPath = 0, kRegex = 1, kGlob = 2, kKind = 3, kNone = 4 };

Specificity match_specificity(std::string_view target, const std::string& path, LayerKind kind) {
  LayerKind named;
  if (is_kind_name(target, &named)) return named == kind ? Specificity::kKind : Specificity::kNone;
  if (target.substr(0, 3) == "re:") {
    return regex_matches_from_start(target.substr(3), path) ? Specificity::kRegex
                                                            : Specificity::kNone;
  }
  if (target == path) return Specificity::kExactPath;
  const std::string pattern(target);
  return ::fnmatch(pattern.c_str(), path.c_str(), FNM_NOESCAPE) == 0 ? Specificity::kGlob
                                                                     : Specificity::kNone;
}

}  // namespace

bool target_matches(std::string_view target, const std::string& path, LayerKind kind) {
  return match_specificity(target, path, kind) != Specificity::kNone;
}

const QuantScheme* QuantPlan::scheme_for(const std::string& path, LayerKind kind) const {
  for (const std::string& target : ignore) {
    if (target_matches(target, path, kind)) return nullptr;
  }
  const QuantScheme* best = nullptr;
  Specificity best_specificity = Specificity::kNone;
  for (const QuantRule& rule : rules) {
    for (const std::string& target : rule.targets) {
      const Specificity specificity = match_specificity(target, path, kind);
      // Strictly better only: among equals the first rule wins.
      if (specificity < best_specificity) {
        best = &rule.scheme;
        best_specificity = specificity;
      }
    }
  }
  if (best != nullptr || !default_scheme) return best;
  // The default covers the dense GEMMs only: a convolution is quantized
  // when a rule names it, never by default.
  for (LayerKind dense : default_layer_kinds()) {
    if (dense == kind) return &*default_scheme;
  }
  return nullptr;
}

ConfigSources ConfigSources::read(const fs::path& dir) {
  ConfigSources sources;
  sources.dir = dir;
  sources.oasr_config = io::read_json_file_if_present(dir / "oasr_config.json");
  sources.hf_config = io::read_json_file_if_present(dir / "config.json");
  sources.hf_quant_config = io::read_json_file_if_present(dir / "hf_quant_config.json");
  return sources;
}

const std::vector<const QuantImporter*>& default_importers() {
  static const std::vector<const QuantImporter*> kImporters = {
      &native_importer(), &compressed_tensors_importer(), &modelopt_importer()};
  return kImporters;
}

std::optional<QuantPlan> import_quantization(const ConfigSources& sources) {
  for (const QuantImporter* importer : default_importers()) {
    if (importer->detect(sources)) {
      QuantPlan plan = importer->build_plan(sources);
      plan.importer = std::string(importer->name());
      return plan;
    }
  }
  // Declared but not importable: refuse rather than serve it as full precision.
  if (sources.hf_config && sources.hf_config->is_object()) {
    for (const char* key : {"quantization_config", "compression_config"}) {
      if (!sources.hf_config->contains(key) || sources.hf_config->at(key).is_null()) continue;
      const nlohmann::json& config = sources.hf_config->at(key);
      const std::string method = config.is_object() && config.contains("quant_method") &&
                                         config.at("quant_method").is_string()
                                     ? config.at("quant_method").get<std::string>()
                                     : std::string("(none)");
      OASR_THROW(kUnsupported, (sources.dir / "config.json").string(), ": ", key, ".quant_method '",
                 method,
                 "' is not supported; oasr imports compressed-tensors (config.json) and ModelOpt "
                 "(hf_quant_config.json) checkpoints, or serve the full-precision original");
    }
  }
  if (sources.hf_quant_config) {
    OASR_THROW(kUnsupported, (sources.dir / "hf_quant_config.json").string(),
               ": not a ModelOpt quantization description (expected {\"quantization\": "
               "{\"quant_algo\": ...}})");
  }
  return std::nullopt;
}

std::optional<QuantPlan> import_quantization(const fs::path& dir) {
  return import_quantization(ConfigSources::read(dir));
}

std::optional<std::string> matching_preset(const TensorQuant& weight,
                                           const std::optional<TensorQuant>& input) {
  for (const std::string& name : scheme_preset_names()) {
    const QuantScheme& preset = scheme_preset(name);
    if (preset.weight == weight && preset.input == input) return name;
  }
  return std::nullopt;
}

}  // namespace oasr::quant
