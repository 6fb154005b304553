// CUDA body of ops/depthwise_conv2d.h: contiguous buffers of one dtype
// (float32, float16 or bfloat16) on one device, the taps summed in float32
// in the order the front states, products and sums separately rounded, so
// float32 results are the CPU body's bits.
#pragma once

#include "core/dtype.h"
#include "ops/cpu/depthwise_conv2d.h"

namespace oasr::ops::cuda {

void depthwise_conv2d(const void* x, const void* weight, const void* bias, void* out, DType dtype,
                      int device_index, const cpu::DepthwiseConv2dShape& shape);

}  // namespace oasr::ops::cuda
