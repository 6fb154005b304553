// Depthwise 1-d convolution (nn.Conv1d with groups = channels, stride 1,
// dilation 1) with explicit zero padding on each side: the Conformer
// convolution module's depthwise conv, causal (left K-1, right 0) or
// symmetric ((K-1)/2 on each side). float32 on the CPU; float32, float16 or
// bfloat16 on CUDA (all arguments one dtype and one device).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// x [B, C, T], weight [C, 1, K], bias [C] or undefined ->
// [B, C, T + pad_left + pad_right - K + 1]. y[b, c, t] =
// sum_k weight[c, 0, k] * xpad[b, c, t + k] (+ bias[c]), where xpad is x with
// pad_left zeros before and pad_right zeros after. A kernel longer than the
// padded input is refused (as PyTorch does).
Tensor depthwise_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t pad_left,
                        int64_t pad_right);

}  // namespace oasr::ops
