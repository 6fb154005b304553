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

// The Conformer convolution module's GLU and depthwise convolution in one
// pass over channels-last activations: x [B, T, 2C] (pointwise_conv1's
// output), weight [C, 1, K], bias [C] or undefined -> [B, T', C] with T' as
// above. Equal to depthwise_conv1d(glu(x, -1) transposed to [B, C, T]), then
// transposed back: on CUDA one kernel with no transposed copies, bit for bit
// (the GLU value is rounded to the dtype before the taps use it, and the taps
// sum as depthwise_conv1d's do); on the CPU that composition itself.
Tensor glu_depthwise_conv1d_channels_last(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          int64_t pad_left, int64_t pad_right);

}  // namespace oasr::ops
