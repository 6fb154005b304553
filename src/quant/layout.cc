#include "quant/layout.h"

#include <algorithm>

namespace oasr::quant {

std::string_view to_string(SmoothFold fold) {
  switch (fold) {
    case SmoothFold::kNormAffine:
      return "norm_affine";
    case SmoothFold::kVToO:
      return "v_to_o";
    case SmoothFold::kProducerRows:
      return "producer_rows";
    case SmoothFold::kRuntime:
      return "runtime";
  }
  return "?";
}

const SmoothGroup* QuantLayout::group_of(const std::string& path) const {
  for (const SmoothGroup& group : smooth_groups) {
    if (std::find(group.consumers.begin(), group.consumers.end(), path) != group.consumers.end()) {
      return &group;
    }
  }
  return nullptr;
}

const GemmChain* QuantLayout::chain_into(const std::string& consumer) const {
  for (const GemmChain& chain : gemm_chains) {
    if (chain.consumer == consumer) return &chain;
  }
  return nullptr;
}

const GemmChain* QuantLayout::chain_from(const std::string& producer) const {
  for (const GemmChain& chain : gemm_chains) {
    if (chain.producer == producer) return &chain;
  }
  return nullptr;
}

}  // namespace oasr::quant
