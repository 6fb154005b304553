// Elementwise arithmetic: float32 on the CPU; float32, float16 or bfloat16 on
// CUDA (a and b of one dtype, computed in float32 and rounded once to it;
// float32 gives the CPU's bits). The result has a's shape, dtype and device;
// b is either of a's shape or broadcast over a's leading dimensions: after
// dropping b's leading size-1 dimensions, b's shape must be a suffix of a's
// (so [D], [1, D], a scalar [] or [1] all apply to a [..., D]). Anything else
// is refused naming both shapes.
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

Tensor add(const Tensor& a, const Tensor& b);                      // a + b
Tensor mul(const Tensor& a, const Tensor& b);                      // a * b
Tensor add_scaled(const Tensor& a, const Tensor& b, float alpha);  // a + alpha * b
Tensor scale(const Tensor& x, float factor);                       // x * factor

}  // namespace oasr::ops
