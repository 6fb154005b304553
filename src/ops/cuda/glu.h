// CUDA body of ops/glu.h. x is contiguous [outer, 2 * half, inner] and out
// contiguous [outer, half, inner], on one CUDA device, of one dtype (float32,
// float16 or bfloat16). out = first * sigmoid(gate) with core/activations.h's
// sigmoid and one float32 product, rounded once to the dtype: float32 results
// are bit-equal to the CPU body.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops::cuda {

void glu(const Tensor& x, const Tensor& out, int64_t outer, int64_t half, int64_t inner);

}  // namespace oasr::ops::cuda
