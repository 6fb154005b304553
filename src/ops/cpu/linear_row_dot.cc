#include "ops/cpu/linear_row_dot.h"

#include <algorithm>
#include <cmath>

#include "core/cpu_features.h"
#include "core/float_types.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include <immintrin.h>

#include "core/activations_avx2.h"  // OASR_AVX2_TARGET
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kColumnsPerTask = 256;
constexpr int64_t kRowBlock = 4;  // rows sharing one pass over a weight row

float reduce_partials(const float s[kLanes]) {
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

inline float widen(float w) {
  return w;
}
inline float widen(uint16_t half_bits) {
  return f16_bits_to_f32(half_bits);
}

template <typename W>
void columns_scalar(const float* x, const W* weight, const float* bias, float* out, int64_t rows,
                    int64_t n_begin, int64_t n_end, int64_t n_total, int64_t k) {
  const int64_t padded = (k + kLanes - 1) / kLanes * kLanes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * k;
    for (int64_t n = n_begin; n < n_end; ++n) {
      const W* wn = weight + n * k;
      float s[kLanes] = {};
      for (int64_t i = 0; i < padded; ++i) {
        const float xv = i < k ? xr[i] : 0.0f;
        const float wv = i < k ? widen(wn[i]) : 0.0f;
        s[i % kLanes] = std::fma(xv, wv, s[i % kLanes]);
      }
      const float dot = reduce_partials(s);
      out[r * n_total + n] = bias == nullptr ? dot : dot + bias[n];
    }
  }
}

#if defined(__x86_64__)
OASR_AVX2_INLINE float reduce8(__m256 v) {
  // (l0+l4, l1+l5, l2+l6, l3+l7), then ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)), then their sum.
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// Eight weights, widened to float32 (exactly, for float16).
OASR_AVX2_INLINE __m256 load_weights(const float* w) {
  return _mm256_loadu_ps(w);
}
OASR_AVX2_INLINE __m256 load_weights(const uint16_t* w) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
}
// The K tail (count < 8 weights), zeros past it.
OASR_AVX2_INLINE __m256 load_weight_tail(const float* w, int64_t count, __m256i mask) {
  (void)count;
  return _mm256_maskload_ps(w, mask);
}
OASR_AVX2_INLINE __m256 load_weight_tail(const uint16_t* w, int64_t count, __m256i mask) {
  (void)mask;
  alignas(16) uint16_t lanes[8] = {};
  for (int64_t i = 0; i < count; ++i) lanes[i] = w[i];
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(lanes)));
}

OASR_AVX2_INLINE void store_output(float* out, const float* bias, int r, int64_t column,
                                   int64_t n_total, __m256 acc) {
  const float dot = reduce8(acc);
  out[r * n_total + column] = bias == nullptr ? dot : dot + bias[column];
}

// Up to kRowBlock rows against two weight rows at a time; the K tail is
// loaded with a mask (zeros past K), which is the definition's padding. The
// row loops are unrolled by pragma: -O2 leaves them rolled, with the
// accumulators on the stack (a load and a store around every fma: 3x slower).
template <int kRows, typename W>
OASR_AVX2_TARGET void block_avx2(const float* x, const W* weight, const float* bias, float* out,
                                 int64_t n_begin, int64_t n_end, int64_t n_total, int64_t k) {
  const int64_t full = k - k % kLanes;
  alignas(32) int32_t mask_words[kLanes];
  for (int64_t i = 0; i < kLanes; ++i) mask_words[i] = full + i < k ? -1 : 0;
  const __m256i tail_mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_words));
  const bool has_tail = full < k;
  int64_t n = n_begin;
  for (; n + 2 <= n_end; n += 2) {
    const W* w0 = weight + n * k;
    const W* w1 = w0 + k;
    __m256 a0[kRows], a1[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += kLanes) {
      const __m256 v0 = load_weights(w0 + i);
      const __m256 v1 = load_weights(w1 + i);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * k + i);
        a0[r] = _mm256_fmadd_ps(xv, v0, a0[r]);
        a1[r] = _mm256_fmadd_ps(xv, v1, a1[r]);
      }
    }
    if (has_tail) {
      const __m256 v0 = load_weight_tail(w0 + full, k - full, tail_mask);
      const __m256 v1 = load_weight_tail(w1 + full, k - full, tail_mask);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m256 xv = _mm256_maskload_ps(x + r * k + full, tail_mask);
        a0[r] = _mm256_fmadd_ps(xv, v0, a0[r]);
        a1[r] = _mm256_fmadd_ps(xv, v1, a1[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      store_output(out, bias, r, n, n_total, a0[r]);
      store_output(out, bias, r, n + 1, n_total, a1[r]);
    }
  }
  for (; n < n_end; ++n) {
    const W* w0 = weight + n * k;
    __m256 a0[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) a0[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += kLanes) {
      const __m256 v0 = load_weights(w0 + i);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * k + i), v0, a0[r]);
      }
    }
    if (has_tail) {
      const __m256 v0 = load_weight_tail(w0 + full, k - full, tail_mask);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        a0[r] = _mm256_fmadd_ps(_mm256_maskload_ps(x + r * k + full, tail_mask), v0, a0[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) store_output(out, bias, r, n, n_total, a0[r]);
  }
}

template <typename W>
void columns_avx2(const float* x, const W* weight, const float* bias, float* out, int64_t rows,
                  int64_t n_begin, int64_t n_end, int64_t n_total, int64_t k) {
  for (int64_t r = 0; r < rows; r += kRowBlock) {
    const float* xr = x + r * k;
    float* outr = out + r * n_total;
    switch (std::min(kRowBlock, rows - r)) {
      case 4:
        block_avx2<4, W>(xr, weight, bias, outr, n_begin, n_end, n_total, k);
        break;
      case 3:
        block_avx2<3, W>(xr, weight, bias, outr, n_begin, n_end, n_total, k);
        break;
      case 2:
        block_avx2<2, W>(xr, weight, bias, outr, n_begin, n_end, n_total, k);
        break;
      default:
        block_avx2<1, W>(xr, weight, bias, outr, n_begin, n_end, n_total, k);
        break;
    }
  }
}
#endif

template <typename W>
void run_row_dot(const float* x, const W* weight, const float* bias, float* out, int64_t rows,
                 int64_t out_features, int64_t in_features) {
  if (rows == 0 || out_features == 0) return;
#if defined(__x86_64__)
  const auto body = cpu_has(CpuIsa::kAvx2) ? columns_avx2<W> : columns_scalar<W>;
#else
  const auto body = columns_scalar<W>;
#endif
  const int64_t tasks = (out_features + kColumnsPerTask - 1) / kColumnsPerTask;
  parallel_for(tasks, [&](int64_t task) {
    const int64_t begin = task * kColumnsPerTask;
    body(x, weight, bias, out, rows, begin, std::min(out_features, begin + kColumnsPerTask),
         out_features, in_features);
  });
}

}  // namespace

void linear_row_dot_f32(const float* x, const float* weight, const float* bias, float* out,
                        int64_t rows, int64_t out_features, int64_t in_features) {
  run_row_dot(x, weight, bias, out, rows, out_features, in_features);
}

void linear_row_dot_f16w(const float* x, const uint16_t* weight, const float* bias, float* out,
                         int64_t rows, int64_t out_features, int64_t in_features) {
  run_row_dot(x, weight, bias, out, rows, out_features, in_features);
}

}  // namespace oasr::ops::cpu
