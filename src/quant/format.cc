#include "quant/format.h"

#include <array>

#include "core/error.h"
#include "quant/number_format.h"

namespace oasr::quant {
namespace {

TensorQuant per_channel_weight(QDType dtype) {
  return TensorQuant{.dtype = dtype, .granularity = Granularity::kPerChannel};
}
TensorQuant per_token_input(QDType dtype) {
  return TensorQuant{.dtype = dtype, .granularity = Granularity::kPerToken, .dynamic = true};
}
TensorQuant static_input(QDType dtype) {
  return TensorQuant{.dtype = dtype, .granularity = Granularity::kPerTensor, .dynamic = false};
}

const std::array<QuantScheme, 5>& presets() {
  static const std::array<QuantScheme, 5> kPresets = {
      QuantScheme{"int8_w8a8", per_channel_weight(QDType::kInt8), per_token_input(QDType::kInt8)},
      QuantScheme{"int8_w8a8_static", per_channel_weight(QDType::kInt8),
                  static_input(QDType::kInt8)},
      QuantScheme{"fp8_w8a8", per_channel_weight(QDType::kFp8E4M3),
                  per_token_input(QDType::kFp8E4M3)},
      QuantScheme{"fp8_w8a8_static", per_channel_weight(QDType::kFp8E4M3),
                  static_input(QDType::kFp8E4M3)},
      // NVFP4 (described, not served): E2M1 weights and inputs in blocks of 16
      // along K with e4m3 block scales and an fp32 global scale.
      QuantScheme{"nvfp4",
                  TensorQuant{.dtype = QDType::kNvfp4,
                              .granularity = Granularity::kBlock,
                              .micro_scaled = true,
                              .block_n = 1,
                              .block_k = 16},
                  TensorQuant{.dtype = QDType::kNvfp4,
                              .granularity = Granularity::kBlock,
                              .dynamic = true,
                              .micro_scaled = true,
                              .block_n = 1,
                              .block_k = 16}},
  };
  return kPresets;
}

}  // namespace

const QuantScheme& scheme_preset(std::string_view name) {
  for (const QuantScheme& scheme : presets()) {
    if (scheme.name == name) return scheme;
  }
  std::string known;
  for (const QuantScheme& scheme : presets()) {
    known += known.empty() ? "" : ", ";
    known += scheme.name;
  }
  OASR_THROW(kInvalidArgument, "unknown quantization scheme '", name, "'; known schemes: ", known);
}

std::vector<std::string> scheme_preset_names() {
  std::vector<std::string> names;
  for (const QuantScheme& scheme : presets()) names.push_back(scheme.name);
  return names;
}

std::string_view to_string(QDType dtype) {
  // Error messages name formats through here, so an unregistered id is
  // named, not thrown (number_format() is the lookup that refuses).
  const size_t registered = number_formats().size();
  if (static_cast<size_t>(dtype) >= registered) return "an unregistered number format";
  return number_format(dtype).name;
}

std::string_view to_string(Granularity granularity) {
  switch (granularity) {
    case Granularity::kPerTensor:
      return "per_tensor";
    case Granularity::kPerChannel:
      return "per_channel";
    case Granularity::kPerToken:
      return "per_token";
    case Granularity::kBlock:
      return "block";
  }
  return "?";
}

bool scheme_has_dynamic_input(const QuantScheme& scheme) {
  return scheme.input.has_value() && scheme.input->dynamic;
}

bool scheme_has_static_input(const QuantScheme& scheme) {
  return scheme.input.has_value() && !scheme.input->dynamic;
}

}  // namespace oasr::quant
