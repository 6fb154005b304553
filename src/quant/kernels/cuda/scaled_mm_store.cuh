// The store half of the mma.sync kernels' epilogue: a warp's accumulator
// tile goes through shared memory so that each lane then finishes four
// consecutive outputs of one row and a warp writes whole row segments
// (coalesced), instead of the mma fragment's scattered column pairs. The
// epilogue arithmetic is scaled_mm_epilogue.cuh's, per output, so the bits
// are the same; only where and how the results are written changes.
//
// The fragment layout of m16n8k32's accumulator: c0, c1 at (lane / 4,
// 2 (lane % 4) + {0, 1}) and c2, c3 eight rows below.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"

namespace oasr::quant::cuda::detail {

// Shared bytes one warp needs to stage 16 rows of its kWarpN columns; the
// row stride is padded by 8 words so the fragment writes of the 8 rows fall
// on different banks.
template <int kWarpN>
inline constexpr int kStagedSlabBytes = 16 * (kWarpN + 8) * 4;

// The epilogue values of outputs (row, col .. col + 3). Inlined, so a
// constant `act` at the call folds act::apply's switch away and the four
// evaluations (branch-free for swish) can be scheduled side by side.
template <typename Acc>
__device__ __forceinline__ void epilogue_quad_values(const EpilogueParams& p, int64_t row,
                                                     int64_t col, const Acc (&acc)[4],
                                                     Activation act, float (&y)[4]) {
  const float a_scale = p.a_scale[row];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float bias = p.bias != nullptr ? p.bias[col + e] : kNoBias;
    y[e] = epilogue_value(acc[e], a_scale, p.w_scale[col + e], bias, act);
  }
}

// Outputs (row, col .. col + 3): col % 4 == 0 and N % 8 == 0, so all four lie
// in the row.
template <typename Acc>
__device__ __forceinline__ void store_epilogue_quad(const EpilogueParams& p, int64_t row,
                                                    int64_t col, const Acc (&acc)[4]) {
  float y[4];
  switch (p.act) {  // once per quad, each case with a constant activation
    case Activation::kNone:
      epilogue_quad_values(p, row, col, acc, Activation::kNone, y);
      break;
    case Activation::kRelu:
      epilogue_quad_values(p, row, col, acc, Activation::kRelu, y);
      break;
    case Activation::kSwish:
      epilogue_quad_values(p, row, col, acc, Activation::kSwish, y);
      break;
    default:  // the activations the encoders' GEMMs do not use
      epilogue_quad_values(p, row, col, acc, p.act, y);
      break;
  }
  const int64_t index = row * p.n + col;
  if (p.out_multiplier != nullptr) {
    uint8_t q[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float x =
          act::detail::mul_rn(round_to_served(y[e], p.served), p.out_multiplier[col + e]);
      q[e] = p.fp8 ? quantize_e4m3(x) : static_cast<uint8_t>(quantize_int8(x));
    }
    uint8_t* out = static_cast<uint8_t*>(p.out) + index;
    if (p.quad_aligned) {
      *reinterpret_cast<uchar4*>(out) = make_uchar4(q[0], q[1], q[2], q[3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) out[e] = q[e];
    }
    return;
  }
  switch (p.served) {
    case ServedKind::kF32: {
      float* out = static_cast<float*>(p.out) + index;
      if (p.quad_aligned) {
        *reinterpret_cast<float4*>(out) = make_float4(y[0], y[1], y[2], y[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) out[e] = y[e];
      }
      return;
    }
    case ServedKind::kF16: {
      __half* out = static_cast<__half*>(p.out) + index;
      const __half2 lo = __halves2half2(__float2half_rn(y[0]), __float2half_rn(y[1]));
      const __half2 hi = __halves2half2(__float2half_rn(y[2]), __float2half_rn(y[3]));
      if (p.quad_aligned) {
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(out) = packed;
      } else {
        out[0] = __low2half(lo);
        out[1] = __high2half(lo);
        out[2] = __low2half(hi);
        out[3] = __high2half(hi);
      }
      return;
    }
    case ServedKind::kBF16: {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + index;
      const __nv_bfloat162 lo =
          __halves2bfloat162(__float2bfloat16_rn(y[0]), __float2bfloat16_rn(y[1]));
      const __nv_bfloat162 hi =
          __halves2bfloat162(__float2bfloat16_rn(y[2]), __float2bfloat16_rn(y[3]));
      if (p.quad_aligned) {
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(out) = packed;
      } else {
        out[0] = __low2bfloat16(lo);
        out[1] = __high2bfloat16(lo);
        out[2] = __low2bfloat16(hi);
        out[3] = __high2bfloat16(hi);
      }
      return;
    }
  }
}

// One warp's kFragsM x kFragsN fragments (rows row0 + [0, 16 kFragsM),
// columns col0 + [0, 8 kFragsN)), staged 16 rows at a time in `slab`
// (kStagedSlabBytes<8 kFragsN> bytes of this warp's own shared memory;
// the caller has synchronised the CTA so the main loop no longer reads it).
template <int kFragsM, int kFragsN, typename Acc>
__device__ __forceinline__ void store_warp_tile(const EpilogueParams& p,
                                                const Acc (&acc)[kFragsM][kFragsN][4], Acc* slab,
                                                int64_t row0, int64_t col0, int lane) {
  constexpr int kCols = kFragsN * 8;
  constexpr int kStride = kCols + 8;
  const int frag_row = lane >> 2;
  const int frag_col = (lane & 3) * 2;
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) {
      Acc* top = slab + frag_row * kStride + j * 8 + frag_col;
      Acc* bottom = top + 8 * kStride;
      top[0] = acc[i][j][0];
      top[1] = acc[i][j][1];
      bottom[0] = acc[i][j][2];
      bottom[1] = acc[i][j][3];
    }
    __syncwarp();
    const int64_t tile_row0 = row0 + i * 16;
#pragma unroll 1
    for (int e = lane * 4; e < 16 * kCols; e += 32 * 4) {
      const int r = e / kCols;
      const int c = e % kCols;
      const int64_t row = tile_row0 + r;
      const int64_t col = col0 + c;
      if (row < p.m && col < p.n) {
        const Acc* staged = slab + r * kStride + c;
        const Acc values[4] = {staged[0], staged[1], staged[2], staged[3]};
        store_epilogue_quad(p, row, col, values);
      }
    }
    __syncwarp();  // the slab is rewritten for the next 16 rows
  }
}

}  // namespace oasr::quant::cuda::detail
