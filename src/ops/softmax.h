// Numerically stable softmax along one dimension, and the masked form
// attention uses. CPU: float32; CUDA: float32, float16, bfloat16 (float32
// math, one rounding to x's dtype; see ops/cuda/softmax.h for how close it is
// to the CPU reference). The result has x's dtype and device.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// softmax(x) along `dim` (negative counts from the end).
Tensor softmax(const Tensor& x, int64_t dim = -1);

// Softmax over the kept positions only. `mask` is uint8 on x's device and
// broadcasts to x
// with PyTorch's rule (aligned from the right, each mask dimension 1 or equal
// to x's; missing leading dimensions count as 1): nonzero = keep, 0 = masked.
// Masked positions get exactly 0. A row with no kept position is all zeros,
// which is what WeNet's attention produces (masked_fill(-inf), softmax, then
// masked_fill(0) over the NaNs of the empty row).
Tensor masked_softmax(const Tensor& x, const Tensor& mask, int64_t dim = -1);

}  // namespace oasr::ops
