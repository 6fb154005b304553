// Sixteen-lane AVX-512 versions of every core/activations.h function (exp,
// erf, tanh and the epilogue activations) that return the SAME BITS as the
// scalar functions (DESIGN.md §3), by the same construction as
// core/activations_avx2.h, operation for operation: every step is the scalar
// step on each lane (IEEE-rounded add/mul/div, _mm512_fmadd_ps as std::fma,
// roundscale to nearest even as rint, exact exponent-bit arithmetic), and
// each scalar branch becomes a masked move of the branch's value, in the
// scalar branch order. tests/quant/test_avx2_activations.cc compares them
// with the scalar functions; the AVX-512 VNNI lane's int8 epilogue and the
// CPU activation op run them.
//
// Only for functions compiled for AVX-512 (the target attribute below),
// called only where cpu_has(CpuIsa::kAvx512Vnni) (core/cpu_features.h: that
// level implies F, BW, VL and DQ).
#pragma once

#include <immintrin.h>

#include <cstddef>

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

OASR_AVX512_INLINE __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

OASR_AVX512_INLINE __mmask16 is_nan_mask(__m512 x) {
  return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
}

// Horner's rule with fmas, c[0] the highest coefficient (avx2::horner_ps).
template <size_t N>
OASR_AVX512_INLINE __m512 horner_ps(__m512 x, const float (&c)[N]) {
  __m512 p = _mm512_set1_ps(c[0]);
  for (size_t i = 1; i < N; ++i) p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(c[i]));
  return p;
}

// act::relu: x < 0 ? +0 : x (NaN and -0 pass through).
OASR_AVX512_INLINE __m512 relu_ps(__m512 x) {
  return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                            _mm512_setzero_ps());
}

// detail::exp_neg_bounded (a in [0, kSigmoidArgLimit]): scale = 2^n, t = e^r - 1.
OASR_AVX512_INLINE void exp_neg_bounded_ps(__m512 a, __m512* scale, __m512* t) {
  const __m512 neg_a = _mm512_sub_ps(_mm512_setzero_ps(), a);  // -a exactly
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 shifted = _mm512_fmadd_ps(neg_a, _mm512_set1_ps(0x1.715476p0f), shift);
  const __m512 n = _mm512_sub_ps(shifted, shift);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0x1.62ep-1f), neg_a);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0x1.0bfbe8p-15f), r);
  const __m512 p = horner_ps(
      r, {0x1.6ae55cp-10f, 0x1.1268aap-7f, 0x1.555828p-5f, 0x1.555418p-3f, 0x1.fffffcp-2f, 1.0f});
  *t = _mm512_mul_ps(p, r);
  *scale = _mm512_castsi512_ps(_mm512_add_epi32(
      _mm512_set1_epi32(0x3f800000), _mm512_slli_epi32(_mm512_castps_si512(shifted), 23)));
}

// detail::div_one_plus: num / (1 + e) by a quadratic start, a Newton step
// and one corrected quotient.
OASR_AVX512_INLINE __m512 div_one_plus_ps(__m512 num, __m512 num_lo, __m512 e) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 neg_e = _mm512_sub_ps(_mm512_setzero_ps(), e);
  __m512 y = _mm512_fmadd_ps(
      _mm512_fmadd_ps(e, _mm512_set1_ps(0x1.4ae1a8p-2f), _mm512_set1_ps(-0x1.9d9d9p-1f)), e,
      _mm512_set1_ps(0x1.fac81ap-1f));
  const __m512 eps = _mm512_fmadd_ps(neg_e, y, _mm512_sub_ps(one, y));
  y = _mm512_fmadd_ps(y, eps, y);
  const __m512 q = _mm512_mul_ps(num, y);
  const __m512 minus_residual = _mm512_sub_ps(_mm512_fmadd_ps(q, e, _mm512_sub_ps(q, num)), num_lo);
  return _mm512_fnmadd_ps(minus_residual, y, q);  // -(minus_residual y) + q, one rounding
}

// detail::sigmoid_arg: min(|x|, limit); minps gives the limit for NaN lanes.
OASR_AVX512_INLINE __m512 sigmoid_arg_ps(__m512 x) {
  return _mm512_min_ps(abs_ps(x), _mm512_set1_ps(act::detail::kSigmoidArgLimit));
}

// act::swish: (x < 0 ? x e : x) / (1 + e), e = e^-|x|; beyond the limit
// -0 or x (NaN lanes: x).
OASR_AVX512_INLINE __m512 swish_ps(__m512 x) {
  __m512 scale, t;
  exp_neg_bounded_ps(sigmoid_arg_ps(x), &scale, &t);
  const __m512 e = _mm512_fmadd_ps(scale, t, scale);
  const __m512 x_scaled = _mm512_mul_ps(x, scale);
  const __m512 num = _mm512_fmadd_ps(x_scaled, t, x_scaled);
  const __m512 num_lo = _mm512_fmadd_ps(x_scaled, t, _mm512_sub_ps(x_scaled, num));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 q = div_one_plus_ps(_mm512_mask_mov_ps(x, negative, num),
                                   _mm512_maskz_mov_ps(negative, num_lo), e);
  const __m512 beyond = _mm512_mask_mov_ps(x, negative, _mm512_set1_ps(-0.0f));
  const __mmask16 within =
      _mm512_cmp_ps_mask(abs_ps(x), _mm512_set1_ps(act::detail::kSigmoidArgLimit), _CMP_LE_OQ);
  return _mm512_mask_mov_ps(beyond, within, q);
}

// act::sigmoid: (x < 0 ? e : 1) / (1 + e); +0 below -limit; NaN lanes: x.
OASR_AVX512_INLINE __m512 sigmoid_ps(__m512 x) {
  __m512 scale, t;
  exp_neg_bounded_ps(sigmoid_arg_ps(x), &scale, &t);
  const __m512 e = _mm512_fmadd_ps(scale, t, scale);
  const __m512 e_lo = _mm512_fmadd_ps(scale, t, _mm512_sub_ps(scale, e));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 result = div_one_plus_ps(_mm512_mask_mov_ps(_mm512_set1_ps(1.0f), negative, e),
                                  _mm512_maskz_mov_ps(negative, e_lo), e);
  result = _mm512_mask_mov_ps(
      result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-act::detail::kSigmoidArgLimit), _CMP_LT_OQ),
      _mm512_setzero_ps());
  return _mm512_mask_mov_ps(result, is_nan_mask(x), x);
}

OASR_AVX512_INLINE __m512 sign_bits_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

OASR_AVX512_INLINE __m512 or_bits_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// act::erf_f32: both branches on every lane, the one the scalar function
// takes selected per lane (the unused one may hold inf or NaN; it is
// discarded), then the sign of x OR-ed in as with_sign does.
OASR_AVX512_INLINE __m512 erf_ps(__m512 x) {
  using namespace act::detail;
  const __m512 ax = abs_ps(x);
  const __m512 u = _mm512_mul_ps(ax, ax);
  const __m512 p = horner_ps(u, {0x1.496f8cp-14f, -0x1.a3f8e2p-11f, 0x1.5405f2p-8f, -0x1.b7f916p-6f,
                                 0x1.ce2cf8p-4f, -0x1.81273ep-2f, 0x1.06eba8p-3f});
  const __m512 small = _mm512_fmadd_ps(ax, p, ax);
  const __m512 t = _mm512_sub_ps(ax, _mm512_set1_ps(2.5f));
  const __m512 r = horner_ps(t, {0x1.86d558p-13f, -0x1.3edbf8p-13f, 0x1.432026p-9f, -0x1.5efd74p-7f,
                                 0x1.cbb584p-5f, -0x1.69289ap-2f, -0x1.8e8b9ep0f});
  const __m512 neg_ax = _mm512_sub_ps(_mm512_setzero_ps(), ax);  // -ax exactly
  const __m512 mid = _mm512_sub_ps(_mm512_set1_ps(1.0f), exp_ps(_mm512_fmadd_ps(neg_ax, ax, r)));
  __m512 result = _mm512_set1_ps(1.0f);
  result = _mm512_mask_mov_ps(
      result, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(kErfOneThreshold), _CMP_LT_OQ), mid);
  result =
      _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(1.0f), _CMP_LT_OQ), small);
  result = or_bits_ps(result, sign_bits_ps(x));
  return _mm512_mask_mov_ps(result, is_nan_mask(x), x);
}

// act::tanh_f32, the same way.
OASR_AVX512_INLINE __m512 tanh_ps(__m512 x) {
  using namespace act::detail;
  const __m512 ax = abs_ps(x);
  const __m512 u = _mm512_mul_ps(ax, ax);
  const __m512 t = horner_ps(u, {0x1.18e734p-9f, -0x1.0bf66ap-7f, 0x1.638bap-6f, -0x1.b9ee96p-5f,
                                 0x1.111066p-3f, -0x1.555554p-2f});
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(ax, u), t, ax);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 mid = _mm512_sub_ps(
      one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp_ps(_mm512_add_ps(ax, ax)), one)));
  __m512 result = one;
  result =
      _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(9.5f), _CMP_LT_OQ), mid);
  result = _mm512_mask_mov_ps(
      result, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(kTanhPolyLimit), _CMP_LE_OQ), small);
  result = or_bits_ps(result, sign_bits_ps(x));
  return _mm512_mask_mov_ps(result, is_nan_mask(x), x);
}

// act::gelu_erf: x * 0.5 * (1 + erf(x / sqrt 2)); -0 below -1e4.
OASR_AVX512_INLINE __m512 gelu_erf_ps(__m512 x) {
  const __m512 e = erf_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.6a09e6p-1f)));
  __m512 result =
      _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-1e4f), _CMP_LT_OQ),
                              _mm512_set1_ps(-0.0f));
  return _mm512_mask_mov_ps(result, is_nan_mask(x), x);
}

// act::gelu_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); -0 below -1e4.
OASR_AVX512_INLINE __m512 gelu_tanh_ps(__m512 x) {
  const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 inner =
      _mm512_mul_ps(_mm512_set1_ps(0x1.988454p-1f),
                    _mm512_add_ps(x, _mm512_mul_ps(_mm512_set1_ps(0x1.6e4e26p-5f), cube)));
  __m512 result = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                                _mm512_add_ps(_mm512_set1_ps(1.0f), tanh_ps(inner)));
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-1e4f), _CMP_LT_OQ),
                              _mm512_set1_ps(-0.0f));
  return _mm512_mask_mov_ps(result, is_nan_mask(x), x);
}

// act::apply on sixteen lanes.
OASR_AVX512_INLINE __m512 apply_ps(Activation activation, __m512 x) {
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

}  // namespace oasr::avx512
