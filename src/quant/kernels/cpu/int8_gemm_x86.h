// Pieces the x86 int8 GEMM lanes share (scaled_mm_int8_avx2.cc,
// scaled_mm_int8_vnni.cc, scaled_mm_int8_avx_vnni.cc, scaled_mm_int8_amx.cc): 64-byte aligned
// arrays, the packed-A scratch of the calling thread, the u8 packing of A
// for vpdpbusd, and DESIGN.md §3's epilogue on eight (AVX2) or sixteen
// (AVX-512) exact int32 accumulators. x86-64 only.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "core/activations.h"
#include "core/activations_avx2.h"
#include "core/activations_avx512.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"

namespace oasr::quant::x86 {

template <typename T>
T* aligned_alloc_array(int64_t count) {
  return static_cast<T*>(::operator new[](static_cast<size_t>(count > 0 ? count : 1) * sizeof(T),
                                          std::align_val_t(64)));
}

// The packed-A scratch of the calling thread, at least `words` int32 words,
// reused across calls (a fresh megabyte per call would cost page faults each
// time). One per thread, shared by the lanes (a GEMM never nests another).
inline int32_t* a_scratch(int64_t words) {
  struct Scratch {
    int32_t* data = nullptr;
    int64_t capacity = 0;
    ~Scratch() { ::operator delete[](data, std::align_val_t(64)); }
  };
  thread_local Scratch scratch;
  if (scratch.capacity < words) {
    ::operator delete[](scratch.data, std::align_val_t(64));
    scratch.data = nullptr;
    scratch.data = aligned_alloc_array<int32_t>(words);
    scratch.capacity = words;
  }
  return scratch.data;
}

// fn(std::integral_constant<Activation, act>{}): each lane instantiates its
// block kernel once per activation and picks it here, at run time.
template <typename Fn>
auto with_activation(Activation act, const char* lane, Fn&& fn) {
  using A = Activation;
  switch (act) {
    case A::kNone:
      return fn(std::integral_constant<A, A::kNone>{});
    case A::kRelu:
      return fn(std::integral_constant<A, A::kRelu>{});
    case A::kSwish:
      return fn(std::integral_constant<A, A::kSwish>{});
    case A::kGeluErf:
      return fn(std::integral_constant<A, A::kGeluErf>{});
    case A::kGeluTanh:
      return fn(std::integral_constant<A, A::kGeluTanh>{});
    case A::kSigmoid:
      return fn(std::integral_constant<A, A::kSigmoid>{});
    case A::kTanh:
      return fn(std::integral_constant<A, A::kTanh>{});
  }
  OASR_THROW(kInternal, lane, ": unhandled activation ", static_cast<int>(act));
}

// The last panel's per-channel operands, zero-padded to the panel's width
// (kColumns), so the epilogue reads whole vectors: channels [col0, n).
template <int64_t kColumns>
struct PanelTail {
  alignas(64) int32_t compensation[kColumns];
  alignas(64) float w_scale[kColumns];
  alignas(64) float bias[kColumns];
  // compensation may be null (the AVX2 lane has none).
  void fill(int64_t col0, int64_t n, const int32_t* all_compensation, const float* all_w_scale,
            const float* all_bias) {
    for (int64_t c = 0; c < kColumns; ++c) {
      const bool valid = col0 + c < n;
      compensation[c] = valid && all_compensation != nullptr ? all_compensation[col0 + c] : 0;
      w_scale[c] = valid ? all_w_scale[col0 + c] : 0.0f;
      bias[c] = valid && all_bias != nullptr ? all_bias[col0 + c] : 0.0f;
    }
  }
};

// pack(row_begin, row_end) over `rows` rows of A in tiles of `tile_rows`:
// on the calling thread when A is small (a cheap pass that would not repay
// waking the pool), else a tile a task.
template <typename Pack>
void pack_a_tiles(int64_t rows, int64_t tile_rows, int64_t k, ops::cpu::WorkerPool& pool,
                  Pack&& pack) {
  constexpr int64_t kParallelPackValues = 1 << 16;
  if (rows * k < kParallelPackValues) {
    pack(0, rows);
    return;
  }
  pool.run(rows / tile_rows, [&](int64_t tile) { pack(tile * tile_rows, (tile + 1) * tile_rows); });
}

// The pool's tasks over a product of row_units x panel_units: groups of up
// to (rows, panels) units, halved (panels first) while there are fewer than
// two tasks per thread, so a product of few rows still reaches every core.
// Any grouping gives the same bits: each output is one exact accumulator.
struct TaskGrid {
  int64_t rows, panels;  // units per task
  int64_t row_groups, panel_groups;
  int64_t count() const { return row_groups * panel_groups; }
};
inline TaskGrid task_grid(int64_t row_units, int64_t rows, int64_t panel_units, int64_t panels,
                          int threads) {
  TaskGrid grid{rows, panels, 0, 0};
  for (;;) {
    grid.row_groups = (row_units + grid.rows - 1) / grid.rows;
    grid.panel_groups = (panel_units + grid.panels - 1) / grid.panels;
    if (grid.count() >= 2 * static_cast<int64_t>(threads)) break;
    if (grid.panels > 1) {
      grid.panels /= 2;
    } else if (grid.rows > 1) {
      grid.rows /= 2;
    } else {
      break;
    }
  }
  return grid;
}

// The product's tasks over the pool: task(row_begin, row_end, panel_begin,
// panel_end) in units, for the task_grid above. Panel groups outermost, so
// consecutive tasks share a weight block.
template <typename Task>
void run_task_grid(ops::cpu::WorkerPool& pool, int64_t row_units, int64_t rows, int64_t panel_units,
                   int64_t panels, const Task& task) {
  const TaskGrid grid = task_grid(row_units, rows, panel_units, panels, pool.threads());
  pool.run(grid.count(), [&](int64_t index) {
    const int64_t row_group = index % grid.row_groups, panel_group = index / grid.row_groups;
    task(row_group * grid.rows, std::min(row_units, (row_group + 1) * grid.rows),
         panel_group * grid.panels, std::min(panel_units, (panel_group + 1) * grid.panels));
  });
}

// Rows [row_begin, row_end) of A as u8 (a XOR 0x80 == a + 128) for
// vpdpbusd, `ld` bytes per row; the K pad and the rows past m are zero
// (their weights are zero). AVX2 only, so every vpdpbusd lane can call it.
OASR_AVX2_TARGET inline void pack_a_rows_u8(const int8_t* a, int64_t m, int64_t k,
                                            int64_t row_begin, int64_t row_end, int64_t ld,
                                            uint8_t* packed) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t row = row_begin; row < row_end; ++row) {
    uint8_t* dst = packed + row * ld;
    if (row >= m) {
      std::memset(dst, 0, static_cast<size_t>(ld));
      continue;
    }
    const int8_t* src = a + row * k;
    int64_t j = 0;
    for (; j + 32 <= k; j += 32) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), _mm256_xor_si256(bytes, flip));
    }
    for (; j < k; ++j) dst[j] = static_cast<uint8_t>(src[j]) ^ 0x80u;
    for (; j < ld; ++j) dst[j] = 0;
  }
}

// §3's epilogue on eight exact accumulators, in its order: t = w_scale *
// float(acc); t = a_scale * t; t = t + bias; y = act(t). The products and the
// add are the IEEE-rounded scalar operations lane by lane, so the bits match
// the scalar int8_epilogue. bias nullptr: no bias (t + -0 == t).
template <Activation kAct>
OASR_AVX2_INLINE __m256 epilogue8(__m256i acc, __m256 a_scale, const float* w_scale,
                                  const float* bias) {
  __m256 t = _mm256_mul_ps(_mm256_loadu_ps(w_scale), _mm256_cvtepi32_ps(acc));
  t = _mm256_mul_ps(a_scale, t);
  if (bias != nullptr) t = _mm256_add_ps(t, _mm256_loadu_ps(bias));
  return avx2::apply_ps(kAct, t);
}

// epilogue8 on sixteen lanes, for the AVX-512 VNNI lane: the same
// IEEE-rounded operations in the same order, with avx512::apply_ps, whose
// bits are the scalar activation's.
OASR_AVX512_WARNINGS_OFF
template <Activation kAct>
OASR_AVX512_INLINE __m512 epilogue16(__m512i acc, __m512 a_scale, const float* w_scale,
                                     const float* bias) {
  __m512 t = _mm512_mul_ps(_mm512_loadu_ps(w_scale), _mm512_cvtepi32_ps(acc));
  t = _mm512_mul_ps(a_scale, t);
  if (bias != nullptr) t = _mm512_add_ps(t, _mm512_loadu_ps(bias));
  return avx512::apply_ps(kAct, t);
}
OASR_AVX512_WARNINGS_ON

// numerics.h's quantize_int8 on eight lanes, as int32: rint, NaN -> 0,
// clamp to +-127 (the per-token and static quantizers and the conv gather).
OASR_AVX2_INLINE __m256i quantize_int8_lanes(__m256 v) {
  __m256 rounded = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  rounded = _mm256_and_ps(rounded, _mm256_cmp_ps(rounded, rounded, _CMP_ORD_Q));
  rounded = _mm256_min_ps(_mm256_max_ps(rounded, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(rounded);  // exact: an integer in [-127, 127]
}

// Four vectors of eight int32 codes (each in [-127, 127]) as 32 bytes in
// lane order: the packs interleave 128-bit halves, the permutation puts them
// back.
OASR_AVX2_INLINE __m256i pack_int8_codes(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace oasr::quant::x86
