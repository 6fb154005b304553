// The scaled-GEMM epilogue on device, shared by the mma.sync kernels and the
// cublaslt lane's separate epilogue kernel so both store the same bits:
//   t = int8_epilogue(acc, ...) / fp8_epilogue(acc, ...)   (quant/numerics.h)
//   out = t rounded once to the served dtype, or, with out_multiplier,
//   q = quantize(float(t rounded to served) * out_multiplier[n]) (8-bit).
// Outputs are stored two adjacent columns at a time (the mma accumulator
// fragment holds column pairs; N % 8 == 0 keeps a pair inside a row).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/activations.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/cuda/cuda_common.cuh"
#include "quant/format.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/numerics.h"

namespace oasr::quant::cuda::detail {

enum class ServedKind : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Plain values for a kernel parameter (no std types with host-only members).
struct EpilogueParams {
  const float* a_scale;
  const float* w_scale;
  const float* bias;            // or null
  const float* out_multiplier;  // or null: plain served output
  void* out;
  int64_t m;
  int64_t n;
  Activation act;
  ServedKind served;
  bool fp8;           // 8-bit output is e4m3 bits (else int8)
  bool pair_aligned;  // out is aligned for two-element stores
  bool quad_aligned;  // out is aligned for four-element stores
};

__device__ __forceinline__ float epilogue_value(int32_t acc, float a_scale, float w_scale,
                                                float bias, Activation act) {
  return int8_epilogue(acc, a_scale, w_scale, bias, act);
}
__device__ __forceinline__ float epilogue_value(float acc, float a_scale, float w_scale, float bias,
                                                Activation act) {
  return fp8_epilogue(acc, a_scale, w_scale, bias, act);
}

__device__ __forceinline__ float round_to_served(float y, ServedKind served) {
  switch (served) {
    case ServedKind::kF16:
      return __half2float(__float2half_rn(y));
    case ServedKind::kBF16:
      return __bfloat162float(__float2bfloat16_rn(y));
    default:
      return y;
  }
}

// Epilogue of outputs (row, col) and (row, col + 1); col is even, col + 1 < n.
// a_scale is the row's input scale: p.a_scale[row], or the value the small-M
// GEMV computed on chip (scaled_gemv.cu). Not inlined: one copy of the
// activation code per GEMV instantiation is enough (a lane calls it once,
// for its column pair).
template <typename Acc>
__device__ __noinline__ void store_epilogue_pair(const EpilogueParams& p, int64_t row, int64_t col,
                                                 float a_scale, Acc acc0, Acc acc1) {
  const float bias0 = p.bias != nullptr ? p.bias[col] : kNoBias;
  const float bias1 = p.bias != nullptr ? p.bias[col + 1] : kNoBias;
  const float y0 = epilogue_value(acc0, a_scale, p.w_scale[col], bias0, p.act);
  const float y1 = epilogue_value(acc1, a_scale, p.w_scale[col + 1], bias1, p.act);
  const int64_t index = row * p.n + col;  // even: n and col are even
  if (p.out_multiplier != nullptr) {
    const float v0 = round_to_served(y0, p.served);
    const float v1 = round_to_served(y1, p.served);
    const float x0 = act::detail::mul_rn(v0, p.out_multiplier[col]);
    const float x1 = act::detail::mul_rn(v1, p.out_multiplier[col + 1]);
    uint8_t q0, q1;
    if (p.fp8) {
      q0 = quantize_e4m3(x0);
      q1 = quantize_e4m3(x1);
    } else {
      q0 = static_cast<uint8_t>(quantize_int8(x0));
      q1 = static_cast<uint8_t>(quantize_int8(x1));
    }
    uint8_t* out = static_cast<uint8_t*>(p.out) + index;
    if (p.pair_aligned) {
      *reinterpret_cast<uchar2*>(out) = make_uchar2(q0, q1);
    } else {
      out[0] = q0;
      out[1] = q1;
    }
    return;
  }
  switch (p.served) {
    case ServedKind::kF32: {
      float* out = static_cast<float*>(p.out) + index;
      if (p.pair_aligned) {
        *reinterpret_cast<float2*>(out) = make_float2(y0, y1);
      } else {
        out[0] = y0;
        out[1] = y1;
      }
      return;
    }
    case ServedKind::kF16: {
      __half* out = static_cast<__half*>(p.out) + index;
      const __half h0 = __float2half_rn(y0);
      const __half h1 = __float2half_rn(y1);
      if (p.pair_aligned) {
        *reinterpret_cast<__half2*>(out) = __halves2half2(h0, h1);
      } else {
        out[0] = h0;
        out[1] = h1;
      }
      return;
    }
    case ServedKind::kBF16: {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + index;
      const __nv_bfloat16 b0 = __float2bfloat16_rn(y0);
      const __nv_bfloat16 b1 = __float2bfloat16_rn(y1);
      if (p.pair_aligned) {
        *reinterpret_cast<__nv_bfloat162*>(out) = __halves2bfloat162(b0, b1);
      } else {
        out[0] = b0;
        out[1] = b1;
      }
      return;
    }
  }
}

// ---- host side ---------------------------------------------------------------

// The launch contract both lanes check (callers guarantee K % 16 and N % 8;
// a violation is a caller bug, refused by name rather than computed wrong).
// Returns false when there is nothing to compute (M == 0).
inline bool validate_scaled_mm_args(const ScaledMMArgs& args, const char* op) {
  OASR_CHECK(args.format == QDType::kInt8 || args.format == QDType::kFp8E4M3, kUnsupported, op,
             ": format must be int8 or float8_e4m3fn, got ", to_string(args.format));
  OASR_CHECK(args.m >= 0 && args.n > 0 && args.k > 0, kInvalidArgument, op,
             ": need M >= 0, N > 0 and K > 0, got M=", args.m, " N=", args.n, " K=", args.k);
  OASR_CHECK(args.k % 16 == 0 && args.n % 8 == 0, kInvalidArgument, op,
             ": needs K % 16 == 0 and N % 8 == 0 (got K=", args.k, ", N=", args.n,
             "); such a layer must stay full precision");
  OASR_CHECK(args.format != QDType::kInt8 || args.k <= kInt8MaxExactK, kInvalidArgument, op,
             ": K=", args.k, " could overflow the exact int32 accumulator (max ", kInt8MaxExactK,
             ")");
  OASR_CHECK(
      args.served == DType::kF32 || args.served == DType::kF16 || args.served == DType::kBF16,
      kUnsupported, op, ": the served dtype must be float32, float16 or bfloat16, got ",
      dtype_name(args.served));
  if (args.m == 0) return false;
  OASR_CHECK(args.a != nullptr && args.a_scale != nullptr && args.w != nullptr &&
                 args.w_scale != nullptr && args.out != nullptr,
             kInvalidArgument, op, ": a, a_scale, w, w_scale and out must be device pointers");
  OASR_CHECK(reinterpret_cast<uintptr_t>(args.a) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(args.w) % 16 == 0,
             kInvalidArgument, op,
             ": a and w must be 16-byte aligned (16-byte async copies); pass contiguous "
             "tensors from the allocator");
  return true;
}

// The lanes ask on every launch: ops::cuda's cached query.
using ops::cuda::compute_capability;

inline EpilogueParams make_epilogue_params(const ScaledMMArgs& args) {
  EpilogueParams p{};
  p.a_scale = args.a_scale;
  p.w_scale = args.w_scale;
  p.bias = args.bias;
  p.out_multiplier = args.out_multiplier;
  p.out = args.out;
  p.m = args.m;
  p.n = args.n;
  p.act = args.act;
  p.served = args.served == DType::kF16    ? ServedKind::kF16
             : args.served == DType::kBF16 ? ServedKind::kBF16
                                           : ServedKind::kF32;
  p.fp8 = args.format == QDType::kFp8E4M3;
  const size_t element = args.out_multiplier != nullptr ? 1 : dtype_size(args.served);
  p.pair_aligned = reinterpret_cast<uintptr_t>(args.out) % (2 * element) == 0;
  p.quad_aligned = reinterpret_cast<uintptr_t>(args.out) % (4 * element) == 0;
  return p;
}

}  // namespace oasr::quant::cuda::detail
