// Gated linear unit (PyTorch F.glu): split x in two halves along `dim`,
// return first * sigmoid(second). The Conformer convolution module uses it
// after its first pointwise convolution (dim = 1 of [B, 2C, T]).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// x whose size along `dim` is even -> that size halved, same dtype and
// device. CPU: float32; CUDA: float32, float16, bfloat16 (float32 math, one
// rounding; float32 gives the CPU's bits).
Tensor glu(const Tensor& x, int64_t dim = -1);

}  // namespace oasr::ops
