// Importers (one per checkpoint framework): each
// reads one framework's quantization description from a checkpoint
// directory and translates it into a QuantPlan -- rules of targets and a
// semantic QuantScheme -- without caring whether this build has a kernel for
// it. qspine's apply turns a plan into the QuantizationSpec the load sequence
// uses. Three importers, tried in this order:
//   native              oasr_config.json, format_version 2, "quantization"
//   compressed-tensors  config.json "quantization_config" with quant_method
//                       "compressed-tensors" (config_groups, ignore)
//   modelopt            hf_quant_config.json {"quantization": {"quant_algo",
//                       "exclude_modules", "kv_cache_quant_algo"}}, or
//                       config.json "quantization_config" with quant_method
//                       "modelopt" and the same keys
// A directory that declares a quantization nobody imports (another
// quant_method, an unknown quant_algo, an unsupported combination) is
// refused by name, never read as full precision.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/format.h"
#include "quant/layer_kind.h"

namespace oasr::quant {

// A target (in QuantRule::targets and QuantPlan::ignore) is one of:
//   a layer kind      "linear", "pointwise_conv", "conv1d", "conv2d": every
//                     layer of that kind (compressed-tensors' class-name
//                     targets "Linear", "Conv1d", "Conv2d" become these)
//   "re:<regex>"      an ECMAScript regex matched from the start of the
//                     module path (Python's re.match, as compressed-tensors
//                     does), e.g. "re:.*self_attn.*"
//   anything else     an fnmatch glob over the module path, '*' matching
//                     dots too (an exact path is a glob matching itself)
struct QuantRule {
  std::vector<std::string> targets;
  QuantScheme scheme;
};

struct QuantPlan {
  std::vector<QuantRule> rules;
  // The scheme of every dense GEMM (linear, pointwise_conv) no rule names;
  // ModelOpt's plans use it, the others leave it empty.
  std::optional<QuantScheme> default_scheme;
  std::vector<std::string> ignore;  // kept full precision, whatever the rules say
  // Extensions to the shared contract:
  std::string importer;  // "native", "compressed-tensors", "modelopt"
  std::string kv_cache;  // "" or "fp8_e4m3"
  // What the translation changed or dropped, one line each, for reports.
  std::vector<std::string> notes;

  // The scheme for one layer: ignored -> none; otherwise the most specific
  // matching rule (an exact path, then a regex, then a glob, then a kind --
  // compressed-tensors' order), else the default for a dense GEMM;
  // nullptr = full precision.
  const QuantScheme* scheme_for(const std::string& path, LayerKind kind) const;
};

// Whether one target (forms above) selects the layer at `path` of `kind`.
bool target_matches(std::string_view target, const std::string& path, LayerKind kind);

// The configuration files an importer may read from a checkpoint directory,
// parsed once. A file that is absent stays empty; one that is not valid JSON
// is refused (kCorruptFile) naming it.
struct ConfigSources {
  std::filesystem::path dir;
  std::optional<nlohmann::json> oasr_config;      // oasr_config.json
  std::optional<nlohmann::json> hf_config;        // config.json
  std::optional<nlohmann::json> hf_quant_config;  // hf_quant_config.json

  static ConfigSources read(const std::filesystem::path& dir);
};

class QuantImporter {
 public:
  virtual ~QuantImporter() = default;
  virtual std::string_view name() const = 0;
  virtual bool detect(const ConfigSources& sources) const = 0;
  // Only called when detect() said yes; refuses what it cannot translate
  // (kUnsupported), naming the file and the field.
  virtual QuantPlan build_plan(const ConfigSources& sources) const = 0;
};

const QuantImporter& native_importer();
const QuantImporter& compressed_tensors_importer();
const QuantImporter& modelopt_importer();
// native, compressed-tensors, modelopt: the order they are tried in.
const std::vector<const QuantImporter*>& default_importers();

// The plan of the first importer that detects its format; nullopt when the
// directory declares no quantization at all (a full-precision checkpoint).
// A config.json "quantization_config" or an hf_quant_config.json that no
// importer takes is refused naming its quant_method / producer.
std::optional<QuantPlan> import_quantization(const ConfigSources& sources);
std::optional<QuantPlan> import_quantization(const std::filesystem::path& dir);

// The preset whose semantics equal (weight, input) exactly, if any.
std::optional<std::string> matching_preset(const TensorQuant& weight,
                                           const std::optional<TensorQuant>& input);

}  // namespace oasr::quant
