// RMS normalization over the last dimension, as the Qwen2 / Llama language
// models define it (transformers' Qwen2RMSNorm):
//   rstd = 1 / sqrt(mean_d(x_d^2) + eps)      statistics in float32 or wider
//   y_d  = w_d * T(x_d * rstd)                the normalized value rounded to
//                                             x's dtype T before the weight
// CPU: float32 (sums in double, see ops/cpu/rms_norm.h); CUDA: float32,
// float16, bfloat16 (see ops/cuda/rms_norm.h for how close each is to the CPU
// reference). No bias, no mean subtraction.
#pragma once

#include "core/tensor.h"

namespace oasr::ops {

// x [..., D]; weight [D] (of x's dtype) or undefined (then 1).
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);

}  // namespace oasr::ops
