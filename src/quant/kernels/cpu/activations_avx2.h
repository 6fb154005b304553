// Eight-lane AVX2 versions of core/activations.h's epilogue activations that
// return the SAME BITS as the scalar functions (DESIGN.md §3). This holds by
// construction: every step is the scalar step on each lane -- IEEE-rounded
// add/mul/div, _mm256_fmadd_ps (the IEEE fusedMultiplyAdd, as std::fma),
// _mm256_round_ps to nearest even (as rint), exact exponent-bit arithmetic --
// and each scalar branch becomes a blend of the branch's value. The scalar
// branch order (NaN first, then the range cuts) is kept by blending in the
// reverse order. tests/quant/test_avx2_activations.cc compares bits over
// tens of millions of inputs.
//
// Only for translation units compiled for AVX2 (the target attribute below
// is enough; no -mavx2 needed), called only after cpu_has_avx2().
#pragma once

#include <immintrin.h>

#include "core/activations.h"

#define OASR_AVX2_TARGET __attribute__((target("avx2,fma")))
#define OASR_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

namespace oasr::quant::avx2 {

OASR_AVX2_INLINE __m256 abs_ps(__m256 x) {
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff)));
}

OASR_AVX2_INLINE __m256 is_nan_ps(__m256 x) {
  return _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
}

// pow2_normal(n) = 2^n for integer lanes n in [-126, 127].
OASR_AVX2_INLINE __m256 pow2_normal_ps(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

// act::exp_f32, lane by lane.
OASR_AVX2_INLINE __m256 exp_ps(__m256 x) {
  constexpr float kMaxArg = 0x1.62e42ep6f;
  constexpr float kMinArg = -104.0f;
  constexpr float kLog2e = 0x1.715476p0f;
  constexpr float kLn2Hi = 0x1.62ep-1f;
  constexpr float kLn2Lo = 0x1.0bfbe8p-15f;
  // The core runs on an in-range copy (out-of-range lanes would build bogus
  // exponents); their results are replaced below, exactly as the scalar
  // function returns early for them.
  const __m256 xc =
      _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kMinArg)), _mm256_set1_ps(kMaxArg));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 neg_n = _mm256_sub_ps(_mm256_setzero_ps(), n);  // -n exactly (n is an integer)
  __m256 r = _mm256_fmadd_ps(neg_n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fmadd_ps(neg_n, _mm256_set1_ps(kLn2Lo), r);
  // exp_q(r), Horner with fmas, the scalar coefficients.
  __m256 q = _mm256_set1_ps(0x1.9f0728p-13f);
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0x1.6d8e44p-10f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0x1.111274p-7f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0x1.55548cp-5f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0x1.555554p-3f));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0x1p-1f));
  const __m256 p = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r));
  const __m256i n_int = _mm256_cvtps_epi32(n);  // exact: n is an integer in [-150, 128]
  // C++'s n_int / 2 truncates toward zero: add 1 to negative lanes before the shift.
  const __m256i n_half =
      _mm256_srai_epi32(_mm256_add_epi32(n_int, _mm256_srli_epi32(n_int, 31)), 1);
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, pow2_normal_ps(n_half)),
                                pow2_normal_ps(_mm256_sub_epi32(n_int, n_half)));
  result = _mm256_blendv_ps(result, _mm256_setzero_ps(),
                            _mm256_cmp_ps(x, _mm256_set1_ps(kMinArg), _CMP_LT_OQ));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(act::detail::positive_infinity()),
                            _mm256_cmp_ps(x, _mm256_set1_ps(kMaxArg), _CMP_GT_OQ));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// act::relu: x < 0 ? +0 : x (NaN and -0 pass through).
OASR_AVX2_INLINE __m256 relu_ps(__m256 x) {
  return _mm256_blendv_ps(x, _mm256_setzero_ps(),
                          _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

// act::swish: (x >= 0 ? x : x e) / (1 + e), e = exp(-|x|); -0 below -104.
OASR_AVX2_INLINE __m256 swish_ps(__m256 x) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), abs_ps(x)));
  const __m256 non_negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  const __m256 numerator = _mm256_blendv_ps(_mm256_mul_ps(x, e), x, non_negative);
  __m256 result = _mm256_div_ps(numerator, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(-0.0f),
                            _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// act::sigmoid: (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|).
OASR_AVX2_INLINE __m256 sigmoid_ps(__m256 x) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), abs_ps(x)));
  const __m256 non_negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  const __m256 numerator = _mm256_blendv_ps(e, _mm256_set1_ps(1.0f), non_negative);
  const __m256 result = _mm256_div_ps(numerator, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// Whether apply_ps has a vector body for `activation`; the others (the GELUs,
// tanh) run the scalar function per lane, which is bit-identical but slower.
inline bool has_vector_activation(Activation activation) {
  return activation == Activation::kNone || activation == Activation::kRelu ||
         activation == Activation::kSwish || activation == Activation::kSigmoid;
}

// act::apply on eight lanes.
OASR_AVX2_INLINE __m256 apply_ps(Activation activation, __m256 x) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return relu_ps(x);
    case Activation::kSwish:
      return swish_ps(x);
    case Activation::kSigmoid:
      return sigmoid_ps(x);
    default: {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, x);
      for (float& lane : lanes) lane = act::apply(activation, lane);
      return _mm256_load_ps(lanes);
    }
  }
}

}  // namespace oasr::quant::avx2
