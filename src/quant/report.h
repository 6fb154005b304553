// What a quantized model serves, for ASREngine::quantization_info(), the
// engine's startup log and `oasr info`: the schemes, how many layers run
// 8-bit, the KV-cache format, and per layer its scheme, kernel lane and who
// quantizes its input; the layers left full precision, with why.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "quant/spec.h"

namespace oasr::quant {

struct LayerReport {
  std::string path;
  std::string type;    // the layer's type ("Linear", "PointwiseConv1d", ...)
  std::string kind;    // linear, pointwise_conv, conv1d, conv2d
  std::string scheme;  // int8_w8a8, ...
  std::string lane;    // the kernel lane bound at load ("cpu_avx2_int8")
  // The kernel configuration the lane runs, by rows M where it depends on
  // them ("M<=64: mma_sync_s8_... | M<=1024: ... | M>1024: ..."); the lane
  // name for a CPU lane.
  std::string kernel;
  std::string input_quantizer;  // who quantizes its input
};

struct QuantizationInfo {
  // "none" (full precision), "online" (weights quantized at load) or
  // "checkpoint" (a quantized native checkpoint).
  std::string source = "none";
  std::vector<std::string> schemes;
  std::string kv_cache;  // "" = the served dtype
  std::vector<LayerReport> layers;
  std::vector<SkippedLayer> skipped;
  // Standalone quantize launches of each encoder block, counted from the
  // armed links (quantize/apply_links.h add_link_report; spec "What each recipe
  // fuses"); empty when not computed.
  std::vector<int64_t> standalone_quantize_launches_per_block;

  bool enabled() const { return !layers.empty() || !kv_cache.empty(); }
  int64_t quantized_layers() const { return static_cast<int64_t>(layers.size()); }
  // "int8_w8a8 (online): 156 quantized layers, lanes cpu_avx2_int8 x156, KV cache served dtype, 4
  // skipped"
  std::string summary() const;
  // summary, then one line per quantized and per skipped layer.
  std::string details() const;
  nlohmann::ordered_json to_json() const;
};

}  // namespace oasr::quant
