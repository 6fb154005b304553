// Numerically stable softmax along one dimension, and the masked form
// attention uses.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// softmax(x) along `dim` (negative counts from the end). float32.
Tensor softmax(const Tensor& x, int64_t dim = -1);

// Softmax over the kept positions only. `mask` is uint8 and broadcasts to x
// with PyTorch's rule (aligned from the right, each mask dimension 1 or equal
// to x's; missing leading dimensions count as 1): nonzero = keep, 0 = masked.
// Masked positions get exactly 0. A row with no kept position is all zeros,
// which is what WeNet's attention produces (masked_fill(-inf), softmax, then
// masked_fill(0) over the NaNs of the empty row).
Tensor masked_softmax(const Tensor& x, const Tensor& mask, int64_t dim = -1);

}  // namespace oasr::ops
