// Reference arithmetic, per row of D values (the future CUDA body is tested
// against this under a tolerance):
//   mean = (sum_d x_d) / D                  double, sequential d = 0..D-1
//   var  = (sum_d (x_d - mean)^2) / D       double, same order; biased like PyTorch
//   rstd = 1 / sqrt(var + eps)              double
//   y_d  = float((x_d - mean) * rstd * w_d + b_d)   double, one rounding at the end
// Double accumulation keeps the two-pass mean exact enough that rows with a
// large common offset (|mean| >> std) lose nothing to cancellation.
#include "ops/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include <immintrin.h>

#include "core/activations_avx2.h"    // OASR_AVX2_TARGET
#include "core/activations_avx512.h"  // OASR_AVX512_TARGET
#endif

namespace oasr::ops::cpu {
namespace {

// Rows per pool task, and the rows one pass interleaves: each row keeps its
// own sequential sums (the definition's order), the kRows chains only run
// side by side so the adds' latency overlaps (on AVX-512, as the eight
// double lanes of one vector).
constexpr int64_t kRowsPerTask = 16;
constexpr int kRows = 8;

// y_d = float((x_d - mean) * rstd * w_d + b_d) in double for d in [begin, end).
void scale_shift_scalar(const float* x, const float* weight, const float* bias, float* out,
                        int64_t begin, int64_t end, double mean, double rstd) {
  for (int64_t d = begin; d < end; ++d) {
    double y = (static_cast<double>(x[d]) - mean) * rstd;
    if (weight != nullptr) y = y * static_cast<double>(weight[d]);
    if (bias != nullptr) y = y + static_cast<double>(bias[d]);
    out[d] = static_cast<float>(y);
  }
}

#if defined(__x86_64__)
// Four lanes of the same double operations (the conversions are exact, the
// final one rounds to nearest as the scalar cast does): the same bits.
OASR_AVX2_TARGET void scale_shift_avx2(const float* x, const float* weight, const float* bias,
                                       float* out, int64_t features, double mean, double rstd) {
  const __m256d mean4 = _mm256_set1_pd(mean);
  const __m256d rstd4 = _mm256_set1_pd(rstd);
  int64_t d = 0;
  for (; d + 4 <= features; d += 4) {
    __m256d y = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + d)), mean4), rstd4);
    if (weight != nullptr) y = _mm256_mul_pd(y, _mm256_cvtps_pd(_mm_loadu_ps(weight + d)));
    if (bias != nullptr) y = _mm256_add_pd(y, _mm256_cvtps_pd(_mm_loadu_ps(bias + d)));
    _mm_storeu_ps(out + d, _mm256_cvtpd_ps(y));
  }
  scale_shift_scalar(x, weight, bias, out, d, features, mean, rstd);
}

// Eight lanes of the same double operations.
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void scale_shift_avx512(const float* x, const float* weight, const float* bias,
                                           float* out, int64_t features, double mean, double rstd) {
  const __m512d mean8 = _mm512_set1_pd(mean);
  const __m512d rstd8 = _mm512_set1_pd(rstd);
  int64_t d = 0;
  for (; d + 8 <= features; d += 8) {
    __m512d y = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + d)), mean8), rstd8);
    if (weight != nullptr) y = _mm512_mul_pd(y, _mm512_cvtps_pd(_mm256_loadu_ps(weight + d)));
    if (bias != nullptr) y = _mm512_add_pd(y, _mm512_cvtps_pd(_mm256_loadu_ps(bias + d)));
    _mm256_storeu_ps(out + d, _mm512_cvtpd_ps(y));
  }
  scale_shift_scalar(x, weight, bias, out, d, features, mean, rstd);
}
OASR_AVX512_WARNINGS_ON
#endif

void scale_shift_row(const float* x, const float* weight, const float* bias, float* out,
                     int64_t features, double mean, double rstd) {
#if defined(__x86_64__)
  if (cpu_has(CpuIsa::kAvx512Vnni)) {
    scale_shift_avx512(x, weight, bias, out, features, mean, rstd);
    return;
  }
  if (cpu_has(CpuIsa::kAvx2)) {
    scale_shift_avx2(x, weight, bias, out, features, mean, rstd);
    return;
  }
#endif
  scale_shift_scalar(x, weight, bias, out, 0, features, mean, rstd);
}

// The definition's two sums over features [begin, features) of rows
// [0, count), added onto sums[] (the plain sums when mean == nullptr, else
// the squares centred on mean[]), each row in d order.
void row_sums_scalar(const float* x, int count, int64_t features, int64_t begin, const double* mean,
                     double* sums) {
  for (int64_t d = begin; d < features; ++d) {
    for (int r = 0; r < count; ++r) {
      const double value = static_cast<double>(x[r * features + d]);
      if (mean == nullptr) {
        sums[r] += value;
      } else {
        const double centered = value - mean[r];
        sums[r] += centered * centered;
      }
    }
  }
}

#if defined(__x86_64__)
// row_sums_scalar for kRows full rows from feature 0: eight features of
// each row a step, transposed so that lane r of each vector is row r (every
// row's adds stay in d order, the same IEEE operations), the feature tail
// scalar.
static_assert(kRows == 8, "the transpose below is 8 rows x 8 features");
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void row_sums_avx512(const float* x, int64_t features, const double* mean,
                                        double* sums) {
  __m512d acc = _mm512_loadu_pd(sums);
  const __m512d centre = mean == nullptr ? _mm512_setzero_pd() : _mm512_loadu_pd(mean);
  int64_t d = 0;
  for (; d + 8 <= features; d += 8) {
    __m256 rows[kRows];
    for (int r = 0; r < kRows; ++r) rows[r] = _mm256_loadu_ps(x + r * features + d);
    // The 8 x 8 transpose: column k of the block becomes vector k.
    __m256 pairs[kRows], quads[kRows], columns[kRows];
    for (int r = 0; r < kRows; r += 2) {
      pairs[r] = _mm256_unpacklo_ps(rows[r], rows[r + 1]);
      pairs[r + 1] = _mm256_unpackhi_ps(rows[r], rows[r + 1]);
    }
    for (int h = 0; h < kRows; h += 4) {
      quads[h] = _mm256_shuffle_ps(pairs[h], pairs[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
      quads[h + 1] = _mm256_shuffle_ps(pairs[h], pairs[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
      quads[h + 2] = _mm256_shuffle_ps(pairs[h + 1], pairs[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
      quads[h + 3] = _mm256_shuffle_ps(pairs[h + 1], pairs[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; ++k) {
      columns[k] = _mm256_permute2f128_ps(quads[k], quads[k + 4], 0x20);
      columns[k + 4] = _mm256_permute2f128_ps(quads[k], quads[k + 4], 0x31);
    }
    for (int k = 0; k < kRows; ++k) {
      const __m512d value = _mm512_cvtps_pd(columns[k]);
      if (mean == nullptr) {
        acc = _mm512_add_pd(acc, value);
      } else {
        const __m512d centered = _mm512_sub_pd(value, centre);
        acc = _mm512_add_pd(acc, _mm512_mul_pd(centered, centered));
      }
    }
  }
  _mm512_storeu_pd(sums, acc);
  row_sums_scalar(x, kRows, features, d, mean, sums);
}
OASR_AVX512_WARNINGS_ON
#endif

void row_sums(const float* x, int count, int64_t features, const double* mean, double* sums) {
#if defined(__x86_64__)
  if (count == kRows && cpu_has(CpuIsa::kAvx512Vnni)) {
    row_sums_avx512(x, features, mean, sums);
    return;
  }
#endif
  row_sums_scalar(x, count, features, 0, mean, sums);
}

// Rows [0, count) of x (count <= kRows), each normalized as defined above.
void normalize_rows(const float* x, const float* weight, const float* bias, float* out, int count,
                    int64_t features, float eps) {
  if (features == 0) return;
  double sum[kRows] = {};
  double mean[kRows] = {};
  double squares[kRows] = {};
  double rstd[kRows] = {};
  row_sums(x, count, features, nullptr, sum);
  for (int r = 0; r < count; ++r) mean[r] = sum[r] / static_cast<double>(features);
  row_sums(x, count, features, mean, squares);
  for (int r = 0; r < count; ++r) {
    const double variance = squares[r] / static_cast<double>(features);
    rstd[r] = 1.0 / std::sqrt(variance + static_cast<double>(eps));
  }
  for (int r = 0; r < count; ++r) {
    scale_shift_row(x + r * features, weight, bias, out + r * features, features, mean[r], rstd[r]);
  }
}

// body(first_row, row_count) over [0, rows) in kRows groups, split over the
// pool in kRowsPerTask chunks when `parallel` and there is enough work.
template <typename Body>
void for_row_groups(int64_t rows, int64_t features, bool parallel, const Body& body) {
  for_row_chunks(rows, features, kRowsPerTask, parallel, [&](int64_t begin, int64_t count) {
    for (int64_t r = begin; r < begin + count; r += kRows) {
      body(r, static_cast<int>(std::min<int64_t>(kRows, begin + count - r)));
    }
  });
}

}  // namespace

void layer_norm_f32(const float* x, const float* weight, const float* bias, float* out,
                    int64_t rows, int64_t features, float eps, bool parallel) {
  for_row_groups(rows, features, parallel, [&](int64_t r, int count) {
    normalize_rows(x + r * features, weight, bias, out + r * features, count, features, eps);
  });
}

void add_scaled_layer_norm_f32(const float* x, const float* residual, float alpha,
                               const float* weight, const float* bias, float* sum,
                               float* normalized, int64_t rows, int64_t features, float eps,
                               bool parallel) {
  for_row_groups(rows, features, parallel, [&](int64_t r, int count) {
    const int64_t offset = r * features;
    for (int64_t i = 0; i < count * features; ++i) {
      const float scaled = alpha * x[offset + i];
      sum[offset + i] = residual[offset + i] + scaled;
    }
    normalize_rows(sum + offset, weight, bias, normalized + offset, count, features, eps);
  });
}

}  // namespace oasr::ops::cpu
