// CUDA body of ops/activation.h. x and out are contiguous, on one CUDA
// device, of one dtype (float32, float16 or bfloat16); out may be x (in
// place). Each element runs core/activations.h on its float32 value and is
// rounded once to the dtype: float32 results are bit-equal to the CPU body.
#pragma once

#include "core/activations.h"
#include "core/tensor.h"

namespace oasr::ops::cuda {

void activation(const Tensor& x, const Tensor& out, Activation activation);

}  // namespace oasr::ops::cuda
