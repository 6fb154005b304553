#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/depthwise_conv2d.h"

namespace oasr::ops::cuda {
namespace {

// One thread per output element, consecutive threads on consecutive output
// columns. __fmul_rn / __fadd_rn keep every product and sum separately
// rounded whatever -fmad says (the CPU body's order).
template <typename T>
__global__ void depthwise_conv2d_kernel(const T* x, const T* weight, const T* bias, T* out,
                                        cpu::DepthwiseConv2dShape s) {
  const int64_t total = s.batch * s.channels * s.out_h * s.out_w;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % s.out_w;
    const int64_t oh = (i / s.out_w) % s.out_h;
    const int64_t plane = i / (s.out_w * s.out_h);
    const int64_t c = plane % s.channels;
    const T* image = x + plane * s.in_h * s.in_w;
    const T* taps = weight + c * s.kernel_h * s.kernel_w;
    float acc = 0.0f;
    for (int64_t r = 0; r < s.kernel_h; ++r) {
      const int64_t h = oh * s.stride_h + r - s.pad_h;
      if (h < 0 || h >= s.in_h) continue;
      for (int64_t q = 0; q < s.kernel_w; ++q) {
        const int64_t w = ow * s.stride_w + q - s.pad_w;
        if (w < 0 || w >= s.in_w) continue;
        acc = __fadd_rn(
            acc, __fmul_rn(to_float(taps[r * s.kernel_w + q]), to_float(image[h * s.in_w + w])));
      }
    }
    if (bias != nullptr) acc = __fadd_rn(acc, to_float(bias[c]));
    out[i] = from_float<T>(acc);
  }
}

}  // namespace

void depthwise_conv2d(const void* x, const void* weight, const void* bias, void* out, DType dtype,
                      int device_index, const cpu::DepthwiseConv2dShape& shape) {
  const int64_t total = shape.batch * shape.channels * shape.out_h * shape.out_w;
  if (total == 0) return;
  CudaDeviceGuard guard(device_index);
  dispatch_float(dtype, "depthwise_conv2d", [&](auto tag) {
    using T = decltype(tag);
    depthwise_conv2d_kernel<T><<<grid_for(total), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<T*>(out), shape);
  });
  check_launch("depthwise_conv2d");
}

}  // namespace oasr::ops::cuda
