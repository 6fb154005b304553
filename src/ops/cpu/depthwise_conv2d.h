// CPU body of ops/depthwise_conv2d.h over contiguous float32 buffers, in the
// summation order that header states (the contract the CUDA body follows).
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

struct DepthwiseConv2dShape {
  int64_t batch, channels, in_h, in_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int64_t out_h, out_w;
};

void depthwise_conv2d_f32(const float* x, const float* weight, const float* bias, float* out,
                          const DepthwiseConv2dShape& shape);

}  // namespace oasr::ops::cpu
