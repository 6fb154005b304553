// CUDA body of ops/log_softmax.h. x and out are contiguous with the logical
// shape [outer, length, inner], on one CUDA device, of one dtype (float32,
// float16 or bfloat16); log-softmax runs along `length`.
//
// Per row, in float32: m = max x (NaN propagates), s = sum expf(x - m) (block
// reduction for inner == 1, sequential otherwise), y = (x - m) - logf(s),
// rounded once to the dtype. The CPU body sums in double and subtracts log(s)
// in double, so float32 results differ from it by s's float32 reassociation
// and expf/logf's own error (CUDA's expf/logf are within 2 ulps): an absolute
// error of a few 1e-7 in y for rows of up to ~10^4 elements, not bitwise.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops::cuda {

void log_softmax(const Tensor& x, const Tensor& out, int64_t outer, int64_t length, int64_t inner);

}  // namespace oasr::ops::cuda
