// Reference arithmetic, float32 throughout: out = a * sigmoid(b), with the
// shared division-free sigmoid of core/activations.h (so a CUDA body gives
// the same bits). Where the dispatch level has AVX2 + FMA eight lanes run at
// a time through core/activations_avx2.h's sigmoid_ps, which returns the
// scalar sigmoid's bits lane by lane; the product is one IEEE multiply in
// both. Large tensors are split over the worker pool in fixed chunks of the
// contiguous half span; an element's bits do not depend on the chunking.
#include "ops/cpu/glu.h"

#include <algorithm>

#include "core/activations.h"
#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include "core/activations_avx2.h"
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;  // elements per pool task

void glu_span_scalar(const float* first, const float* gate, float* dst, int64_t count) {
  for (int64_t j = 0; j < count; ++j) dst[j] = first[j] * act::sigmoid(gate[j]);
}

#if defined(__x86_64__)
OASR_AVX2_TARGET void glu_span_avx2(const float* first, const float* gate, float* dst,
                                    int64_t count) {
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256 s = avx2::sigmoid_ps(_mm256_loadu_ps(gate + j));
    _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_loadu_ps(first + j), s));
  }
  glu_span_scalar(first + j, gate + j, dst + j, count - j);
}
#endif

void glu_span(const float* first, const float* gate, float* dst, int64_t count) {
#if defined(__x86_64__)
  if (cpu_has(CpuIsa::kAvx2)) {
    glu_span_avx2(first, gate, dst, count);
    return;
  }
#endif
  glu_span_scalar(first, gate, dst, count);
}

}  // namespace

void glu_f32(const float* x, float* out, int64_t outer, int64_t half, int64_t inner) {
  const int64_t half_span = half * inner;
  const auto row_span = [&](int64_t o, int64_t begin, int64_t count) {
    const float* first = x + o * 2 * half_span + begin;
    glu_span(first, first + half_span, out + o * half_span + begin, count);
  };
  if (outer * half_span <= kChunk) {
    for (int64_t o = 0; o < outer; ++o) row_span(o, 0, half_span);
    return;
  }
  if (half_span < kChunk) {  // several whole rows per task
    const int64_t rows_per_task = kChunk / half_span;
    parallel_for((outer + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
      const int64_t end = std::min(outer, (task + 1) * rows_per_task);
      for (int64_t o = task * rows_per_task; o < end; ++o) row_span(o, 0, half_span);
    });
    return;
  }
  const int64_t chunks_per_row = (half_span + kChunk - 1) / kChunk;  // a row in chunks
  parallel_for(outer * chunks_per_row, [&](int64_t task) {
    const int64_t begin = (task % chunks_per_row) * kChunk;
    row_span(task / chunks_per_row, begin, std::min(kChunk, half_span - begin));
  });
}

}  // namespace oasr::ops::cpu
