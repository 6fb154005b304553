// Reference arithmetic, per row (the CUDA body is tested against this under
// a tolerance; every CPU body returns exactly these bits):
//   m   = max over kept x_l                 (a NaN makes m NaN, as in PyTorch)
//   e_l = exp(x_l - m)                      float32, act::exp_f32
//   s_j = sum over kept l = j (mod 8) of e_l, in double, l ascending (j = 0..7)
//   s   = ((s_0 + s_4) + (s_1 + s_5)) + ((s_2 + s_6) + (s_3 + s_7))
//   p_l = float(e_l / s) for kept l, 0 for masked l   (the quotient in double)
// Subtracting the row maximum keeps exp() in range whatever the offset. The
// eight interleaved partial sums are what eight float lanes widened to two
// double vectors accumulate, so the AVX2 body (one row at a time, eight
// positions a step) and the scalar body give the same bits; a masked or
// past-the-end position adds +0.0, which leaves a partial sum (>= +0)
// unchanged. A row's bits depend on that row alone: rows are split over the
// worker pool (ops/cpu_threads.h) without changing them.
#include "ops/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/activations.h"
#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include "core/activations_avx2.h"
#include "core/activations_avx512.h"
#include "ops/cpu/exact_quotient.h"
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int kPartialSums = 8;

// One row of `length` positions at stride `inner` (any layout).
void softmax_row_scalar(const float* x, const uint8_t* keep, float* out, int64_t length,
                        int64_t inner) {
  const auto kept = [&](int64_t l) { return keep == nullptr || keep[l * inner] != 0; };
  float row_max = -std::numeric_limits<float>::infinity();
  bool any_kept = false;
  for (int64_t l = 0; l < length; ++l) {
    if (!kept(l)) continue;
    any_kept = true;
    const float v = x[l * inner];
    if (std::isnan(v) || v > row_max) row_max = v;
    if (std::isnan(row_max)) break;
  }
  if (!any_kept) {
    for (int64_t l = 0; l < length; ++l) out[l * inner] = 0.0f;
    return;
  }
  double partial[kPartialSums] = {};
  for (int64_t l = 0; l < length; ++l) {
    const int64_t at = l * inner;
    if (!kept(l)) {
      out[at] = 0.0f;
      continue;
    }
    const float e = act::exp_f32(x[at] - row_max);
    out[at] = e;
    partial[l % kPartialSums] += static_cast<double>(e);
  }
  const double total = ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
                       ((partial[2] + partial[6]) + (partial[3] + partial[7]));
  for (int64_t l = 0; l < length; ++l) {
    const int64_t at = l * inner;
    if (kept(l)) out[at] = static_cast<float>(static_cast<double>(out[at]) / total);
  }
}

#if defined(__x86_64__)
// Lanes whose keep byte is nonzero (all ones), for positions l .. l + 7.
OASR_AVX2_INLINE __m256 kept_lanes(const uint8_t* keep, int64_t l) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(keep + l));
  const __m256i words = _mm256_cvtepu8_epi32(bytes);
  return _mm256_castsi256_ps(
      _mm256_xor_si256(_mm256_cmpeq_epi32(words, _mm256_setzero_si256()), _mm256_set1_epi32(-1)));
}

// A contiguous row (inner == 1); length >= 8 (shorter rows take the scalar body).
OASR_AVX2_TARGET void softmax_row_avx2(const float* x, const uint8_t* keep, float* out,
                                       int64_t length) {
  const int64_t full = length - length % 8;
  // The maximum over kept lanes: max is exact and order-free for numbers;
  // a kept NaN anywhere makes the row's maximum NaN, as the scalar loop.
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 max8 = minus_inf;
  __m256 nan8 = _mm256_setzero_ps();
  __m256 any8 = keep == nullptr ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : _mm256_setzero_ps();
  for (int64_t l = 0; l < full; l += 8) {
    __m256 v = _mm256_loadu_ps(x + l);
    if (keep != nullptr) {
      const __m256 k = kept_lanes(keep, l);
      any8 = _mm256_or_ps(any8, k);
      nan8 = _mm256_or_ps(nan8, _mm256_and_ps(k, avx2::is_nan_ps(v)));
      v = _mm256_blendv_ps(minus_inf, v, k);
    } else {
      nan8 = _mm256_or_ps(nan8, avx2::is_nan_ps(v));
    }
    max8 = _mm256_max_ps(max8, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max8);
  float row_max = lanes[0];
  for (int i = 1; i < 8; ++i) row_max = lanes[i] > row_max ? lanes[i] : row_max;
  bool any_kept = _mm256_movemask_ps(any8) != 0;
  bool any_nan = _mm256_movemask_ps(nan8) != 0;
  for (int64_t l = full; l < length; ++l) {
    if (keep != nullptr && keep[l] == 0) continue;
    any_kept = true;
    any_nan = any_nan || std::isnan(x[l]);
    row_max = x[l] > row_max ? x[l] : row_max;
  }
  if (!any_kept) {
    for (int64_t l = 0; l < length; ++l) out[l] = 0.0f;
    return;
  }
  if (any_nan) {
    // The scalar loop stops at the first kept NaN and keeps its bits (payload
    // and sign), which then travel through x - m into every output.
    for (int64_t l = 0; l < length; ++l) {
      if ((keep == nullptr || keep[l] != 0) && std::isnan(x[l])) {
        row_max = x[l];
        break;
      }
    }
  }

  const __m256 m = _mm256_set1_ps(row_max);
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t l = 0; l < full; l += 8) {
    __m256 e = avx2::exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + l), m));
    if (keep != nullptr) e = _mm256_and_ps(e, kept_lanes(keep, l));
    _mm256_storeu_ps(out + l, e);
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double partial[8];
  _mm256_store_pd(partial, sum_lo);
  _mm256_store_pd(partial + 4, sum_hi);
  for (int64_t l = full; l < length; ++l) {
    const bool kept = keep == nullptr || keep[l] != 0;
    const float e = kept ? act::exp_f32(x[l] - row_max) : 0.0f;
    out[l] = e;
    partial[l % 8] += static_cast<double>(e);
  }
  const double total = ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
                       ((partial[2] + partial[6]) + (partial[3] + partial[7]));
  // Masked positions hold +0 already, and 0 / total = +0 (total > 0 here,
  // or NaN, where the scalar body also writes NaN only for kept positions).
  // The quotients: ops/cpu/exact_quotient.h where total is in [2^-1000,
  // 2^1000] (reciprocal_is_exact_enough), else the division itself.
  const __m256d t = _mm256_set1_pd(total);
  const __m256d r = _mm256_set1_pd(1.0 / total);
  const bool reciprocal = reciprocal_is_exact_enough(total);
  for (int64_t l = 0; l < full; l += 8) {
    const __m256 e = _mm256_loadu_ps(out + l);
    const __m256d e_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
    const __m256d e_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
    const __m128 lo =
        _mm256_cvtpd_ps(reciprocal ? exact_quotient_pd(e_lo, r, t) : _mm256_div_pd(e_lo, t));
    const __m128 hi =
        _mm256_cvtpd_ps(reciprocal ? exact_quotient_pd(e_hi, r, t) : _mm256_div_pd(e_hi, t));
    __m256 p = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    if (keep != nullptr) p = _mm256_and_ps(p, kept_lanes(keep, l));
    _mm256_storeu_ps(out + l, p);
  }
  for (int64_t l = full; l < length; ++l) {
    if (keep == nullptr || keep[l] != 0) {
      out[l] = static_cast<float>(static_cast<double>(out[l]) / total);
    }
  }
}

// The AVX-512 body (16 lanes; masks for the keep bytes and the tail, so any
// length >= 16). Same values as the AVX2 and scalar bodies step for step:
// the row maximum is exact and order-free (a zero maximum's sign does not
// matter: x - (+0) and x - (-0) differ only for x = -0, and e^-0 = e^+0);
// lane j of the double accumulator is partial sum j (l = j mod 8, l
// ascending); past-the-end and masked lanes add +0.
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_INLINE __mmask16 tail_lanes16(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

OASR_AVX512_INLINE __mmask16 kept_lanes16(const uint8_t* keep, int64_t l, __mmask16 lanes) {
  const __m128i bytes = _mm_maskz_loadu_epi8(lanes, keep + l);
  return _mm_test_epi8_mask(bytes, bytes);
}

OASR_AVX512_TARGET void softmax_row_avx512(const float* x, const uint8_t* keep, float* out,
                                           int64_t length) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 max16 = minus_inf;
  __mmask16 any_kept = 0, any_nan = 0;
  for (int64_t l = 0; l < length; l += 16) {
    const __mmask16 lanes = tail_lanes16(length - l);
    const __mmask16 kept = keep == nullptr ? lanes : kept_lanes16(keep, l, lanes);
    const __m512 v = _mm512_mask_loadu_ps(minus_inf, kept, x + l);
    any_kept |= kept;
    any_nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    max16 = _mm512_max_ps(max16, v);
  }
  if (any_kept == 0) {
    std::fill(out, out + length, 0.0f);
    return;
  }
  float row_max = _mm512_reduce_max_ps(max16);
  if (any_nan != 0) {
    // The scalar loop stops at the first kept NaN and keeps its bits.
    for (int64_t l = 0; l < length; ++l) {
      if ((keep == nullptr || keep[l] != 0) && std::isnan(x[l])) {
        row_max = x[l];
        break;
      }
    }
  }

  const __m512 m = _mm512_set1_ps(row_max);
  __m512d sum = _mm512_setzero_pd();
  for (int64_t l = 0; l < length; l += 16) {
    const __mmask16 lanes = tail_lanes16(length - l);
    const __mmask16 kept = keep == nullptr ? lanes : kept_lanes16(keep, l, lanes);
    const __m512 e = _mm512_maskz_mov_ps(
        kept, avx512::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + l), m)));
    _mm512_mask_storeu_ps(out + l, lanes, e);
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  alignas(64) double partial[8];
  _mm512_store_pd(partial, sum);
  const double total = ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
                       ((partial[2] + partial[6]) + (partial[3] + partial[7]));

  // The quotients in double, eight lanes at a time, as the AVX2 body.
  const __m512d t = _mm512_set1_pd(total);
  const __m512d r = _mm512_set1_pd(1.0 / total);
  const bool reciprocal = reciprocal_is_exact_enough(total);
  for (int64_t l = 0; l < length; l += 8) {
    const __mmask8 lanes = static_cast<__mmask8>(tail_lanes16(std::min<int64_t>(length - l, 8)));
    const __mmask8 kept =
        keep == nullptr ? lanes : static_cast<__mmask8>(kept_lanes16(keep, l, lanes));
    const __m512d e = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(lanes, out + l));
    const __m512d q = reciprocal ? exact_quotient_pd(e, r, t) : _mm512_div_pd(e, t);
    _mm256_mask_storeu_ps(out + l, lanes, _mm256_maskz_mov_ps(kept, _mm512_cvtpd_ps(q)));
  }
}
OASR_AVX512_WARNINGS_ON
#endif

// Rows per pool task: enough work (~64k positions) to repay handing it out.
int64_t rows_per_task(int64_t length) {
  constexpr int64_t kTaskPositions = 1 << 16;
  return std::max<int64_t>(1, kTaskPositions / std::max<int64_t>(length, 1));
}

}  // namespace

void softmax_f32(const float* x, const uint8_t* keep, float* out, int64_t outer, int64_t length,
                 int64_t inner) {
  const int64_t rows = outer * inner;
  if (rows == 0 || length == 0) return;
#if defined(__x86_64__)
  const bool vector = inner == 1 && length >= 8 && cpu_has(CpuIsa::kAvx2);
  const bool wide = inner == 1 && length >= 16 && cpu_has(CpuIsa::kAvx512Vnni);
#else
  const bool vector = false;
#endif
  const auto run_row = [&](int64_t row) {
    const int64_t o = row / inner, i = row % inner;
    const int64_t base = o * length * inner + i;
    const uint8_t* row_keep = keep == nullptr ? nullptr : keep + base;
#if defined(__x86_64__)
    if (wide) {
      softmax_row_avx512(x + base, row_keep, out + base, length);
      return;
    }
    if (vector) {
      softmax_row_avx2(x + base, row_keep, out + base, length);
      return;
    }
#endif
    softmax_row_scalar(x + base, row_keep, out + base, length, inner);
  };
  const int64_t chunk = rows_per_task(length);
  const int64_t tasks = (rows + chunk - 1) / chunk;
  parallel_for(tasks, [&](int64_t task) {
    const int64_t end = std::min(rows, (task + 1) * chunk);
    for (int64_t row = task * chunk; row < end; ++row) run_row(row);
  });
}

}  // namespace oasr::ops::cpu
