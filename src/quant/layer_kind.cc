#include "quant/layer_kind.h"

#include <algorithm>

#include "core/error.h"

namespace oasr::quant {
namespace {

constexpr LayerKind kAllKinds[] = {LayerKind::kLinear, LayerKind::kPointwiseConv,
                                   LayerKind::kConv1d, LayerKind::kConv2d};

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

void add_kind_name(std::string_view name, std::vector<bool>& chosen) {
  name = trimmed(name);
  if (name == "all") {
    chosen.assign(chosen.size(), true);
    return;
  }
  if (name == "conv") {
    chosen[static_cast<size_t>(LayerKind::kConv1d)] = true;
    chosen[static_cast<size_t>(LayerKind::kConv2d)] = true;
    return;
  }
  for (LayerKind kind : kAllKinds) {
    if (to_string(kind) == name) {
      chosen[static_cast<size_t>(kind)] = true;
      return;
    }
  }
  OASR_THROW(kInvalidArgument, "unknown module type '", name,
             "' in module_types; accepted: linear, pointwise_conv, conv1d, conv2d, conv (every "
             "convolution kind), all");
}

std::vector<LayerKind> chosen_kinds(const std::vector<bool>& chosen) {
  std::vector<LayerKind> kinds;
  for (LayerKind kind : kAllKinds) {
    if (chosen[static_cast<size_t>(kind)]) kinds.push_back(kind);
  }
  OASR_CHECK(!kinds.empty(), kInvalidArgument,
             "module_types is empty; name at least one of linear, pointwise_conv, conv1d, conv2d");
  return kinds;
}

}  // namespace

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::kLinear:
      return "linear";
    case LayerKind::kPointwiseConv:
      return "pointwise_conv";
    case LayerKind::kConv1d:
      return "conv1d";
    case LayerKind::kConv2d:
      return "conv2d";
  }
  return "?";
}

bool is_convolution(LayerKind kind) {
  return kind == LayerKind::kConv1d || kind == LayerKind::kConv2d;
}

std::vector<LayerKind> parse_layer_kinds(std::string_view text) {
  std::vector<bool> chosen(std::size(kAllKinds), false);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    add_kind_name(text.substr(start, end - start), chosen);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return chosen_kinds(chosen);
}

std::vector<LayerKind> parse_layer_kinds(const std::vector<std::string>& names) {
  std::vector<bool> chosen(std::size(kAllKinds), false);
  for (const std::string& name : names) {
    for (LayerKind kind : parse_layer_kinds(name)) chosen[static_cast<size_t>(kind)] = true;
  }
  return chosen_kinds(chosen);
}

std::vector<LayerKind> default_layer_kinds() {
  return {LayerKind::kLinear, LayerKind::kPointwiseConv};
}

}  // namespace oasr::quant
