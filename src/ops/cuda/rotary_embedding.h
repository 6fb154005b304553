// CUDA body of ops/rotary_embedding.h: contiguous x / out [rows, heads,
// head_dim] of one dtype (float32, float16, bfloat16), positions int64 [rows]
// and inv_freq float32 [head_dim / 2] on the same device. The angle is the
// same float32 product as the CPU body's and its cos / sin are computed in
// double and rounded once to float32, as the CPU body does, so float32
// results equal the CPU body's wherever the double cos / sin of the two
// libraries round to the same float (all but rare ties).
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                      const Tensor& out);

}  // namespace oasr::ops::cuda
