// CUDA bodies of ops/elementwise.h. Every tensor is contiguous, on one CUDA
// device and of one dtype (float32, float16 or bfloat16); out has a's shape
// and b repeats every b.numel() elements of a (the front's suffix broadcast).
// Each element is computed in float32 with the CPU body's operations in the
// CPU body's order (one rounding per operation, no fma) and rounded once to
// the dtype, so float32 results are bit-equal to ops/cpu/elementwise.h.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void add(const Tensor& a, const Tensor& b, const Tensor& out);
void mul(const Tensor& a, const Tensor& b, const Tensor& out);
// out = a + (alpha * b): the product is rounded before the sum.
void add_scaled(const Tensor& a, const Tensor& b, float alpha, const Tensor& out);
void scale(const Tensor& x, float factor, const Tensor& out);

}  // namespace oasr::ops::cuda
