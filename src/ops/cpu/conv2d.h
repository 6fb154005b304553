// CPU body of ops/conv2d.h: im2col + the GEMM of ops/cpu/gemm.h over contiguous NCHW
// float32 buffers.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

struct Conv2dShape {
  int64_t batch, in_channels, in_h, in_w;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w;
  int64_t out_h, out_w;  // as the front computed them
};

// out[n, co, oy, ox] = sum over (ci, i, j) of weight[co, ci, i, j] *
// x[n, ci, oy*stride_h - pad_h + i, ox*stride_w - pad_w + j] (zero outside x),
// then + bias[co] when bias is not null.
void conv2d_f32(const float* x, const float* weight, const float* bias, float* out,
                const Conv2dShape& shape);

}  // namespace oasr::ops::cpu
