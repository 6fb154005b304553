// quantize_per_token and quantize_static (quantize_cuda.h).
//
// Per token: a row's amax is a parallel max of |x_j * smooth_inv_j| (max is
// order-independent, so it has detail::row_amax's bits), then every element
// is quantized with multiplier = Q / amax, exactly quantize_row_dynamic_*.
// Rows of up to kWarpRowMaxK elements take one warp each (eight rows per
// block); longer rows take a block. Both read the row twice (amax, then
// quantize); the second read comes from cache.
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/kernels/cuda/quantize_device.cuh"

namespace oasr::quant::cuda {
namespace {

using ops::cuda::current_stream;

constexpr int64_t kWarpRowMaxK = 1024;
constexpr int kWarpsPerBlock = 8;

// The rows handled by one group of threads: a warp (kWarpPerRow) or the block.
// Every element goes through kVec-wide chunks (k % kVec == 0).
template <typename T, bool kE4m3, int kVec, bool kWarpPerRow>
__global__ void quantize_per_token_kernel(const T* x, const float* smooth_inv, int64_t m, int64_t k,
                                          uint8_t* q, float* scale) {
  using Format = Format8<kE4m3>;
  __shared__ float scratch[32];
  const int lane = kWarpPerRow ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x);
  const int group_size = kWarpPerRow ? 32 : static_cast<int>(blockDim.x);
  const int64_t groups_per_block = kWarpPerRow ? blockDim.x / 32 : 1;
  const int64_t first_row =
      blockIdx.x * groups_per_block + (kWarpPerRow ? static_cast<int64_t>(threadIdx.x / 32) : 0);
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  const int64_t chunks = k / kVec;

  // x'_j of the chunk starting at j: x_j * smooth_inv_j (mul_rn) or x_j.
  auto load_smoothed = [&](const T* row_x, int64_t j, float(&values)[kVec]) {
    load_as_float<T, kVec>(row_x + j, values);
    if (smooth_inv != nullptr) {
      float factors[kVec];
      load_floats<kVec>(smooth_inv + j, factors);
#pragma unroll
      for (int i = 0; i < kVec; ++i) values[i] = act::detail::mul_rn(values[i], factors[i]);
    }
  };

  for (int64_t row = first_row; row < m; row += row_stride) {
    const T* row_x = x + row * k;
    float amax = 0.0f;
    for (int64_t c = lane; c < chunks; c += group_size) {
      float values[kVec];
      load_smoothed(row_x, c * kVec, values);
#pragma unroll
      for (int i = 0; i < kVec; ++i) amax = amax_step(amax, act::detail::abs_f32(values[i]));
    }
    if constexpr (kWarpPerRow) {
      amax = ops::cuda::warp_reduce(amax, AmaxOp{});
    } else {
      amax = ops::cuda::block_reduce(amax, AmaxOp{}, 0.0f, scratch);
    }
    amax = floor_amax(amax);
    const float multiplier = act::detail::div_rn(Format::kMax, amax);

    uint8_t* row_q = q + row * k;
    for (int64_t c = lane; c < chunks; c += group_size) {
      float values[kVec];
      load_smoothed(row_x, c * kVec, values);
      uint8_t bytes[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        bytes[i] = Format::quantize(act::detail::mul_rn(values[i], multiplier));
      }
      store_bytes<kVec>(row_q + c * kVec, bytes);
    }
    if (lane == 0) scale[row] = act::detail::div_rn(amax, Format::kMax);
  }
}

// q = quantize(x_j * multiplier_j) elementwise; a grid-stride loop over
// kVec-wide chunks (k % kVec == 0, so a chunk never straddles two rows).
template <typename T, bool kE4m3, int kVec>
__global__ void quantize_static_kernel(const T* x, const float* multiplier, int64_t k,
                                       int64_t chunks, uint8_t* q) {
  using Format = Format8<kE4m3>;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t first = c * kVec;
    float values[kVec];
    float factors[kVec];
    load_as_float<T, kVec>(x + first, values);
    load_floats<kVec>(multiplier + first % k, factors);
    uint8_t bytes[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      bytes[i] = Format::quantize(act::detail::mul_rn(values[i], factors[i]));
    }
    store_bytes<kVec>(q + first, bytes);
  }
}

// Whether rows of k elements of T at x (and fp32 [k] at per_channel, q
// bytes) can be read and written in 16-byte vectors of T.
template <typename T>
bool vectorizable(const T* x, const float* per_channel, int64_t k, const void* q) {
  constexpr int kVec = kVecOf<T>;
  return k % kVec == 0 && aligned_to(x, 16) && aligned_to(q, kVec) &&
         (per_channel == nullptr || aligned_to(per_channel, 16));
}

template <typename T, bool kE4m3, int kVec>
void launch_per_token(const T* x, const float* smooth_inv, int64_t m, int64_t k, uint8_t* q,
                      float* scale) {
  const int64_t chunks = k / kVec;
  if (k <= kWarpRowMaxK) {
    const int64_t blocks = (m + kWarpsPerBlock - 1) / kWarpsPerBlock;
    quantize_per_token_kernel<T, kE4m3, kVec, true>
        <<<ops::cuda::grid_for_rows(blocks), kWarpsPerBlock * 32, 0, current_stream()>>>(
            x, smooth_inv, m, k, q, scale);
  } else {
    quantize_per_token_kernel<T, kE4m3, kVec, false>
        <<<ops::cuda::grid_for_rows(m), ops::cuda::threads_for_row(chunks), 0, current_stream()>>>(
            x, smooth_inv, m, k, q, scale);
  }
}

}  // namespace

void quantize_per_token(QDType format, const void* x, DType x_dtype, const float* smooth_inv,
                        int64_t m, int64_t k, void* q, float* scale, int device_index) {
  constexpr const char* kOp = "quantize_per_token";
  OASR_CHECK(m >= 0 && k >= 0, kInvalidArgument, kOp, ": m and k must be >= 0, got m=", m,
             " k=", k);
  // k == 0 still has a scale per row (the floor's), like the CPU reference.
  if (m == 0) return;
  OASR_CHECK(scale != nullptr && (k == 0 || (x != nullptr && q != nullptr)), kInvalidArgument, kOp,
             ": x, q and scale must be device pointers, got a null one");
  ops::cuda::use_device(device_index);
  dispatch_format(format, kOp, [&](auto is_e4m3) {
    constexpr bool kE4m3 = decltype(is_e4m3)::value;
    ops::cuda::dispatch_float(x_dtype, kOp, [&](auto tag) {
      using T = decltype(tag);
      const T* typed_x = static_cast<const T*>(x);
      uint8_t* bytes = static_cast<uint8_t*>(q);
      if (vectorizable(typed_x, smooth_inv, k, q)) {
        launch_per_token<T, kE4m3, kVecOf<T>>(typed_x, smooth_inv, m, k, bytes, scale);
      } else {
        launch_per_token<T, kE4m3, 1>(typed_x, smooth_inv, m, k, bytes, scale);
      }
    });
  });
  ops::cuda::check_launch(kOp);
}

void quantize_static(QDType format, const void* x, DType x_dtype, const float* multiplier,
                     int64_t m, int64_t k, void* q, int device_index) {
  constexpr const char* kOp = "quantize_static";
  OASR_CHECK(m >= 0 && k >= 0, kInvalidArgument, kOp, ": m and k must be >= 0, got m=", m,
             " k=", k);
  if (m == 0 || k == 0) return;
  OASR_CHECK(x != nullptr && multiplier != nullptr && q != nullptr, kInvalidArgument, kOp,
             ": x, multiplier and q must be device pointers, got a null one");
  ops::cuda::use_device(device_index);
  dispatch_format(format, kOp, [&](auto is_e4m3) {
    constexpr bool kE4m3 = decltype(is_e4m3)::value;
    ops::cuda::dispatch_float(x_dtype, kOp, [&](auto tag) {
      using T = decltype(tag);
      const T* typed_x = static_cast<const T*>(x);
      uint8_t* bytes = static_cast<uint8_t*>(q);
      if (vectorizable(typed_x, multiplier, k, q)) {
        constexpr int kVec = kVecOf<T>;
        const int64_t chunks = m * k / kVec;
        quantize_static_kernel<T, kE4m3, kVec>
            <<<ops::cuda::grid_for(chunks), ops::cuda::kThreadsPerBlock, 0, current_stream()>>>(
                typed_x, multiplier, k, chunks, bytes);
      } else {
        quantize_static_kernel<T, kE4m3, 1>
            <<<ops::cuda::grid_for(m * k), ops::cuda::kThreadsPerBlock, 0, current_stream()>>>(
                typed_x, multiplier, k, m * k, bytes);
      }
    });
  });
  ops::cuda::check_launch(kOp);
}

}  // namespace oasr::quant::cuda
