// Layer normalization over the last dimension (PyTorch F.layer_norm with
// normalized_shape = [D]; biased variance), and the fused residual forms a
// pre-norm Transformer/Conformer block uses between sublayers. CPU: float32;
// CUDA: float32, float16, bfloat16, every tensor of one dtype (statistics in
// float32; results rounded once to the dtype; see ops/cuda/layer_norm.h for
// how close each is to the CPU reference).
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

// x [..., D]; weight and bias are [D] or undefined (then 1 and 0).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);

struct AddLayerNormResult {
  Tensor sum;         // the new residual stream, x's dtype
  Tensor normalized;  // layer_norm(sum)
};

// sum = residual + x (float32 addition, rounded to x's dtype); normalized =
// layer_norm(sum, ...) of that rounded sum. x and residual have the same
// shape; nothing is broadcast.
AddLayerNormResult add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                  const Tensor& bias, float eps);

// sum = residual + alpha * x (two float32 roundings, no fma: the same bits as
// PyTorch's `residual + alpha * x`), then normalized as above. With alpha = 0.5
// this is the Conformer's macaron half-step feed-forward residual.
AddLayerNormResult add_scaled_layer_norm(const Tensor& x, const Tensor& residual, float alpha,
                                         const Tensor& weight, const Tensor& bias, float eps);

}  // namespace oasr::ops
