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
// side by side so the adds' latency overlaps.
constexpr int64_t kRowsPerTask = 16;
constexpr int kRows = 4;

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

// Rows [0, count) of x (count <= kRows), each normalized as defined above.
void normalize_rows(const float* x, const float* weight, const float* bias, float* out, int count,
                    int64_t features, float eps) {
  if (features == 0) return;
  double sum[kRows] = {};
  double mean[kRows] = {};
  double squares[kRows] = {};
  double rstd[kRows] = {};
  for (int64_t d = 0; d < features; ++d) {
    for (int r = 0; r < count; ++r) sum[r] += static_cast<double>(x[r * features + d]);
  }
  for (int r = 0; r < count; ++r) mean[r] = sum[r] / static_cast<double>(features);
  for (int64_t d = 0; d < features; ++d) {
    for (int r = 0; r < count; ++r) {
      const double centered = static_cast<double>(x[r * features + d]) - mean[r];
      squares[r] += centered * centered;
    }
  }
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
