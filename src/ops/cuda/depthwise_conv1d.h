// CUDA body of ops/depthwise_conv1d.h: contiguous buffers of one dtype
// (float32, float16 or bfloat16) on one CUDA device. Each output sums its
// taps in increasing k in float32 with separately rounded multiplies and
// adds (no fma), skipping taps that fall on the zero padding, then adds the
// bias, exactly as ops/cpu/depthwise_conv1d.cc does: float32 results are
// bit-identical to the CPU body; float16/bfloat16 differ from it only by the
// rounding of inputs and the one final rounding to the dtype.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace oasr::ops::cuda {

// x [batch, channels, length], weight [channels, kernel], bias [channels] or
// null -> out [batch, channels, out_length];
// out[b, c, t] = sum_k weight[c, k] * x[b, c, t + k - pad_left] (+ bias[c]).
void depthwise_conv1d(const void* x, const void* weight, const void* bias, void* out, DType dtype,
                      int device_index, int64_t batch, int64_t channels, int64_t length,
                      int64_t kernel, int64_t pad_left, int64_t out_length);

// x [batch, length, 2 * channels] -> out [batch, out_length, channels]:
// out[b, t, c] = sum_k weight[c, k] * g[b, t + k - pad_left, c] (+ bias[c]) with
// g[b, s, c] = x[b, s, c] * sigmoid(x[b, s, channels + c]) rounded to the
// dtype (ops/cuda/glu.cu's formula), the taps summed as above. Kernels of up
// to kMaxGluKernel taps (the shared-memory tile holds the halo).
inline constexpr int64_t kMaxGluKernel = 63;
void glu_depthwise_conv1d_channels_last(const void* x, const void* weight, const void* bias,
                                        void* out, DType dtype, int device_index, int64_t batch,
                                        int64_t channels, int64_t length, int64_t kernel,
                                        int64_t pad_left, int64_t out_length);

}  // namespace oasr::ops::cuda
