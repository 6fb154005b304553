// The scaled-mm lanes a CUDA build registers (quant/lanes/scaled_mm_lane.h):
// compiled only in CUDA builds; the registry asks for them behind
// kBuiltWithCuda (core/device_dispatch.h).
#pragma once

#include <vector>

#include "quant/lanes/scaled_mm_lane.h"

namespace oasr::quant::cuda {

// native (CUTLASS sm90a), mma_sync and cublaslt, in that order.
std::vector<ScaledMMLane> builtin_lanes();

}  // namespace oasr::quant::cuda
