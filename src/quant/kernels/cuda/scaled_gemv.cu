// The int8 GEMV for M <= kGemvMaxRows (scaled_mm_cuda.h).
//
// One CTA of kWarps warps computes kWarps * kColsPerWarp output columns for
// all M rows. It first stages the M input rows as int8 in shared memory:
// copied (scaled_gemv_int8), or quantized on chip (quantize_gemv_int8: one
// warp per row, with quantize.cu's arithmetic, so the same bytes and scale).
// Then each warp walks K in 16-byte chunks, a chunk per lane, with dp4a into
// one int32 per (row, column), and reduces those across the warp by halving:
// each exchange sends half of the values a lane still holds, so a lane ends
// with one column pair of one row, which it stores through the shared
// epilogue. Integer sums are exact in any order, so the bits are the
// reference's whatever the grouping.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/device_guard.h"
#include "core/env.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/quantize_device.cuh"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"

namespace oasr::quant::cuda {
namespace {

using ops::cuda::current_stream;

constexpr int kWarps = 8;
constexpr int kColsPerWarp = 4;
constexpr int kColsPerBlock = kWarps * kColsPerWarp;
// The staged rows (and the row scales) stay within the 48 KiB of shared
// memory every GPU grants a CTA without an opt-in.
constexpr int64_t kMaxStagedBytes = 47 * 1024;
constexpr unsigned kFullMask = 0xffffffffu;

// How a CTA fills its staged rows.
enum class Staging { kCopy, kPerToken, kStatic };

struct StageParams {
  const void* x;            // kCopy: int8 [M, K]; else T [M, K]
  const float* a_scale;     // kCopy: [M]
  const float* smooth_inv;  // kPerToken: [K] or null
  const float* multiplier;  // kStatic: [K]
  float static_scale;       // kStatic: every row's scale
};

// M rounded up to the kernel's row count.
int rows_bucket(int64_t m) {
  int rows = 1;
  while (rows < m) rows *= 2;
  return rows;
}

// The 16 inputs of chunk c of a row, widened to float (and smoothed).
template <typename T>
__device__ __forceinline__ void load_chunk(const T* row, const float* smooth_inv, int64_t c,
                                           float (&values)[16]) {
  constexpr int kVec = kVecOf<T>;
#pragma unroll
  for (int part = 0; part < 16 / kVec; ++part) {
    float widened[kVec];
    load_as_float<T, kVec>(row + c * 16 + part * kVec, widened);
#pragma unroll
    for (int i = 0; i < kVec; ++i) values[part * kVec + i] = widened[i];
  }
  if (smooth_inv != nullptr) {
    float factors[16];
    load_floats<16>(smooth_inv + c * 16, factors);
#pragma unroll
    for (int i = 0; i < 16; ++i) values[i] = act::detail::mul_rn(values[i], factors[i]);
  }
}

__device__ __forceinline__ uint4 pack_bytes(const uint8_t (&bytes)[16]) {
  uint4 word;
  memcpy(&word, bytes, sizeof(word));
  return word;
}

// Row r of the staged input (chunks 16-byte words) and its scale, by one warp.
template <Staging kStaging, typename T>
__device__ __forceinline__ void stage_row(const StageParams& stage, int64_t r, int64_t chunks,
                                          int lane, uint4* staged, float* row_scale) {
  uint4* out = staged + r * chunks;
  if constexpr (kStaging == Staging::kCopy) {
    const uint4* in = static_cast<const uint4*>(stage.x) + r * chunks;
    for (int64_t c = lane; c < chunks; c += 32) out[c] = in[c];
    if (lane == 0) row_scale[r] = stage.a_scale[r];
  } else if constexpr (kStaging == Staging::kStatic) {
    const T* row = static_cast<const T*>(stage.x) + r * chunks * 16;
    for (int64_t c = lane; c < chunks; c += 32) {
      float values[16];
      load_chunk<T>(row, nullptr, c, values);
      float multiplier[16];
      load_floats<16>(stage.multiplier + c * 16, multiplier);
      uint8_t bytes[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        bytes[i] =
            static_cast<uint8_t>(quantize_int8(act::detail::mul_rn(values[i], multiplier[i])));
      }
      out[c] = pack_bytes(bytes);
    }
    if (lane == 0) row_scale[r] = stage.static_scale;
  } else {
    // quantize_row_dynamic_int8: the amax (a max, so any order), then each
    // element times Q / amax.
    const T* row = static_cast<const T*>(stage.x) + r * chunks * 16;
    float amax = 0.0f;
#pragma unroll 2
    for (int64_t c = lane; c < chunks; c += 32) {
      float values[16];
      load_chunk<T>(row, stage.smooth_inv, c, values);
#pragma unroll
      for (int i = 0; i < 16; ++i) amax = amax_step(amax, act::detail::abs_f32(values[i]));
    }
    amax = floor_amax(ops::cuda::warp_reduce(amax, AmaxOp{}));
    const float multiplier = act::detail::div_rn(kInt8Max, amax);
#pragma unroll 2
    for (int64_t c = lane; c < chunks; c += 32) {
      float values[16];
      load_chunk<T>(row, stage.smooth_inv, c, values);
      uint8_t bytes[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        bytes[i] = static_cast<uint8_t>(quantize_int8(act::detail::mul_rn(values[i], multiplier)));
      }
      out[c] = pack_bytes(bytes);
    }
    if (lane == 0) row_scale[r] = act::detail::div_rn(amax, kInt8Max);
  }
}

__device__ __forceinline__ int dot16(const uint4& a, const uint4& w, int acc) {
  acc = __dp4a(static_cast<int>(a.x), static_cast<int>(w.x), acc);
  acc = __dp4a(static_cast<int>(a.y), static_cast<int>(w.y), acc);
  acc = __dp4a(static_cast<int>(a.z), static_cast<int>(w.z), acc);
  return __dp4a(static_cast<int>(a.w), static_cast<int>(w.w), acc);
}

// Reduces v[0, kHeld) over the warp's lanes kOffset, kOffset / 2, .. 1
// apart. While a lane holds more than two values each exchange keeps half
// (the upper half on lanes with the offset's bit set, whose flat index
// `base` moves up by it); from two values on, both are summed whole.
template <int kSize, int kHeld, int kOffset>
__device__ __forceinline__ void reduce_scatter(int (&v)[kSize], int lane, int& base) {
  if constexpr (kOffset > 0) {
    if constexpr (kHeld > 2) {
      constexpr int kHalf = kHeld / 2;
      const bool upper = (lane & kOffset) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const int send = upper ? v[i] : v[i + kHalf];
        const int keep = upper ? v[i + kHalf] : v[i];
        v[i] = keep + __shfl_xor_sync(kFullMask, send, kOffset);
      }
      if (upper) base += kHalf;
      reduce_scatter<kSize, kHalf, kOffset / 2>(v, lane, base);
    } else {
      v[0] += __shfl_xor_sync(kFullMask, v[0], kOffset);
      v[1] += __shfl_xor_sync(kFullMask, v[1], kOffset);
      reduce_scatter<kSize, kHeld, kOffset / 2>(v, lane, base);
    }
  }
}

// The lanes that end with the same values as a lower lane (their bits below
// the halving steps' were only summed over): log2(kSize) - 1 halving steps
// use the offsets 16, 8, ..; the rest of the bits are duplicates.
template <int kSize>
__host__ __device__ constexpr int duplicate_lane_bits() {
  int halvings = 0;
  for (int held = kSize; held > 2; held /= 2) ++halvings;
  return (32 >> halvings) - 1;
}

template <Staging kStaging, typename T, int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_int8_kernel(StageParams stage, const int8_t* __restrict__ w, detail::EpilogueParams p,
                     int64_t k) {
  extern __shared__ uint4 staged[];  // kRows x (k / 16) words
  __shared__ float row_scale[kRows];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t chunks = k / 16;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kColsPerWarp;
  const bool active = col0 < p.n;  // N % 8 == 0: all four columns exist
  const uint4* w_rows = reinterpret_cast<const uint4*>(w) + col0 * chunks;

  // The first weight chunk is in flight while the CTA stages its input.
  uint4 weights[kColsPerWarp];
  if (active && lane < chunks) {
#pragma unroll
    for (int j = 0; j < kColsPerWarp; ++j) weights[j] = __ldg(w_rows + j * chunks + lane);
  }
  for (int r = warp; r < kRows; r += kWarps) {
    if (r < p.m) {
      stage_row<kStaging, T>(stage, r, chunks, lane, staged, row_scale);
    } else {
      for (int64_t c = lane; c < chunks; c += 32) staged[r * chunks + c] = make_uint4(0, 0, 0, 0);
    }
  }
  __syncthreads();
  if (!active) return;

  constexpr int kValues = kRows * kColsPerWarp;
  int acc[kValues];
#pragma unroll
  for (int i = 0; i < kValues; ++i) acc[i] = 0;
  for (int64_t c = lane; c < chunks; c += 32) {
    const bool more = c + 32 < chunks;
    uint4 next[kColsPerWarp];
    if (more) {
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) next[j] = __ldg(w_rows + j * chunks + c + 32);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4 a = staged[r * chunks + c];
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) {
        acc[r * kColsPerWarp + j] = dot16(a, weights[j], acc[r * kColsPerWarp + j]);
      }
    }
    if (more) {
#pragma unroll
      for (int j = 0; j < kColsPerWarp; ++j) weights[j] = next[j];
    }
  }

  int base = 0;
  reduce_scatter<kValues, kValues, 16>(acc, lane, base);
  constexpr int kDuplicateBits = duplicate_lane_bits<kValues>();
  if ((lane & kDuplicateBits) != 0) return;
  const int row = base / kColsPerWarp;
  if (row >= p.m) return;
  detail::store_epilogue_pair(p, row, col0 + base % kColsPerWarp, row_scale[row], acc[0], acc[1]);
}

template <Staging kStaging, typename T>
void launch_rows(const StageParams& stage, const ScaledMMArgs& args) {
  const detail::EpilogueParams p = detail::make_epilogue_params(args);
  const dim3 grid(static_cast<unsigned>((args.n + kColsPerBlock - 1) / kColsPerBlock));
  const size_t shared = static_cast<size_t>(rows_bucket(args.m) * args.k);
  const auto* w = static_cast<const int8_t*>(args.w);
  cudaStream_t stream = current_stream();
  // The kernel instance for the row bucket (1, 2, 4, 8, 16): the table's
  // index is log2 of the bucket.
  using Kernel = void (*)(StageParams, const int8_t*, detail::EpilogueParams, int64_t);
  constexpr Kernel kByBucket[] = {
      gemv_int8_kernel<kStaging, T, 1>, gemv_int8_kernel<kStaging, T, 2>,
      gemv_int8_kernel<kStaging, T, 4>, gemv_int8_kernel<kStaging, T, 8>,
      gemv_int8_kernel<kStaging, T, 16>};
  int index = 0;
  while ((1 << index) < rows_bucket(args.m)) ++index;
  kByBucket[index]<<<grid, kWarps * 32, shared, stream>>>(stage, w, p, args.k);
}

template <Staging kStaging>
void launch_typed(const StageParams& stage, DType x_dtype, const ScaledMMArgs& args) {
  switch (x_dtype) {
    case DType::kF16:
      launch_rows<kStaging, __half>(stage, args);
      return;
    case DType::kBF16:
      launch_rows<kStaging, __nv_bfloat16>(stage, args);
      return;
    case DType::kF32:
      launch_rows<kStaging, float>(stage, args);
      return;
    default:
      OASR_THROW(kUnsupported, "quantize_gemv_int8: the input dtype must be float32, float16 or ",
                 "bfloat16, got ", dtype_name(x_dtype));
  }
}

// The checks every GEMV launch makes on the GEMM half of its arguments.
void check_gemm_args(const ScaledMMArgs& args, const char* op) {
  OASR_CHECK(gemv_fits(args.format, args.m, args.n, args.k), kInvalidArgument, op,
             ": the GEMV does not run M=", args.m, " N=", args.n, " K=", args.k, " (format ",
             to_string(args.format), "); ask gemv_fits first");
  OASR_CHECK(
      args.served == DType::kF32 || args.served == DType::kF16 || args.served == DType::kBF16,
      kUnsupported, op, ": the served dtype must be float32, float16 or bfloat16, got ",
      dtype_name(args.served));
  OASR_CHECK(args.w != nullptr && args.w_scale != nullptr && args.out != nullptr, kInvalidArgument,
             op, ": w, w_scale and out must be device pointers");
  OASR_CHECK(aligned_to(args.w, 16), kInvalidArgument, op,
             ": w must be 16-byte aligned (16-byte loads)");
}

}  // namespace

bool gemv_fits(QDType format, int64_t m, int64_t n, int64_t k) {
  if (format != QDType::kInt8 || m < 1 || m > kGemvMaxRows || n <= 0 || k <= 0) return false;
  if (k % 16 != 0 || n % 8 != 0 || k > kInt8MaxExactK) return false;
  return rows_bucket(m) * k <= kMaxStagedBytes;
}

bool gemv_takes(QDType format, int64_t m, int64_t n, int64_t k) {
  return gemv_fits(format, m, n, k) && env::quant_gemv_enabled();
}

std::string gemv_kernel_name(int64_t m) {
  return "gemv_s8_r" + std::to_string(rows_bucket(m));
}

void scaled_gemv_int8(const ScaledMMArgs& args) {
  constexpr const char* kOp = "scaled_gemv_int8";
  check_gemm_args(args, kOp);
  OASR_CHECK(args.a != nullptr && args.a_scale != nullptr && aligned_to(args.a, 16),
             kInvalidArgument, kOp, ": a (16-byte aligned) and a_scale must be device pointers");
  CudaDeviceGuard guard(args.device_index);
  StageParams stage{args.a, args.a_scale, nullptr, nullptr, 0.0f};
  launch_rows<Staging::kCopy, int8_t>(stage, args);
  ops::cuda::check_launch(kOp);
}

bool quantize_gemv_takes(const GemvInput& input, QDType format, int64_t m, int64_t n, int64_t k) {
  return quantize_gemv_fits(input, format, m, n, k) && env::quant_gemv_enabled();
}

bool quantize_gemv_fits(const GemvInput& input, QDType format, int64_t m, int64_t n, int64_t k) {
  if (!gemv_fits(format, m, n, k)) return false;
  if (input.x == nullptr || !aligned_to(input.x, 16)) return false;
  if (input.smooth_inv != nullptr && !aligned_to(input.smooth_inv, 16)) return false;
  if (input.static_multiplier != nullptr && !aligned_to(input.static_multiplier, 16)) return false;
  return input.x_dtype == DType::kF32 || input.x_dtype == DType::kF16 ||
         input.x_dtype == DType::kBF16;
}

void quantize_gemv_int8(const GemvInput& input, const ScaledMMArgs& args) {
  constexpr const char* kOp = "quantize_gemv_int8";
  check_gemm_args(args, kOp);
  OASR_CHECK(quantize_gemv_fits(input, args.format, args.m, args.n, args.k), kInvalidArgument, kOp,
             ": x (float32, float16 or bfloat16) and its multipliers must be 16-byte aligned ",
             "device pointers; ask quantize_gemv_fits first");
  OASR_CHECK(input.static_multiplier == nullptr || input.smooth_inv == nullptr, kInvalidArgument,
             kOp, ": a static input folds its smoother into the multiplier; pass one of them");
  CudaDeviceGuard guard(args.device_index);
  StageParams stage{input.x, nullptr, input.smooth_inv, input.static_multiplier,
                    input.static_scale};
  if (input.static_multiplier != nullptr) {
    launch_typed<Staging::kStatic>(stage, input.x_dtype, args);
  } else {
    launch_typed<Staging::kPerToken>(stage, input.x_dtype, args);
  }
  ops::cuda::check_launch(kOp);
}

}  // namespace oasr::quant::cuda
