#include "quantize/apply.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "layers/quantizable.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/number_format.h"

namespace oasr::quant {

std::map<std::string, Module*> modules_by_path(const Module& model) {
  std::map<std::string, Module*> out;
  for (auto& [path, module] : const_cast<Module&>(model).named_modules()) out[path] = module;
  return out;
}

namespace {

using layers::QuantizableLayer;

struct Candidate {
  std::string path;
  Module* module;
  QuantizableLayer* layer;
  LayerKind kind;
};

std::vector<Candidate> quantizable_layers(const Module& model) {
  std::vector<Candidate> out;
  for (auto& [path, module] : const_cast<Module&>(model).named_modules()) {
    auto* layer = dynamic_cast<QuantizableLayer*>(module);
    if (layer == nullptr) continue;
    out.push_back({path, module, layer, layer->quant_geometry().kind});
  }
  return out;
}

bool has_glob_chars(const std::string& text) {
  return text.find_first_of("*?[") != std::string::npos;
}

// A target that is a layer-kind name selects by kind; anything else is a glob.
std::optional<std::vector<LayerKind>> as_kinds(const std::string& target) {
  try {
    return parse_layer_kinds(target);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The static variant of a scheme (convolutions need a calibrated input scale).
QuantScheme static_variant(const QuantScheme& scheme) {
  if (scheme_has_static_input(scheme)) return scheme;
  const std::string name = scheme_family(scheme.name) + "_static";
  for (const std::string& preset : scheme_preset_names()) {
    if (preset == name) return scheme_preset(name);
  }
  QuantScheme out = scheme;
  out.name = name;
  out.input->dynamic = false;
  out.input->granularity = Granularity::kPerTensor;
  return out;
}

void check_kinds_allowed(const QuantScheme& scheme, const std::vector<LayerKind>& kinds,
                         const SpecOptions& options, const char* where) {
  for (LayerKind kind : kinds) {
    if (!is_convolution(kind)) continue;
    OASR_CHECK(number_format(scheme.weight.dtype).serves_convolution, kUnsupported, where, ": the ",
               to_string(kind), " kind cannot be quantized with ", scheme.name,
               ": convolutions are ", convolution_format_names(), " only; drop ", to_string(kind),
               " from module_types or use an int8 scheme");
    OASR_CHECK(!options.online, kUnsupported, where, ": the ", to_string(kind),
               " kind needs a calibrated static input scale, which online quantization cannot "
               "measure; write a quantized checkpoint with `oasr quantize SRC DST --module-types "
               "... --calib-manifest ...` and serve that, or drop ",
               to_string(kind), " from module_types");
  }
}

class SpecBuilder {
 public:
  SpecBuilder(const Module& model, const QuantLayout& layout, const SpecOptions& options,
              const std::vector<std::string>& ignore)
      : candidates_(quantizable_layers(model)),
        modules_(modules_by_path(model)),
        layout_(layout),
        options_(options),
        ignore_(ignore) {
    for (const std::string& glob : ignore_) check_ignore_glob(glob);
  }

  void select_kinds(const std::vector<LayerKind>& kinds, const QuantScheme& scheme) {
    check_kinds_allowed(scheme, kinds, options_, "quantization");
    for (const Candidate& c : candidates_) {
      if (std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end() || decided(c.path)) {
        continue;
      }
      if (const std::string why = ignored(c.path); !why.empty()) {
        skip(c.path, why);
        continue;
      }
      if (const std::string why = kept(c.path); !why.empty()) {
        skip(c.path, why);
        continue;
      }
      const QuantScheme chosen = is_convolution(c.kind) ? static_variant(scheme) : scheme;
      if (const std::string why = c.layer->quant_refusal(chosen); !why.empty()) {
        skip(c.path, why);
        continue;
      }
      add(c, chosen);
    }
  }

  void select_glob(const std::string& glob, const QuantScheme& scheme) {
    if (!has_glob_chars(glob)) {
      auto it = modules_.find(glob);
      OASR_CHECK(it != modules_.end(), kInvalidArgument, "quantization target '", glob,
                 "' names no module of the model");
      OASR_CHECK(dynamic_cast<QuantizableLayer*>(it->second) != nullptr, kUnsupported,
                 "quantization target '", glob, "' is a ", it->second->type_name(),
                 ", which is not quantizable (quantizable: Linear, LinearActivation, "
                 "PointwiseConv1d, Conv2d); remove it from the targets");
    }
    bool matched = false;
    for (const Candidate& c : candidates_) {
      if (!glob_match(glob, c.path)) continue;
      matched = true;
      if (decided(c.path) || !ignored(c.path).empty()) continue;
      const QuantScheme chosen = is_convolution(c.kind) ? static_variant(scheme) : scheme;
      check_kinds_allowed(chosen, {c.kind}, options_,
                          ("quantization target '" + glob + "'").c_str());
      const std::string why = c.layer->quant_refusal(chosen);
      OASR_CHECK(why.empty(), kUnsupported, "quantization target '", glob, "' names ",
                 c.module->type_name(), " '", c.path, "', which cannot be quantized with ",
                 chosen.name, ": ", why, "; remove it from the targets (or ignore it)");
      add(c, chosen);
    }
    OASR_CHECK(matched, kInvalidArgument, "quantization target '", glob,
               "' matches no quantizable layer of the model");
  }

  QuantizationSpec finish(nlohmann::ordered_json selection) {
    spec_.online = options_.online;
    spec_.producer["recipe"] =
        options_.recipe.empty() ? (options_.online ? "online" : "") : options_.recipe;
    spec_.producer["selection"] = std::move(selection);
    return std::move(spec_);
  }

 private:
  bool decided(const std::string& path) const {
    return spec_.find_layer(path) != nullptr ||
           std::any_of(spec_.skipped.begin(), spec_.skipped.end(),
                       [&](const SkippedLayer& s) { return s.path == path; });
  }
  // One rule for every ignore glob, however it came (--quantization-option,
  // a config object, oasr quantize --ignore): well formed, and naming at
  // least one quantizable layer -- a typo would otherwise quantize the layer
  // it meant to keep.
  void check_ignore_glob(const std::string& glob) const {
    int open_brackets = 0;
    bool escaped = false;
    for (const char c : glob) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '[') {
        ++open_brackets;
      } else if (c == ']' && open_brackets > 0) {
        --open_brackets;
      }
    }
    OASR_CHECK(!glob.empty() && open_brackets == 0 && !escaped, kInvalidArgument, "ignore glob '",
               glob,
               "' is malformed (empty, an unclosed '[' or a trailing '\\'); write a shell glob "
               "over layer paths such as 'encoder.encoders.0.*'");
    const bool matches = std::any_of(candidates_.begin(), candidates_.end(),
                                     [&](const Candidate& c) { return glob_match(glob, c.path); });
    OASR_CHECK(matches, kInvalidArgument, "ignore glob '", glob,
               "' matches no quantizable layer of the model",
               candidates_.empty() ? std::string()
                                   : " (paths look like '" + candidates_.front().path + "')",
               "; check its spelling");
  }

  std::string ignored(const std::string& path) const {
    for (const std::string& glob : ignore_) {
      if (glob_match(glob, path)) return "ignored (ignore=" + glob + ")";
    }
    return "";
  }
  std::string kept(const std::string& path) const {
    for (const QuantLayout::Kept& k : layout_.keep_full_precision) {
      if (glob_match(k.glob, path)) {
        return "kept full precision by the " +
               (layout_.architecture.empty() ? std::string("model") : layout_.architecture) +
               " layout: " + k.reason;
      }
    }
    return "";
  }
  void skip(const std::string& path, const std::string& reason) {
    spec_.skipped.push_back({path, reason});
  }
  void add(const Candidate& c, const QuantScheme& scheme) {
    check_servable(scheme);
    if (std::none_of(spec_.schemes.begin(), spec_.schemes.end(),
                     [&](const QuantScheme& s) { return s.name == scheme.name; })) {
      spec_.schemes.push_back(scheme);
    }
    spec_.layers.push_back({c.path, scheme.name, c.kind, false});
  }

  std::vector<Candidate> candidates_;
  std::map<std::string, Module*> modules_;
  const QuantLayout& layout_;
  const SpecOptions& options_;
  const std::vector<std::string>& ignore_;
  QuantizationSpec spec_;
};

void check_static_online(const QuantScheme& scheme, const SpecOptions& options) {
  OASR_CHECK(!options.online || !scheme_has_static_input(scheme), kUnsupported, "scheme ",
             scheme.name,
             " needs calibrated static input scales, which online quantization cannot measure; "
             "serve ",
             scheme_family(scheme.name),
             " online (per-token scales), or write a calibrated checkpoint with `oasr quantize`");
}

void check_kv_cache(const std::string& kv_cache, const QuantLayout& layout) {
  OASR_CHECK(kv_cache.empty() || layout.has_ar_kv_cache, kUnsupported, "kv_cache=", kv_cache,
             ": the ", layout.architecture.empty() ? std::string("model") : layout.architecture,
             " has no autoregressive decoder KV cache to store in fp8; drop kv_cache");
}

std::vector<std::string> kind_names(const std::vector<LayerKind>& kinds) {
  std::vector<std::string> names;
  for (LayerKind k : kinds) names.emplace_back(to_string(k));
  return names;
}

}  // namespace

QuantizationSpec spec_from_config(const QuantizationConfig& config, const Module& model,
                                  const QuantLayout& layout, const SpecOptions& options) {
  check_kv_cache(config.kv_cache(), layout);
  QuantizationSpec spec;
  if (config.scheme().empty()) {
    spec.kv_cache = config.kv_cache();
    return spec;
  }
  const QuantScheme& scheme = scheme_preset(config.scheme());
  check_static_online(scheme, options);
  SpecBuilder builder(model, layout, options, config.ignore());
  builder.select_kinds(config.kinds(), scheme);
  nlohmann::ordered_json selection;
  selection["scheme"] = config.scheme();
  selection["module_types"] = kind_names(config.kinds());
  selection["ignore"] = config.ignore();
  spec = builder.finish(selection);
  spec.kv_cache = config.kv_cache();
  return spec;
}

QuantizationSpec spec_from_rules(const std::vector<SelectionRule>& rules,
                                 const std::optional<QuantScheme>& default_scheme,
                                 const std::vector<std::string>& ignore, const Module& model,
                                 const QuantLayout& layout, const SpecOptions& options) {
  SpecBuilder builder(model, layout, options, ignore);
  nlohmann::ordered_json rule_list = nlohmann::ordered_json::array();
  for (const SelectionRule& rule : rules) {
    check_servable(rule.scheme);
    check_static_online(rule.scheme, options);
    for (const std::string& target : rule.targets) {
      if (auto kinds = as_kinds(target)) {
        builder.select_kinds(*kinds, rule.scheme);
      } else {
        builder.select_glob(target, rule.scheme);
      }
    }
    rule_list.push_back({{"targets", rule.targets}, {"scheme", rule.scheme.name}});
  }
  if (default_scheme) {
    check_servable(*default_scheme);
    check_static_online(*default_scheme, options);
    builder.select_kinds(default_layer_kinds(), *default_scheme);
  }
  nlohmann::ordered_json selection;
  selection["rules"] = rule_list;
  selection["default"] =
      default_scheme ? nlohmann::ordered_json(default_scheme->name) : nlohmann::ordered_json();
  selection["ignore"] = ignore;
  return builder.finish(selection);
}

QuantizationSpec resolve_checkpoint_spec(const QuantizationSpec& checkpoint,
                                         const QuantizationConfig& requested,
                                         const std::string& checkpoint_name) {
  const std::vector<std::string> names = checkpoint.scheme_names();
  std::string written;
  for (const std::string& n : names) written += (written.empty() ? "" : ", ") + n;
  if (written.empty()) written = "no weight scheme";
  OASR_CHECK(requested.ignore().empty() && !requested.module_types().has_value(), kInvalidArgument,
             checkpoint_name, " is a quantized checkpoint (", written,
             "): its layers are already chosen, so ignore / module_types do not apply; drop "
             "them, or quantize the full-precision checkpoint instead");
  if (!requested.scheme().empty()) {
    const std::string family = scheme_family(requested.scheme());
    const bool same = std::any_of(names.begin(), names.end(),
                                  [&](const std::string& n) { return scheme_family(n) == family; });
    OASR_CHECK(same, kInvalidArgument, checkpoint_name, " was quantized with ", written,
               "; it cannot be served as ", requested.scheme(),
               ". Its spec is authoritative: drop --quantization, or quantize the "
               "full-precision checkpoint with ",
               requested.scheme());
  }
  QuantizationSpec spec = checkpoint;
  spec.online = false;
  if (!requested.kv_cache().empty()) spec.kv_cache = requested.kv_cache();
  return spec;
}

void validate_spec_for_model(const QuantizationSpec& spec, const Module& model) {
  const auto modules = modules_by_path(model);
  for (const LayerQuantization& entry : spec.layers) {
    auto it = modules.find(entry.path);
    OASR_CHECK(it != modules.end(), kCorruptFile, "the quantization spec names layer '", entry.path,
               "', which the model does not have");
    auto* layer = dynamic_cast<QuantizableLayer*>(it->second);
    OASR_CHECK(layer != nullptr, kUnsupported, "the quantization spec names ",
               it->second->type_name(), " '", entry.path,
               "', which is not quantizable (quantizable: Linear, LinearActivation, "
               "PointwiseConv1d, Conv2d)");
    const LayerKind kind = layer->quant_geometry().kind;
    OASR_CHECK(kind == entry.kind, kCorruptFile, "the quantization spec says layer '", entry.path,
               "' is a ", to_string(entry.kind), ", but the model's is a ", to_string(kind));
    const QuantScheme& scheme = spec.scheme(entry.scheme);
    check_servable(scheme);
    const std::string why = layer->quant_refusal(scheme);
    OASR_CHECK(why.empty(), kUnsupported, "the quantization spec names ", it->second->type_name(),
               " '", entry.path, "', which cannot be quantized with ", entry.scheme, ": ", why);
  }
}

void prepare_quantized_slots(Module& model, const QuantizationSpec& spec) {
  validate_spec_for_model(spec, model);
  const auto modules = modules_by_path(model);
  for (const LayerQuantization& entry : spec.layers) {
    auto* layer = dynamic_cast<QuantizableLayer*>(modules.at(entry.path));
    layer->attach_quant_method(make_quant_method(spec.scheme(entry.scheme)),
                               entry.runtime_smoothed);
  }
}

void quantize_model_online(Module& model, const QuantizationSpec& spec) {
  validate_spec_for_model(spec, model);
  const auto modules = modules_by_path(model);
  for (const LayerQuantization& entry : spec.layers) {
    const QuantScheme& scheme = spec.scheme(entry.scheme);
    OASR_CHECK(!scheme_has_static_input(scheme) && !entry.runtime_smoothed, kUnsupported, "layer '",
               entry.path, "' needs calibrated tensors (",
               scheme_has_static_input(scheme) ? "input_scale" : "smooth_inv",
               ") that online quantization cannot produce; use `oasr quantize`");
    auto* layer = dynamic_cast<QuantizableLayer*>(modules.at(entry.path));
    layer->quantize_weight_online(make_quant_method(scheme));
  }
}

void bind_quantization(Module& model, BindOptions options) {
  if (options.backend.empty()) options.backend = scaled_mm_backend_from_env();
  for (auto& [path, module] : model.named_modules()) {
    if (auto* layer = dynamic_cast<QuantizableLayer*>(module)) layer->bind_quant(options);
  }
}

namespace {

// The configuration a bound method runs at a few row counts, merged where
// they agree: a decode step (M = 1), a short and a long batch.
std::string kernel_by_rows(const QuantMethod& method) {
  constexpr int64_t kRows[] = {1, 64, 1024, 32768};
  std::vector<std::pair<int64_t, std::string>> runs;  // (largest M of the run, kernel)
  for (int64_t m : kRows) {
    std::string name = method.kernel_name(m);
    if (!runs.empty() && runs.back().second == name) {
      runs.back().first = m;
    } else {
      runs.emplace_back(m, std::move(name));
    }
  }
  if (runs.size() == 1) return runs.front().second;
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!out.empty()) out += " | ";
    out += i + 1 < runs.size() ? "M<=" + std::to_string(runs[i].first) + ": "
                               : "M>" + std::to_string(runs[i - 1].first) + ": ";
    out += runs[i].second;
  }
  return out;
}

}  // namespace

QuantizationInfo quantization_info(const Module& model, const QuantizationSpec& spec) {
  QuantizationInfo info;
  info.kv_cache = spec.kv_cache;
  info.skipped = spec.skipped;
  info.schemes = spec.scheme_names();
  if (!spec.layers.empty())
    info.source = spec.online ? "online" : "checkpoint";
  else if (!spec.kv_cache.empty())
    info.source = "kv_cache only";
  const auto modules = modules_by_path(model);
  // In the model's module order, whatever order the spec lists its layers in.
  std::vector<const LayerQuantization*> ordered;
  for (auto& [path, module] : const_cast<Module&>(model).named_modules()) {
    if (const LayerQuantization* entry = spec.find_layer(path)) ordered.push_back(entry);
  }
  for (const LayerQuantization& entry : spec.layers) {
    if (modules.count(entry.path) == 0) ordered.push_back(&entry);
  }
  for (const LayerQuantization* entry_ptr : ordered) {
    const LayerQuantization& entry = *entry_ptr;
    LayerReport report;
    report.path = entry.path;
    report.kind = std::string(to_string(entry.kind));
    report.scheme = entry.scheme;
    auto it = modules.find(entry.path);
    if (it != modules.end()) {
      report.type = it->second->type_name();
      const auto* layer = dynamic_cast<const QuantizableLayer*>(it->second);
      const QuantMethod* method = layer != nullptr ? layer->quant_method() : nullptr;
      if (method != nullptr) {
        report.lane = method->bound() ? method->lane().name : "unbound";
        if (method->bound()) report.kernel = kernel_by_rows(*method);
        report.input_quantizer = method->input_quantizer();
      }
    }
    info.layers.push_back(report);
  }
  return info;
}

}  // namespace oasr::quant
