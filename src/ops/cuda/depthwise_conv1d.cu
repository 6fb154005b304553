#include "ops/cuda/depthwise_conv1d.h"

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One thread per output element, consecutive threads on consecutive t so
// the loads of x and the store are coalesced. __fmul_rn/__fadd_rn keep the
// product and the sum separately rounded whatever -fmad says.
template <typename T>
__global__ void depthwise_conv1d_kernel(const T* x, const T* weight, const T* bias, T* out,
                                        int64_t rows, int64_t length, int64_t channels,
                                        int64_t kernel, int64_t pad_left, int64_t out_length) {
  const int64_t total = rows * out_length;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / out_length;  // b * channels + c
    const int64_t t = i - row * out_length;
    const int64_t c = row % channels;
    const T* signal = x + row * length;
    const T* taps = weight + c * kernel;
    float acc = 0.0f;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t source = t + k - pad_left;
      if (source < 0 || source >= length) continue;  // zero padding: no term
      acc = __fadd_rn(acc, __fmul_rn(to_float(taps[k]), to_float(signal[source])));
    }
    if (bias != nullptr) acc = __fadd_rn(acc, to_float(bias[c]));
    out[i] = from_float<T>(acc);
  }
}

}  // namespace

void depthwise_conv1d(const void* x, const void* weight, const void* bias, void* out, DType dtype,
                      int device_index, int64_t batch, int64_t channels, int64_t length,
                      int64_t kernel, int64_t pad_left, int64_t out_length) {
  const int64_t total = batch * channels * out_length;
  if (total == 0) return;
  CudaDeviceGuard guard(device_index);
  dispatch_float(dtype, "depthwise_conv1d", [&](auto tag) {
    using T = decltype(tag);
    depthwise_conv1d_kernel<T><<<grid_for(total), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<T*>(out), batch * channels, length, channels, kernel, pad_left, out_length);
  });
  check_launch("depthwise_conv1d");
}

}  // namespace oasr::ops::cuda
