// float(e / total) -- the double quotient rounded to float, softmax's last
// step (ops/cpu/softmax.cc) -- by a multiply with 1 / total where that gives
// the same bits, and by the division where it might not.
//
// Why it is exact. With r = RN(1 / total) and p = RN(e * r), each rounding
// is within 2^-53 relative, so p is within (1 + 2^-53)^2 - 1 < 2^-51
// relative of the exact e / total, and p and the defined d = RN(e / total)
// are at most two double ulps apart. Rounding both
// to float gives the same value unless a float rounding boundary (a float
// midpoint, exactly representable in double) lies within that distance of
// p: for a normal float result that shows in the 29 low bits of p's
// significand, the bits rounding to float drops, being within a few units
// of 0x10000000. Those lanes, and lanes whose result would be a float
// subnormal (p < 2^-125, where fewer bits survive; a zero e gives an exact
// zero), take the division instead. The multiply and the check cost less
// than the division they replace (a 512-bit vdivpd issues once every 16
// cycles on Intel cores; on random data about 2 lanes in 10^8 are checked
// ones, 9 / 2^29, plus the float-subnormal results).
//
// The caller keeps the division where reciprocal_is_exact_enough(total) is
// false (NaN, zero, infinite, or so large or small that 1 / total leaves
// the normal range; a softmax total is at least 1 otherwise).
// tests/unit/test_cpu_simd_ops.cc feeds quotients placed on and next to
// float midpoints.
#pragma once

namespace oasr::ops::cpu {

inline bool reciprocal_is_exact_enough(double total) {
  return total >= 0x1p-1000 && total <= 0x1p1000;  // false for NaN
}

}  // namespace oasr::ops::cpu

#if defined(__x86_64__)
#include <immintrin.h>

#include "core/activations_avx2.h"
#include "core/activations_avx512.h"

namespace oasr::ops::cpu {

// Dropped-bit patterns within kMidpointMargin of the midpoint 0x10000000
// take the division: |p - d| <= 2 double ulps, so 4 leaves room.
inline constexpr long long kMidpointMargin = 4;
inline constexpr double kSmallestCheckedQuotient = 0x1p-125;

OASR_AVX512_WARNINGS_OFF
// Eight lanes: e (widened floats, >= 0 or NaN), r = 1 / total, t = total.
OASR_AVX512_INLINE __m512d exact_quotient_pd(__m512d e, __m512d r, __m512d t) {
  __m512d p = _mm512_mul_pd(e, r);
  const __m512i dropped =
      _mm512_and_si512(_mm512_castpd_si512(p), _mm512_set1_epi64((1LL << 29) - 1));
  const __mmask8 near_midpoint = _mm512_cmplt_epu64_mask(
      _mm512_sub_epi64(dropped, _mm512_set1_epi64((1LL << 28) - kMidpointMargin)),
      _mm512_set1_epi64(2 * kMidpointMargin + 1));
  const __mmask8 subnormal_result =
      _mm512_cmp_pd_mask(p, _mm512_set1_pd(kSmallestCheckedQuotient), _CMP_LT_OQ) &
      _mm512_cmp_pd_mask(p, _mm512_setzero_pd(), _CMP_NEQ_OQ);
  const __mmask8 divide = near_midpoint | subnormal_result;
  if (divide != 0) p = _mm512_mask_div_pd(p, divide, e, t);
  return p;
}
OASR_AVX512_WARNINGS_ON

// Four lanes, the same rule (AVX2 has no unsigned 64-bit compare: the
// biased difference is compared as signed).
OASR_AVX2_INLINE __m256d exact_quotient_pd(__m256d e, __m256d r, __m256d t) {
  __m256d p = _mm256_mul_pd(e, r);
  const __m256i dropped =
      _mm256_and_si256(_mm256_castpd_si256(p), _mm256_set1_epi64x((1LL << 29) - 1));
  const __m256i offset =
      _mm256_sub_epi64(dropped, _mm256_set1_epi64x((1LL << 28) - kMidpointMargin));
  // offset in [0, 2 * margin]: offset > -1 and offset < 2 * margin + 1.
  const __m256i near_midpoint =
      _mm256_and_si256(_mm256_cmpgt_epi64(offset, _mm256_set1_epi64x(-1)),
                       _mm256_cmpgt_epi64(_mm256_set1_epi64x(2 * kMidpointMargin + 1), offset));
  const __m256d subnormal_result =
      _mm256_and_pd(_mm256_cmp_pd(p, _mm256_set1_pd(kSmallestCheckedQuotient), _CMP_LT_OQ),
                    _mm256_cmp_pd(p, _mm256_setzero_pd(), _CMP_NEQ_OQ));
  const __m256d divide = _mm256_or_pd(_mm256_castsi256_pd(near_midpoint), subnormal_result);
  if (_mm256_movemask_pd(divide) != 0) p = _mm256_blendv_pd(p, _mm256_div_pd(e, t), divide);
  return p;
}

}  // namespace oasr::ops::cpu
#endif
