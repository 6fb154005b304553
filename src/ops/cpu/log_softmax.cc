// Reference arithmetic, per row (every CPU body returns exactly these bits):
//   m   = max over x_l                  (NaN if any x_l is NaN, as in PyTorch;
//                                         the first NaN's bits)
//   e_l = exp(x_l - m)                  float32, act::exp_f32
//   s_j = sum over l = j (mod 8) of e_l, in double, l ascending (j = 0..7)
//   s   = ((s_0 + s_4) + (s_1 + s_5)) + ((s_2 + s_6) + (s_3 + s_7))
//   y_l = float((x_l - m) - log(s))     x_l - m in float32, the rest in double
// The sums are softmax's (ops/cpu/softmax.cc): eight interleaved partial
// sums are what eight float lanes widened to double accumulate, so the AVX2
// and AVX-512 bodies (contiguous rows) and the scalar body agree bit for
// bit. The double sum makes the result at least as accurate as PyTorch's
// float32 reduction; the two agree within a few float32 ulps of the output.
#include "ops/cpu/log_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/activations.h"
#include "core/cpu_features.h"
#if defined(__x86_64__)
#include "core/activations_avx2.h"
#include "core/activations_avx512.h"
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int kPartialSums = 8;

double combine(const double (&partial)[kPartialSums]) {
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7]));
}

// The row maximum as the definition takes it: the first NaN wins.
float row_maximum_scalar(const float* x, int64_t length, int64_t inner) {
  float row_max = -std::numeric_limits<float>::infinity();
  for (int64_t l = 0; l < length; ++l) {
    const float v = x[l * inner];
    if (std::isnan(v) || v > row_max) row_max = v;
    if (std::isnan(row_max)) break;
  }
  return row_max;
}

// One row of `length` positions at stride `inner` (any layout).
void log_softmax_row_scalar(const float* x, float* out, int64_t length, int64_t inner) {
  // An all -inf row gives (-inf) - (-inf) = NaN below, which is also
  // PyTorch's answer; a +inf maximum likewise yields NaN.
  const float row_max = row_maximum_scalar(x, length, inner);
  double partial[kPartialSums] = {};
  for (int64_t l = 0; l < length; ++l) {
    partial[l % kPartialSums] += static_cast<double>(act::exp_f32(x[l * inner] - row_max));
  }
  const double log_total = std::log(combine(partial));
  for (int64_t l = 0; l < length; ++l) {
    const float shifted = x[l * inner] - row_max;
    out[l * inner] = static_cast<float>(static_cast<double>(shifted) - log_total);
  }
}

#if defined(__x86_64__)
// A contiguous row; length >= 8. Eight positions a step, the tail scalar.
OASR_AVX2_TARGET void log_softmax_row_avx2(const float* x, float* out, int64_t length) {
  const int64_t full = length - length % 8;
  __m256 max8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan8 = _mm256_setzero_ps();
  for (int64_t l = 0; l < full; l += 8) {
    const __m256 v = _mm256_loadu_ps(x + l);
    nan8 = _mm256_or_ps(nan8, avx2::is_nan_ps(v));
    max8 = _mm256_max_ps(max8, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max8);
  float row_max = lanes[0];
  for (int i = 1; i < 8; ++i) row_max = lanes[i] > row_max ? lanes[i] : row_max;
  bool any_nan = _mm256_movemask_ps(nan8) != 0;
  for (int64_t l = full; l < length; ++l) {
    any_nan = any_nan || std::isnan(x[l]);
    row_max = x[l] > row_max ? x[l] : row_max;
  }
  // max is exact and order-free on numbers; a NaN makes the row's maximum
  // the first NaN, as the scalar loop.
  if (any_nan) row_max = row_maximum_scalar(x, length, 1);

  const __m256 m = _mm256_set1_ps(row_max);
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t l = 0; l < full; l += 8) {
    const __m256 e = avx2::exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + l), m));
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double partial[kPartialSums];
  _mm256_store_pd(partial, sum_lo);
  _mm256_store_pd(partial + 4, sum_hi);
  for (int64_t l = full; l < length; ++l) {
    partial[l % kPartialSums] += static_cast<double>(act::exp_f32(x[l] - row_max));
  }
  const double log_total = std::log(combine(partial));
  const __m256d log4 = _mm256_set1_pd(log_total);
  int64_t l = 0;
  for (; l + 4 <= length; l += 4) {
    const __m128 shifted = _mm_sub_ps(_mm_loadu_ps(x + l), _mm256_castps256_ps128(m));
    _mm_storeu_ps(out + l, _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(shifted), log4)));
  }
  for (; l < length; ++l) {
    out[l] = static_cast<float>(static_cast<double>(x[l] - row_max) - log_total);
  }
}

// A contiguous row; length >= 16. Sixteen positions a step, the tail
// through masks (masked-off lanes add +0 to their partial sums).
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void log_softmax_row_avx512(const float* x, float* out, int64_t length) {
  const auto tail = [](int64_t remaining) {
    return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                           : static_cast<__mmask16>((1u << remaining) - 1u);
  };
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 max16 = minus_inf;
  __mmask16 any_nan = 0;
  for (int64_t l = 0; l < length; l += 16) {
    const __m512 v = _mm512_mask_loadu_ps(minus_inf, tail(length - l), x + l);
    any_nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    max16 = _mm512_max_ps(max16, v);
  }
  const float row_max =
      any_nan != 0 ? row_maximum_scalar(x, length, 1) : _mm512_reduce_max_ps(max16);

  const __m512 m = _mm512_set1_ps(row_max);
  __m512d sum = _mm512_setzero_pd();
  for (int64_t l = 0; l < length; l += 16) {
    const __mmask16 lanes = tail(length - l);
    const __m512 e = _mm512_maskz_mov_ps(
        lanes, avx512::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + l), m)));
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  alignas(64) double partial[kPartialSums];
  _mm512_store_pd(partial, sum);
  const __m512d log8 = _mm512_set1_pd(std::log(combine(partial)));
  const __m256 m8 = _mm512_castps512_ps256(m);
  for (int64_t l = 0; l < length; l += 8) {
    const __mmask8 lanes = static_cast<__mmask8>(tail(std::min<int64_t>(length - l, 8)));
    const __m256 shifted = _mm256_sub_ps(_mm256_maskz_loadu_ps(lanes, x + l), m8);
    _mm256_mask_storeu_ps(out + l, lanes,
                          _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(shifted), log8)));
  }
}
OASR_AVX512_WARNINGS_ON
#endif

}  // namespace

void log_softmax_f32(const float* x, float* out, int64_t outer, int64_t length, int64_t inner) {
#if defined(__x86_64__)
  const bool wide = inner == 1 && length >= 16 && cpu_has(CpuIsa::kAvx512Vnni);
  const bool vector = inner == 1 && length >= 8 && cpu_has(CpuIsa::kAvx2);
#endif
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * length * inner + i;
#if defined(__x86_64__)
      if (wide) {
        log_softmax_row_avx512(x + base, out + base, length);
        continue;
      }
      if (vector) {
        log_softmax_row_avx2(x + base, out + base, length);
        continue;
      }
#endif
      log_softmax_row_scalar(x + base, out + base, length, inner);
    }
  }
}

}  // namespace oasr::ops::cpu
