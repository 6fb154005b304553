// CUDA bodies of ops/layer_norm.h. Tensors are contiguous, on one CUDA
// device, of one dtype (float32, float16 or bfloat16); x (and residual, sum,
// out) hold `rows` rows of x.size(-1) features; weight and bias are [D] or
// undefined (then 1 and 0).
//
// One warp per row (rows of up to 1024 features; a block per row beyond),
// everything in float32:
//   mean = (sum_d v_d) / D                 group reduction (warp shuffles)
//   var  = (sum_d (v_d - mean)^2) / D      second pass, biased like PyTorch
//   rstd = 1 / sqrt(var + eps)             correctly rounded sqrt and divide
//   y_d  = ((v_d - mean) * rstd) * w_d + b_d, each operation rounded, then
//          rounded once to the dtype
// The CPU body accumulates in double with one final rounding, so float32
// results differ from it by the float32 reassociation of the row sums plus a
// few roundings (a few ulps of |y|), not bitwise.
//
// Fused forms: sum_d = residual_d + (alpha * x_d) in float32 (two roundings,
// no fma: float32 sums are bit-equal to the CPU body), rounded to the dtype
// and stored; the row normalized is that ROUNDED sum (v_d = sum as stored),
// which is what PyTorch float16/bfloat16 eager computes for
// layer_norm(residual + alpha * x).
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                const Tensor& out);

void add_scaled_layer_norm(const Tensor& x, const Tensor& residual, float alpha,
                           const Tensor& weight, const Tensor& bias, float eps, const Tensor& sum,
                           const Tensor& normalized);

}  // namespace oasr::ops::cuda
