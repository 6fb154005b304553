// Gated linear unit (PyTorch F.glu): split x in two halves along `dim`,
// return first * sigmoid(second). The Conformer convolution module uses it
// after its first pointwise convolution (dim = 1 of [B, 2C, T]).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// x float32 whose size along `dim` is even -> that size halved.
Tensor glu(const Tensor& x, int64_t dim = -1);

}  // namespace oasr::ops
