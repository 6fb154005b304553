// QuantizationRequest (what a user asks for: a scheme, or {scheme, ignore,
// module_types, kv_cache}), QuantizationConfig (the same, validated once)
// and QuantizationSpec (what is served: which layer
// gets which scheme, the KV-cache format, and provenance -- the producer,
// with the layers left full precision and why). A native quantized
// checkpoint carries the spec in oasr_config.json ("quantization"), where it
// is authoritative; online quantization derives one from a config
// (apply.h: spec_from_config).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quant/format.h"
#include "quant/layer_kind.h"

namespace oasr::quant {

inline constexpr const char* kKvCacheFp8 = "fp8_e4m3";

// What a user asks of quantization, as given: the fields of the CLI's
// --quantization / --quantization-option, the Python dict, the server's
// config. Unvalidated: QuantizationConfig::parse() turns it into a config.
struct QuantizationRequest {
  std::string scheme{};               // a preset name; empty = no weight quantization
  std::vector<std::string> ignore{};  // module-path globs kept full precision
  std::optional<std::vector<LayerKind>> module_types{};  // unset: linear, pointwise_conv
  std::string kv_cache{};                                // "" (served dtype) or "fp8_e4m3"

  // A scheme string, or {"scheme", "ignore" (glob or list), "module_types"
  // (comma list or list), "kv_cache"}; unknown keys and mistyped values are
  // refused.
  static QuantizationRequest from_json(const nlohmann::json& value);
  // The CLI form: --quantization SCHEME and repeatable --quantization-option
  // key=value with keys ignore=GLOB[,GLOB...], module_types=KIND[,KIND...],
  // kv_cache=fp8_e4m3.
  static QuantizationRequest from_options(const std::string& scheme,
                                          const std::vector<std::string>& options);
};

// A quantization request that has been validated: only parse() (and the
// from_* shorthands) make a non-empty one, so every layer that takes a
// QuantizationConfig -- the engine, the load sequence, spec selection --
// takes it as valid and checks nothing again. Validated once, at the edge
// that parses the user's text.
class QuantizationConfig {
 public:
  QuantizationConfig() = default;  // nothing asked

  // Refuses: an unknown scheme (listing the presets), one no method serves
  // (nvfp4, by name), ignore / module_types without a scheme, an unknown
  // kv_cache format.
  static QuantizationConfig parse(QuantizationRequest request);
  static QuantizationConfig from_json(const nlohmann::json& value) {
    return parse(QuantizationRequest::from_json(value));
  }
  static QuantizationConfig from_options(const std::string& scheme,
                                         const std::vector<std::string>& options) {
    return parse(QuantizationRequest::from_options(scheme, options));
  }

  const std::string& scheme() const { return request_.scheme; }
  const std::vector<std::string>& ignore() const { return request_.ignore; }
  const std::optional<std::vector<LayerKind>>& module_types() const {
    return request_.module_types;
  }
  const std::string& kv_cache() const { return request_.kv_cache; }
  const QuantizationRequest& request() const { return request_; }

  bool empty() const;  // nothing asked
  std::string dump() const;
  std::vector<LayerKind> kinds() const {
    return request_.module_types.value_or(default_layer_kinds());
  }

  // Times parse() validated a request in this process: a --quantization
  // string is validated once from flag to kernel (tests check it).
  static int64_t parse_count();

 private:
  explicit QuantizationConfig(QuantizationRequest request) : request_(std::move(request)) {}
  QuantizationRequest request_;
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
