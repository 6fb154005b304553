// The kinds of quantizable layer (QuantizationConfig.module_types): the
// dense GEMMs (linear, pointwise_conv) and the convolutions (conv1d, conv2d).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oasr::quant {

enum class LayerKind { kLinear, kPointwiseConv, kConv1d, kConv2d };

std::string_view to_string(LayerKind kind);  // "linear", "pointwise_conv", "conv1d", "conv2d"
bool is_convolution(LayerKind kind);         // conv1d, conv2d

// Parses a module_types list: names separated by commas, plus "conv" (every
// convolution kind) and "all" (every kind). Unknown names are refused with
// the accepted ones. Duplicates collapse; the order is the enum's.
std::vector<LayerKind> parse_layer_kinds(std::string_view text);
std::vector<LayerKind> parse_layer_kinds(const std::vector<std::string>& names);
// linear, pointwise_conv: what a request without module_types selects.
std::vector<LayerKind> default_layer_kinds();

}  // namespace oasr::quant
