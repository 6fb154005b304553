#include "ops/cuda/kv_fp8.h"

#include "core/float_types.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

template <typename T>
__global__ void quantize_kernel(const T* x, int64_t n, int64_t d, uint8_t* codes, float* scales) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* row = x + i * d;
    float amax = 0.0f;
    for (int64_t j = 0; j < d; ++j) amax = fmaxf(amax, fabsf(to_float(row[j])));
    const float scale = e4m3_pow2_scale(amax);
    scales[i] = scale;
    for (int64_t j = 0; j < d; ++j) {
      codes[i * d + j] = f32_to_e4m3_bits(__fdiv_rn(to_float(row[j]), scale));
    }
  }
}

template <typename T>
__global__ void dequantize_kernel(const uint8_t* codes, const float* scales, int64_t n, int64_t d,
                                  T* out) {
  const int64_t total = n * d;
  for (int64_t at = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; at < total;
       at += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[at] = from_float<T>(__fmul_rn(e4m3_bits_to_f32(codes[at]), scales[at / d]));
  }
}

}  // namespace

void quantize_pow2_e4m3(const Tensor& x, const Tensor& codes, const Tensor& scales) {
  const int64_t n = x.size(0);
  const int64_t d = x.size(1);
  if (n == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "quantize_pow2_e4m3", [&](auto tag) {
    using T = decltype(tag);
    quantize_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), n, d, static_cast<uint8_t*>(codes.raw_data()),
        static_cast<float*>(scales.raw_data()));
  });
  check_launch("quantize_pow2_e4m3");
}

void dequantize_pow2_e4m3(const Tensor& codes, const Tensor& scales, const Tensor& out) {
  const int64_t n = codes.size(0);
  const int64_t d = codes.size(1);
  if (n * d == 0) return;
  use_device(codes.device().index);
  dispatch_float(out.dtype(), "dequantize_pow2_e4m3", [&](auto tag) {
    using T = decltype(tag);
    dequantize_kernel<T><<<grid_for(n * d), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const uint8_t*>(codes.raw_data()), static_cast<const float*>(scales.raw_data()),
        n, d, static_cast<T*>(out.raw_data()));
  });
  check_launch("dequantize_pow2_e4m3");
}

}  // namespace oasr::ops::cuda
