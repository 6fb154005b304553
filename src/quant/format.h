// The semantic quantization formats (QuantScheme): what a
// layer's weight and input are quantized to, with no scale layout, kernel or
// device decision. physical.h lowers a scheme to storage for a GPU
// generation; methods/ serve it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oasr::quant {

enum class QDType { kInt8, kFp8E4M3, kNvfp4, kInt4, kBf16 /* sentinel: not quantized */ };

enum class Granularity { kPerTensor, kPerChannel, kPerToken, kBlock };

// How one tensor (a weight or a layer's input) is quantized.
struct TensorQuant {
  QDType dtype = QDType::kBf16;
  Granularity granularity = Granularity::kPerTensor;
  bool symmetric = true;
  bool dynamic = false;       // activations only: the scale is computed at run time
  bool micro_scaled = false;  // NVFP4/MXFP4: in-block low-precision scales + a global scale
  int64_t block_n = 0, block_k = 0;

  bool operator==(const TensorQuant&) const = default;
};

// A layer's quantization decision. `input` empty = weight-only.
struct QuantScheme {
  std::string name;
  TensorQuant weight;
  std::optional<TensorQuant> input;
  bool online = false;

  bool operator==(const QuantScheme&) const = default;
};

// The presets, by name; an unknown name throws oasr::Error listing the known ones.
const QuantScheme& scheme_preset(std::string_view name);
// int8_w8a8, int8_w8a8_static, fp8_w8a8, fp8_w8a8_static, nvfp4
std::vector<std::string> scheme_preset_names();

std::string_view to_string(QDType dtype);
std::string_view to_string(Granularity granularity);

// True when the input scale is computed at run time per token (the *_w8a8 presets).
bool scheme_has_dynamic_input(const QuantScheme& scheme);
// True when the input scale is a calibrated per-tensor constant (the *_static presets).
bool scheme_has_static_input(const QuantScheme& scheme);

}  // namespace oasr::quant
