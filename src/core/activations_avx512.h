// Sixteen-lane AVX-512 versions of core/activations.h functions that return
// the SAME BITS as the scalar functions (DESIGN.md §3), by the same
// construction as core/activations_avx2.h: every step is the scalar step on
// each lane (IEEE-rounded add/mul, _mm512_fmadd_ps as std::fma, roundscale
// to nearest even as rint, exact exponent-bit arithmetic), and each scalar
// branch becomes a masked move of the branch's value, in the scalar branch
// order. tests/unit/test_cpu_simd_ops.cc compares them with the scalar
// functions.
//
// Only for functions compiled for AVX-512 (the target attribute below),
// called only where cpu_has(CpuIsa::kAvx512Vnni) (core/cpu_features.h: that
// level implies F, BW, VL and DQ).
#pragma once

#include <immintrin.h>

#include "core/activations.h"

#define OASR_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define OASR_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"), always_inline)) inline

// GCC 12 warns inside its own AVX-512 intrinsics (their undefined
// pass-through operands) in every function they are inlined into: a file
// defining such functions puts them between these two.
#define OASR_AVX512_WARNINGS_OFF                                                       \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define OASR_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")

namespace oasr::avx512 {

// 2^n for integer lanes n in [-126, 127].
OASR_AVX512_INLINE __m512 pow2_normal_ps(__m512i n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

// act::exp_f32, lane by lane (the operations of avx2::exp_ps).
OASR_AVX512_INLINE __m512 exp_ps(__m512 x) {
  constexpr float kMaxArg = 0x1.62e42ep6f;
  constexpr float kMinArg = -104.0f;
  constexpr float kLog2e = 0x1.715476p0f;
  constexpr float kLn2Hi = 0x1.62ep-1f;
  constexpr float kLn2Lo = 0x1.0bfbe8p-15f;
  // The core runs on an in-range copy; out-of-range lanes are replaced below,
  // as the scalar function returns early for them.
  const __m512 xc =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kMinArg)), _mm512_set1_ps(kMaxArg));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 neg_n = _mm512_sub_ps(_mm512_setzero_ps(), n);  // -n exactly
  __m512 r = _mm512_fmadd_ps(neg_n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fmadd_ps(neg_n, _mm512_set1_ps(kLn2Lo), r);
  // exp_q(r) by Horner's rule, the scalar coefficients in the scalar order.
  __m512 q = _mm512_set1_ps(0x1.9f0728p-13f);
  for (const float c : {0x1.6d8e44p-10f, 0x1.111274p-7f, 0x1.55548cp-5f, 0x1.555554p-3f, 0x1p-1f}) {
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(c));
  }
  const __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r));
  const __m512i n_int = _mm512_cvtps_epi32(n);  // exact: n is an integer in [-150, 128]
  // n_int / 2 truncating toward zero, as C++'s division.
  const __m512i n_half =
      _mm512_srai_epi32(_mm512_add_epi32(n_int, _mm512_srli_epi32(n_int, 31)), 1);
  __m512 result = _mm512_mul_ps(_mm512_mul_ps(p, pow2_normal_ps(n_half)),
                                pow2_normal_ps(_mm512_sub_epi32(n_int, n_half)));
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMinArg), _CMP_LT_OQ),
                              _mm512_setzero_ps());
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kMaxArg), _CMP_GT_OQ),
                              _mm512_set1_ps(act::detail::positive_infinity()));
  return _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

}  // namespace oasr::avx512
