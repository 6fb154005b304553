// AVX2 per-token int8 quantization, bit-identical to numerics.h's
// quantize_row_dynamic_int8: the maximum of |x'| is exact whatever the order
// it is taken in, x' = x * smooth_inv and x' * m are the same IEEE products,
// the multiplier and scale are the same scalar divisions, and the rounding /
// clamping below is quantize_int8 lane by lane (NaN -> 0, +-inf -> +-127).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/activations_avx2.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/numerics.h"

namespace oasr::quant {
namespace {

// x' for eight lanes starting at j: x * smooth_inv, or x.
OASR_AVX2_INLINE __m256 smoothed8(const float* x, const float* smooth_inv, int64_t j) {
  const __m256 values = _mm256_loadu_ps(x + j);
  return smooth_inv != nullptr ? _mm256_mul_ps(values, _mm256_loadu_ps(smooth_inv + j)) : values;
}

// max(max_j |x'_j|, 1e-8). _mm256_max_ps(v, amax) returns amax where v is
// NaN, like the scalar `if (magnitude > amax)`, so NaNs are skipped alike.
OASR_AVX2_TARGET float row_amax(const float* x, const float* smooth_inv, int64_t k) {
  __m256 amax0 = _mm256_setzero_ps(), amax1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    amax0 = _mm256_max_ps(avx2::abs_ps(smoothed8(x, smooth_inv, j)), amax0);
    amax1 = _mm256_max_ps(avx2::abs_ps(smoothed8(x, smooth_inv, j + 8)), amax1);
  }
  for (; j + 8 <= k; j += 8)
    amax0 = _mm256_max_ps(avx2::abs_ps(smoothed8(x, smooth_inv, j)), amax0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(amax0, amax1));
  float amax = 0.0f;
  for (float lane : lanes) amax = lane > amax ? lane : amax;
  for (; j < k; ++j) {
    const float value = smooth_inv != nullptr ? x[j] * smooth_inv[j] : x[j];
    const float magnitude = act::detail::abs_f32(value);
    if (magnitude > amax) amax = magnitude;
  }
  return amax > kAmaxFloor ? amax : kAmaxFloor;
}

// quantize_int8(v) on eight lanes, as int32: rint, NaN -> 0, clamp to +-127.
OASR_AVX2_INLINE __m256i quantize8(__m256 v) {
  __m256 rounded = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  rounded = _mm256_and_ps(rounded, _mm256_cmp_ps(rounded, rounded, _CMP_ORD_Q));
  rounded =
      _mm256_min_ps(_mm256_max_ps(rounded, _mm256_set1_ps(-kInt8Max)), _mm256_set1_ps(kInt8Max));
  return _mm256_cvtps_epi32(rounded);  // exact: an integer in [-127, 127]
}

OASR_AVX2_TARGET void quantize_row(const float* x, const float* smooth_inv, int64_t k, int8_t* q,
                                   float* scale) {
  const float amax = row_amax(x, smooth_inv, k);
  const float multiplier = kInt8Max / amax;
  const __m256 m = _mm256_set1_ps(multiplier);
  // int32 -> int8 with two packs; they interleave 128-bit halves, which the
  // final permutation puts back in order. Values are within int8 already.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    const __m256i q0 = quantize8(_mm256_mul_ps(smoothed8(x, smooth_inv, j), m));
    const __m256i q1 = quantize8(_mm256_mul_ps(smoothed8(x, smooth_inv, j + 8), m));
    const __m256i q2 = quantize8(_mm256_mul_ps(smoothed8(x, smooth_inv, j + 16), m));
    const __m256i q3 = quantize8(_mm256_mul_ps(smoothed8(x, smooth_inv, j + 24), m));
    const __m256i words01 = _mm256_packs_epi32(q0, q1);
    const __m256i words23 = _mm256_packs_epi32(q2, q3);
    const __m256i bytes = _mm256_packs_epi16(words01, words23);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
  for (; j < k; ++j) {
    const float value = smooth_inv != nullptr ? x[j] * smooth_inv[j] : x[j];
    q[j] = quantize_int8(value * multiplier);
  }
  *scale = amax / kInt8Max;
}

}  // namespace

void quantize_per_token_int8_avx2(const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                  int8_t* q, float* scale) {
  OASR_CHECK(cpu_has_avx2(), kUnsupported,
             "int8 AVX2 quantize called on a CPU without AVX2+FMA; choose the cpu_reference lane");
  OASR_CHECK(m >= 0 && k >= 0, kInvalidArgument, "int8 AVX2 quantize: bad shape [", m, ", ", k,
             "]");
  // Rows are independent; large inputs are split over the lane's threads in
  // chunks of about kElementsPerTask (smaller ones are not worth a wake-up).
  constexpr int64_t kElementsPerTask = 16384;
  const int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(k, 1));
  const int64_t tasks = (m + rows_per_task - 1) / rows_per_task;
  auto quantize_rows = [&](int64_t task) {
    const int64_t end = std::min(m, (task + 1) * rows_per_task);
    for (int64_t row = task * rows_per_task; row < end; ++row) {
      quantize_row(x + row * k, smooth_inv, k, q + row * k, scale + row);
    }
  };
  if (tasks < 4) {
    for (int64_t task = 0; task < tasks; ++task) quantize_rows(task);
    return;
  }
  ops::cpu::shared_worker_pool()->run(tasks, quantize_rows);
}

}  // namespace oasr::quant
