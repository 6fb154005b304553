// The elementwise activation op: y = act(x), with the shared host/device
// implementation of core/activations.h, so the CUDA body returns the CPU's
// bits for float32. CPU: float32; CUDA: float32, float16, bfloat16 (computed
// in float32, rounded once to the dtype).
#pragma once

#include "core/activations.h"
#include "core/tensor.h"

namespace oasr::ops {

// y = act(x) elementwise; any shape. kNone returns a copy.
Tensor activation(const Tensor& x, Activation activation);

// x = act(x) in place; x must be contiguous (a view's elements would be
// written through a temporary otherwise, which is refused rather than hidden).
void activation_inplace(const Tensor& x, Activation activation);

}  // namespace oasr::ops
