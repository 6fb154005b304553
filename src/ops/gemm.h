// Matrix products: float32 on the CPU; float32, float16 or bfloat16 on CUDA
// (all operands one dtype and one device; the result has both). linear() is
// nn.Linear's y = x W^T + b (weights in PyTorch's [out_features,
// in_features] layout, as checkpoints store them); matmul() is the plain,
// optionally batched product attention needs.
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

// How a float32 linear runs on the CPU (CUDA runs cuBLASLt either way):
// kBlas is OpenBLAS's GEMM (fast for many rows; it repacks the weight on
// every call); kRowDot is a fixed-order dot product per output
// (ops/cpu/linear_row_dot.h: for few rows against a large weight, such as
// a decoder step, and every row's bits independent of the other rows).
enum class LinearAlgorithm { kBlas, kRowDot };

// x [..., K], weight [N, K], bias [N] or undefined -> [..., N].
// K = 0 gives the bias (or zeros); zero rows give an empty result.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              LinearAlgorithm algorithm = LinearAlgorithm::kBlas);

// The weight kRowDot reads, prepared once (a layer keeps it): a float16 copy
// when every value of the float32 [N, K] weight is exactly a float16 (then
// the products are the same and a decode step reads half the bytes), else
// the weight itself. CPU float32 weights only.
Tensor prepare_row_dot_weight(const Tensor& weight);

// linear(x, weight, bias, kRowDot) on the CPU with a weight from
// prepare_row_dot_weight (float32 or float16; x and bias float32).
Tensor linear_row_dot(const Tensor& x, const Tensor& prepared_weight,
                      const Tensor& bias = Tensor());

// a [..., M, K] times b [..., K, N] (or b [..., N, K] with transpose_b) ->
// [..., M, N]. Both operands have the same rank (>= 2) and identical leading
// (batch) dimensions; nothing is broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_b = false);

}  // namespace oasr::ops
