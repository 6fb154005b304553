// Eight-lane AVX2 versions of every core/activations.h function (exp, erf,
// tanh and the epilogue activations) that return the SAME BITS as the
// scalar functions (DESIGN.md §3). The int8 GEMM epilogues and the CPU ops
// (activation, softmax, log-softmax) run them. This holds by
// construction: every step is the scalar step on each lane -- IEEE-rounded
// add/mul/div, _mm256_fmadd_ps (the IEEE fusedMultiplyAdd, as std::fma),
// _mm256_round_ps to nearest even (as rint), exact exponent-bit arithmetic --
// and each scalar branch becomes a blend of the branch's value. The scalar
// branch order (NaN first, then the range cuts) is kept by blending in the
// reverse order. tests/quant/test_avx2_activations.cc compares bits over
// tens of millions of inputs.
//
// Only for functions compiled for AVX2 (the target attribute below is
// enough; no file-wide -mavx2), called only where cpu_has(CpuIsa::kAvx2)
// (core/cpu_features.h).
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "core/activations.h"

#define OASR_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define OASR_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace oasr::avx2 {

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

// Horner's rule with fmas, c[0] the highest coefficient: the scalar
// polynomials' exact operation order (core/activations.h's detail::*_q/_p/_r/_t).
template <size_t N>
OASR_AVX2_INLINE __m256 horner_ps(__m256 x, const float (&c)[N]) {
  __m256 p = _mm256_set1_ps(c[0]);
  for (size_t i = 1; i < N; ++i) p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(c[i]));
  return p;
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
  // exp_q(r), the scalar coefficients.
  const __m256 q = horner_ps(r, {0x1.9f0728p-13f, 0x1.6d8e44p-10f, 0x1.111274p-7f, 0x1.55548cp-5f,
                                 0x1.555554p-3f, 0x1p-1f});
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

// detail::exp_neg_bounded, lane by lane (a in [0, kSigmoidArgLimit]):
// scale = 2^n and t = e^r - 1.
OASR_AVX2_INLINE void exp_neg_bounded_ps(__m256 a, __m256* scale, __m256* t) {
  const __m256 neg_a = _mm256_sub_ps(_mm256_setzero_ps(), a);  // -a exactly
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 shifted = _mm256_fmadd_ps(neg_a, _mm256_set1_ps(0x1.715476p0f), shift);
  const __m256 n = _mm256_sub_ps(shifted, shift);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0x1.62ep-1f), neg_a);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0x1.0bfbe8p-15f), r);
  const __m256 p = horner_ps(
      r, {0x1.6ae55cp-10f, 0x1.1268aap-7f, 0x1.555828p-5f, 0x1.555418p-3f, 0x1.fffffcp-2f, 1.0f});
  *t = _mm256_mul_ps(p, r);
  *scale = _mm256_castsi256_ps(_mm256_add_epi32(
      _mm256_set1_epi32(0x3f800000), _mm256_slli_epi32(_mm256_castps_si256(shifted), 23)));
}

// detail::div_one_plus: num / (1 + e) by a quadratic start, a Newton step
// and one corrected quotient.
OASR_AVX2_INLINE __m256 div_one_plus_ps(__m256 num, __m256 num_lo, __m256 e) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 neg_e = _mm256_sub_ps(_mm256_setzero_ps(), e);
  __m256 y = _mm256_fmadd_ps(
      _mm256_fmadd_ps(e, _mm256_set1_ps(0x1.4ae1a8p-2f), _mm256_set1_ps(-0x1.9d9d9p-1f)), e,
      _mm256_set1_ps(0x1.fac81ap-1f));
  const __m256 eps = _mm256_fmadd_ps(neg_e, y, _mm256_sub_ps(one, y));
  y = _mm256_fmadd_ps(y, eps, y);
  const __m256 q = _mm256_mul_ps(num, y);
  const __m256 minus_residual = _mm256_sub_ps(_mm256_fmadd_ps(q, e, _mm256_sub_ps(q, num)), num_lo);
  return _mm256_fnmadd_ps(minus_residual, y, q);  // -(minus_residual y) + q, one rounding
}

// detail::sigmoid_arg: min(|x|, limit); minps gives the limit for NaN lanes.
OASR_AVX2_INLINE __m256 sigmoid_arg_ps(__m256 x) {
  return _mm256_min_ps(abs_ps(x), _mm256_set1_ps(act::detail::kSigmoidArgLimit));
}

// act::swish: (x < 0 ? x e : x) / (1 + e), e = e^-|x|; beyond the limit
// -0 or x (NaN lanes: x).
OASR_AVX2_INLINE __m256 swish_ps(__m256 x) {
  __m256 scale, t;
  exp_neg_bounded_ps(sigmoid_arg_ps(x), &scale, &t);
  const __m256 e = _mm256_fmadd_ps(scale, t, scale);
  const __m256 x_scaled = _mm256_mul_ps(x, scale);
  const __m256 num = _mm256_fmadd_ps(x_scaled, t, x_scaled);
  const __m256 num_lo = _mm256_fmadd_ps(x_scaled, t, _mm256_sub_ps(x_scaled, num));
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 q =
      div_one_plus_ps(_mm256_blendv_ps(x, num, negative), _mm256_and_ps(num_lo, negative), e);
  const __m256 beyond = _mm256_blendv_ps(x, _mm256_set1_ps(-0.0f), negative);
  const __m256 within =
      _mm256_cmp_ps(abs_ps(x), _mm256_set1_ps(act::detail::kSigmoidArgLimit), _CMP_LE_OQ);
  return _mm256_blendv_ps(beyond, q, within);
}

// act::sigmoid: (x < 0 ? e : 1) / (1 + e); +0 below -limit; NaN lanes: x.
OASR_AVX2_INLINE __m256 sigmoid_ps(__m256 x) {
  __m256 scale, t;
  exp_neg_bounded_ps(sigmoid_arg_ps(x), &scale, &t);
  const __m256 e = _mm256_fmadd_ps(scale, t, scale);
  const __m256 e_lo = _mm256_fmadd_ps(scale, t, _mm256_sub_ps(scale, e));
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  __m256 result = div_one_plus_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), e, negative),
                                  _mm256_and_ps(e_lo, negative), e);
  result = _mm256_blendv_ps(
      result, _mm256_setzero_ps(),
      _mm256_cmp_ps(x, _mm256_set1_ps(-act::detail::kSigmoidArgLimit), _CMP_LT_OQ));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

OASR_AVX2_INLINE __m256 sign_bits_ps(__m256 x) {
  return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u))));
}

// act::erf_f32: both branches on every lane, the one the scalar function
// takes selected per lane (the unused one may hold inf or NaN; it is
// discarded), then the sign of x OR-ed in as with_sign does.
OASR_AVX2_INLINE __m256 erf_ps(__m256 x) {
  using namespace act::detail;
  const __m256 ax = abs_ps(x);
  const __m256 u = _mm256_mul_ps(ax, ax);
  const __m256 p = horner_ps(u, {0x1.496f8cp-14f, -0x1.a3f8e2p-11f, 0x1.5405f2p-8f, -0x1.b7f916p-6f,
                                 0x1.ce2cf8p-4f, -0x1.81273ep-2f, 0x1.06eba8p-3f});
  const __m256 small = _mm256_fmadd_ps(ax, p, ax);
  const __m256 t = _mm256_sub_ps(ax, _mm256_set1_ps(2.5f));
  const __m256 r = horner_ps(t, {0x1.86d558p-13f, -0x1.3edbf8p-13f, 0x1.432026p-9f, -0x1.5efd74p-7f,
                                 0x1.cbb584p-5f, -0x1.69289ap-2f, -0x1.8e8b9ep0f});
  const __m256 neg_ax = _mm256_sub_ps(_mm256_setzero_ps(), ax);  // -ax exactly
  const __m256 mid = _mm256_sub_ps(_mm256_set1_ps(1.0f), exp_ps(_mm256_fmadd_ps(neg_ax, ax, r)));
  __m256 result = _mm256_set1_ps(1.0f);
  result = _mm256_blendv_ps(result, mid,
                            _mm256_cmp_ps(ax, _mm256_set1_ps(kErfOneThreshold), _CMP_LT_OQ));
  result = _mm256_blendv_ps(result, small, _mm256_cmp_ps(ax, _mm256_set1_ps(1.0f), _CMP_LT_OQ));
  result = _mm256_or_ps(result, sign_bits_ps(x));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// act::tanh_f32, the same way.
OASR_AVX2_INLINE __m256 tanh_ps(__m256 x) {
  using namespace act::detail;
  const __m256 ax = abs_ps(x);
  const __m256 u = _mm256_mul_ps(ax, ax);
  const __m256 t = horner_ps(u, {0x1.18e734p-9f, -0x1.0bf66ap-7f, 0x1.638bap-6f, -0x1.b9ee96p-5f,
                                 0x1.111066p-3f, -0x1.555554p-2f});
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(ax, u), t, ax);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 mid = _mm256_sub_ps(
      one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(exp_ps(_mm256_add_ps(ax, ax)), one)));
  __m256 result = one;
  result = _mm256_blendv_ps(result, mid, _mm256_cmp_ps(ax, _mm256_set1_ps(9.5f), _CMP_LT_OQ));
  result = _mm256_blendv_ps(result, small,
                            _mm256_cmp_ps(ax, _mm256_set1_ps(kTanhPolyLimit), _CMP_LE_OQ));
  result = _mm256_or_ps(result, sign_bits_ps(x));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// act::gelu_erf: x * 0.5 * (1 + erf(x / sqrt 2)); -0 below -1e4.
OASR_AVX2_INLINE __m256 gelu_erf_ps(__m256 x) {
  const __m256 e = erf_ps(_mm256_mul_ps(x, _mm256_set1_ps(0x1.6a09e6p-1f)));
  __m256 result =
      _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(-0.0f),
                            _mm256_cmp_ps(x, _mm256_set1_ps(-1e4f), _CMP_LT_OQ));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
}

// act::gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); -0 below -1e4.
OASR_AVX2_INLINE __m256 gelu_tanh_ps(__m256 x) {
  const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 inner =
      _mm256_mul_ps(_mm256_set1_ps(0x1.988454p-1f),
                    _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0x1.6e4e26p-5f), cube)));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                                _mm256_add_ps(_mm256_set1_ps(1.0f), tanh_ps(inner)));
  result = _mm256_blendv_ps(result, _mm256_set1_ps(-0.0f),
                            _mm256_cmp_ps(x, _mm256_set1_ps(-1e4f), _CMP_LT_OQ));
  return _mm256_blendv_ps(result, x, is_nan_ps(x));
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
    case Activation::kGeluErf:
      return gelu_erf_ps(x);
    case Activation::kGeluTanh:
      return gelu_tanh_ps(x);
    case Activation::kTanh:
      return tanh_ps(x);
  }
  return x;
}

}  // namespace oasr::avx2
