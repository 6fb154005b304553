// CUDA body of ops/rms_norm.h. Tensors are contiguous, on one CUDA device, of
// one dtype (float32, float16 or bfloat16); x and out hold rows of
// x.size(-1) features; weight is [D] or undefined (then 1).
//
// A block per row, in float32:
//   ms   = (sum_d v_d^2) / D     block reduction (the order depends on D only)
//   rstd = 1 / sqrt(ms + eps)    correctly rounded sqrt and divide
//   h_d  = T(v_d * rstd)         rounded to the dtype, as Qwen2RMSNorm's
//                                hidden_states.to(input_dtype)
//   y_d  = T(w_d * h_d)
// The CPU body sums in double and rounds once, so float32 results differ
// from it by the float32 reassociation of the row sum plus two roundings (a
// few ulps of |y|), not bitwise.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);

}  // namespace oasr::ops::cuda
