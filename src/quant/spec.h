// QuantizationConfig (what a user asks for: a scheme, or {scheme, ignore,
// module_types, kv_cache}) and QuantizationSpec (what is served: which layer
// gets which scheme, the KV-cache format, and provenance -- the producer,
// with the layers left full precision and why). A native quantized
// checkpoint carries the spec in oasr_config.json ("quantization"), where it
// is authoritative; online quantization derives one from a config
// (apply.h: spec_from_config).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "quant/format.h"
#include "quant/layer_kind.h"

namespace oasr::quant {

inline constexpr const char* kKvCacheFp8 = "fp8_e4m3";

struct QuantizationConfig {
  std::string scheme;               // a preset name; empty = no weight quantization
  std::vector<std::string> ignore;  // module-path globs kept full precision
  std::optional<std::vector<LayerKind>> module_types;  // unset: linear, pointwise_conv
  std::string kv_cache;                                // "" (served dtype) or "fp8_e4m3"

  bool empty() const;  // nothing asked
  // A scheme string, or {"scheme", "ignore" (glob or list), "module_types"
  // (comma list or list), "kv_cache"}; unknown keys are refused.
  static QuantizationConfig from_json(const nlohmann::json& value);
  // The CLI form: --quantization SCHEME and repeatable --quantization-option
  // key=value with keys ignore=GLOB[,GLOB...], module_types=KIND[,KIND...],
  // kv_cache=fp8_e4m3.
  static QuantizationConfig from_options(const std::string& scheme,
                                         const std::vector<std::string>& options);
  // Refuses: an unknown scheme (listing the presets), one no method serves
  // (nvfp4, by name), ignore / module_types without a scheme, an unknown
  // kv_cache format.
  void validate() const;
  std::string dump() const;
  std::vector<LayerKind> kinds() const { return module_types.value_or(default_layer_kinds()); }
};

// "a, b,,c " -> {"a", "b", "c"}: comma-separated items, spaces trimmed, empties dropped.
std::vector<std::string> split_comma_list(const std::string& text);

// The scheme's family: its name without "_static" (int8_w8a8_static -> int8_w8a8).
std::string scheme_family(const std::string& scheme_name);

struct LayerQuantization {
  std::string path;    // module path ("encoder.encoders.0.feed_forward.w_1")
  std::string scheme;  // a key of QuantizationSpec::schemes
  LayerKind kind = LayerKind::kLinear;
  bool runtime_smoothed = false;  // stores smooth_inv [K]
};

struct SkippedLayer {
  std::string path;
  std::string reason;
};

struct QuantizationSpec {
  std::vector<QuantScheme> schemes;       // every scheme a layer uses, by name
  std::vector<LayerQuantization> layers;  // module order
  std::string kv_cache;                   // "" or "fp8_e4m3"
  // true: the checkpoint holds full-precision weights that each layer
  // quantizes at load; false: the checkpoint holds the quantized tensors.
  bool online = false;
  std::vector<SkippedLayer> skipped;  // written as producer["skipped"]
  // Provenance: recipe, selection, manifest hash, alpha, ... (free-form; the
  // skipped list is kept in `skipped` and merged in on writing).
  nlohmann::ordered_json producer = nlohmann::ordered_json::object();

  bool empty() const { return layers.empty() && kv_cache.empty(); }
  const LayerQuantization* find_layer(const std::string& path) const;
  const QuantScheme& scheme(const std::string& name) const;  // kNotFound when absent
  std::vector<std::string> scheme_names() const;             // in first-use order

  // The "quantization" section of oasr_config.json.
  nlohmann::ordered_json to_json() const;
  // `what` names the document in errors (kCorruptFile naming the key).
  static QuantizationSpec from_json(const nlohmann::json& value, const std::string& what);
};

nlohmann::ordered_json scheme_to_json(const QuantScheme& scheme);
QuantScheme scheme_from_json(const std::string& name, const nlohmann::json& value,
                             const std::string& what);

}  // namespace oasr::quant
