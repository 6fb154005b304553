// Numerically stable log-softmax along one dimension (PyTorch
// F.log_softmax): the CTC head's log-probabilities and the attention
// decoder's token scores.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// log(softmax(x)) along `dim` (negative counts from the end), any shape;
// the result has x's dtype and device. CPU: float32; CUDA: float32, float16,
// bfloat16 (float32 math, one rounding; see ops/cuda/log_softmax.h). A row
// holding +inf or NaN gives NaN where PyTorch does; a row of -inf gives NaN
// (log of an empty sum), as PyTorch does.
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace oasr::ops
