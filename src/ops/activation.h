// The elementwise activation op: y = act(x) over a float32 tensor, with the
// shared host/device implementation of core/activations.h (so a CUDA body
// will return the same bits).
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
