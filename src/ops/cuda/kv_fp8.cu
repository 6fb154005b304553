#include "ops/cuda/kv_fp8.h"

#include "core/float_types.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// Vector i of x (contiguous, d elements each) is vector i % per_row of row
// i / per_row in codes / scales, whose rows start every codes_row /
// scales_row elements (per_row * d and per_row for contiguous outputs).
// With `at` (a KV store's token count, read here), a row's vectors start
// *at * heads slots in, and a slot past row_slots is not written (the host
// refuses such a step before it runs).
struct StoreOffset {
  const int32_t* at = nullptr;
  int64_t heads = 0;
  int64_t row_slots = 0;
};

template <typename T>
__global__ void quantize_kernel(const T* x, int64_t n, int64_t d, int64_t per_row,
                                int64_t codes_row, int64_t scales_row, uint8_t* codes,
                                float* scales, StoreOffset offset) {
  const int64_t first_slot = offset.at != nullptr ? int64_t{*offset.at} * offset.heads : 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* vector = x + i * d;
    float amax = 0.0f;
    for (int64_t j = 0; j < d; ++j) amax = fmaxf(amax, fabsf(to_float(vector[j])));
    const float scale = e4m3_pow2_scale(amax);
    const int64_t row = i / per_row;
    const int64_t slot = first_slot + i % per_row;
    if (offset.at != nullptr && (slot < 0 || slot >= offset.row_slots)) continue;
    scales[row * scales_row + slot] = scale;
    uint8_t* out = codes + row * codes_row + slot * d;
    for (int64_t j = 0; j < d; ++j)
      out[j] = f32_to_e4m3_bits(__fdiv_rn(to_float(vector[j]), scale));
  }
}

template <typename T>
void launch_quantize(const Tensor& x, int64_t n, int64_t d, int64_t per_row, int64_t codes_row,
                     int64_t scales_row, const Tensor& codes, const Tensor& scales,
                     StoreOffset offset = {}) {
  quantize_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
      static_cast<const T*>(x.raw_data()), n, d, per_row, codes_row, scales_row,
      static_cast<uint8_t*>(codes.raw_data()), static_cast<float*>(scales.raw_data()), offset);
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
    launch_quantize<decltype(tag)>(x, n, d, n, n * d, n, codes, scales);
  });
  check_launch("quantize_pow2_e4m3");
}

void quantize_pow2_e4m3_rows(const Tensor& x, const Tensor& codes, const Tensor& scales) {
  const int64_t d = x.size(3);
  const int64_t per_row = x.size(1) * x.size(2);
  const int64_t n = x.size(0) * per_row;
  if (n == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "quantize_pow2_e4m3", [&](auto tag) {
    launch_quantize<decltype(tag)>(x, n, d, per_row, codes.strides()[0], scales.strides()[0], codes,
                                   scales);
  });
  check_launch("quantize_pow2_e4m3");
}

void quantize_pow2_e4m3_rows_at(const Tensor& x, const Tensor& codes, const Tensor& scales,
                                const Tensor& past_tokens) {
  const int64_t d = x.size(3);
  const int64_t per_row = x.size(1) * x.size(2);
  const int64_t n = x.size(0) * per_row;
  if (n == 0) return;
  use_device(x.device().index);
  const StoreOffset offset{past_tokens.data<int32_t>(), x.size(2), codes.size(1) * codes.size(2)};
  dispatch_float(x.dtype(), "quantize_pow2_e4m3", [&](auto tag) {
    launch_quantize<decltype(tag)>(x, n, d, per_row, codes.strides()[0], scales.strides()[0], codes,
                                   scales, offset);
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
