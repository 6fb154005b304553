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
#include "ops/cpu_threads.h"
#include "quant/kernels/cpu/int8_gemm_x86.h"
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

OASR_AVX2_TARGET void quantize_row(const float* x, const float* smooth_inv, int64_t k, int8_t* q,
                                   float* scale) {
  const float amax = row_amax(x, smooth_inv, k);
  const float multiplier = kInt8Max / amax;
  const __m256 m = _mm256_set1_ps(multiplier);
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    __m256i codes[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      codes[i] = x86::quantize_int8_lanes(_mm256_mul_ps(smoothed8(x, smooth_inv, j + 8 * i), m));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j),
                        x86::pack_int8_codes(codes[0], codes[1], codes[2], codes[3]));
  }
  for (; j < k; ++j) {
    const float value = smooth_inv != nullptr ? x[j] * smooth_inv[j] : x[j];
    q[j] = quantize_int8(value * multiplier);
  }
  *scale = amax / kInt8Max;
}

// numerics.h's quantize_row_static_int8: q_j = quantize_int8(x_j * m_j).
OASR_AVX2_TARGET void quantize_static_row(const float* x, const float* multiplier, int64_t k,
                                          int8_t* q) {
  int64_t j = 0;
  for (; j + 32 <= k; j += 32) {
    __m256i codes[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const int64_t at = j + 8 * i;
      codes[i] = x86::quantize_int8_lanes(
          _mm256_mul_ps(_mm256_loadu_ps(x + at), _mm256_loadu_ps(multiplier + at)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j),
                        x86::pack_int8_codes(codes[0], codes[1], codes[2], codes[3]));
  }
  for (; j < k; ++j) q[j] = quantize_int8(x[j] * multiplier[j]);
}

// Rows over the worker pool in chunks of about kElementsPerTask (rows are
// independent, so the split changes no bit).
template <typename RowFn>
void for_rows(int64_t m, int64_t k, const RowFn& row_fn) {
  constexpr int64_t kElementsPerTask = 16384;
  const int64_t rows_per_task = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(k, 1));
  ops::for_row_chunks(m, k, rows_per_task, /*parallel=*/true, [&](int64_t begin, int64_t count) {
    for (int64_t row = begin; row < begin + count; ++row) row_fn(row);
  });
}

}  // namespace

void quantize_per_token_int8_avx2(const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                  int8_t* q, float* scale) {
  OASR_CHECK(cpu_has_avx2(), kUnsupported,
             "int8 AVX2 quantize called on a CPU without AVX2+FMA; choose the cpu_reference lane");
  OASR_CHECK(m >= 0 && k >= 0, kInvalidArgument, "int8 AVX2 quantize: bad shape [", m, ", ", k,
             "]");
  for_rows(m, k, [&](int64_t row) {
    quantize_row(x + row * k, smooth_inv, k, q + row * k, scale + row);
  });
}

void quantize_row_per_token_int8_avx2(const float* x, const float* smooth_inv, int64_t k, int8_t* q,
                                      float* scale) {
  OASR_CHECK(cpu_has_avx2(), kUnsupported,
             "int8 AVX2 quantize called on a CPU without AVX2+FMA; choose the cpu_reference lane");
  quantize_row(x, smooth_inv, k, q, scale);
}

void quantize_static_int8_avx2(const float* x, const float* multiplier, int64_t m, int64_t k,
                               int8_t* q) {
  OASR_CHECK(cpu_has_avx2(), kUnsupported,
             "int8 AVX2 quantize called on a CPU without AVX2+FMA; choose the cpu_reference lane");
  OASR_CHECK(m >= 0 && k >= 0, kInvalidArgument, "int8 AVX2 static quantize: bad shape [", m, ", ",
             k, "]");
  for_rows(m, k,
           [&](int64_t row) { quantize_static_row(x + row * k, multiplier, k, q + row * k); });
}

}  // namespace oasr::quant
