// CPU body of ops/depthwise_conv1d.h over contiguous float32 buffers.
//
// Summation order (the contract a CUDA body reproduces to match bitwise):
// each output starts from +0.0f and adds weight[k] * x[t + k - pad_left] for
// k = 0, 1, ..., K-1 in that order, each product and each sum rounded to
// float32 (no fma); taps that fall on the zero padding are skipped. The bias,
// when given, is added last: y = sum + bias[c].
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// x [batch, channels, length], weight [channels, kernel], bias [channels] or
// null -> out [batch, channels, out_length].
void depthwise_conv1d_f32(const float* x, const float* weight, const float* bias, float* out,
                          int64_t batch, int64_t channels, int64_t length, int64_t kernel,
                          int64_t pad_left, int64_t out_length);

// The same convolution, channels-last: x [batch, length, channels] -> out
// [batch, out_length, channels], each output summed in the order above (so
// it equals transposing, depthwise_conv1d_f32 and transposing back, bit for
// bit). Eight channels at a time where the CPU has AVX2; split over the
// worker pool by (batch, time chunk).
void depthwise_conv1d_channels_last_f32(const float* x, const float* weight, const float* bias,
                                        float* out, int64_t batch, int64_t channels, int64_t length,
                                        int64_t kernel, int64_t pad_left, int64_t out_length);

}  // namespace oasr::ops::cpu
