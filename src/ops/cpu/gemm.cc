// The float32 GEMM of ops/cpu/gemm.h, in the order defined there.
//
// Layout (BLIS's, without packing a): b is packed once per call into panels
// of kNr columns (the AVX-512 body reads two side by side), [K][kNr] each, zeros past N (a b too
// large to pack whole is packed one kKc x kNr block at a time instead); a micro-kernel keeps a kMr
// x kNr block of outputs in registers and runs the k loop over one panel, broadcasting a's elements
// straight from its kMr rows (each row a sequential stream; packing a cost a third of attention's
// probs x values product). K is cut into kKc blocks to keep a panel in L1; a later block starts
// from the outputs the previous one stored, and a float32 store and reload is exact, so the
// blocking leaves each output's fma chain -- and its bits -- as the definition's. The work is split
// into tiles of at most kMc (kMcWide) rows x kNc columns handed to the worker pool, cut finer where
// there would be fewer than two per thread; a tile's outputs depend neither on the tile's extent
// nor on which thread ran it.
#include "ops/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include <immintrin.h>

#include "core/activations_avx2.h"  // OASR_AVX2_TARGET
#endif

namespace oasr::ops::cpu {
namespace {

constexpr int64_t kMr = 6;                                // rows of a micro-kernel block
constexpr int64_t kNr = kGemmPanelColumns;                // columns of a panel (two AVX2 vectors)
constexpr int64_t kKc = 256;                              // K per pass over a panel
constexpr int64_t kMc = 48;                               // rows of a pool task
constexpr int64_t kNc = 128;                              // columns of a pool task
constexpr int64_t kMcWide = 264;                          // rows of a task when b is large
constexpr int64_t kMinTileRows = 24;                      // rows of the smallest task
constexpr int64_t kCachedPanelFloats = int64_t{1} << 18;  // 1 MiB of b
constexpr int64_t kWholePackFloats = int64_t{1} << 22;    // a [K, N] b packed whole up to 16 MiB

// A micro-kernel body: c[0..rows, 0..cols] (ldc) continues (accumulate) or
// starts at +0, then takes kc terms of a's rows (a[r * lda + p]) against
// panels of kNr columns ([kc][ldp] each); a body of two-panel width reads
// columns kNr.. from panel + panel_stride.
using MicroBody = void (*)(int64_t rows, const float* a, int64_t lda, const float* panel,
                           int64_t panel_stride, int64_t ldp, int64_t kc, float* c, int64_t ldc,
                           int64_t cols, bool accumulate);
struct MicroKernel {
  MicroBody body;
  int64_t rows;    // the most rows of one call
  int64_t panels;  // panels (of kNr columns) one call covers
};

void micro_scalar(int64_t rows, const float* a, int64_t lda, const float* panel,
                  int64_t /*panel_stride*/, int64_t ldp, int64_t kc, float* c, int64_t ldc,
                  int64_t cols, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      float s = accumulate ? c[r * ldc + j] : 0.0f;
      for (int64_t p = 0; p < kc; ++p) s = std::fma(a[r * lda + p], panel[p * ldp + j], s);
      c[r * ldc + j] = s;
    }
  }
}

#if defined(__x86_64__)
// The row loops are unrolled by pragma (-O2 leaves them rolled, which keeps
// the accumulators on the stack and costs about 2.5x).
template <int kRows>
OASR_AVX2_TARGET void micro_avx2_rows(const float* a, int64_t lda, const float* panel, int64_t ldp,
                                      int64_t kc, float* c, int64_t ldc, int64_t cols,
                                      bool accumulate) {
  __m256 lo[kRows], hi[kRows];
  alignas(32) float edge[kRows][kNr] = {};  // a partial panel's outputs, zeros past cols
  if (accumulate && cols < kNr) {
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      std::memcpy(edge[r], c + r * ldc, sizeof(float) * static_cast<size_t>(cols));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (!accumulate) {
      lo[r] = hi[r] = _mm256_setzero_ps();
    } else if (cols == kNr) {
      lo[r] = _mm256_loadu_ps(c + r * ldc);
      hi[r] = _mm256_loadu_ps(c + r * ldc + 8);
    } else {
      lo[r] = _mm256_load_ps(edge[r]);
      hi[r] = _mm256_load_ps(edge[r] + 8);
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(panel + p * ldp);
    const __m256 b1 = _mm256_loadu_ps(panel + p * ldp + 8);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    if (cols == kNr) {
      _mm256_storeu_ps(c + r * ldc, lo[r]);
      _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
    } else {
      _mm256_store_ps(edge[r], lo[r]);
      _mm256_store_ps(edge[r] + 8, hi[r]);
      std::memcpy(c + r * ldc, edge[r], sizeof(float) * static_cast<size_t>(cols));
    }
  }
}

void micro_avx2(int64_t rows, const float* a, int64_t lda, const float* panel,
                int64_t /*panel_stride*/, int64_t ldp, int64_t kc, float* c, int64_t ldc,
                int64_t cols, bool accumulate) {
  switch (rows) {
    case 6:
      return micro_avx2_rows<6>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
    case 5:
      return micro_avx2_rows<5>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
    case 4:
      return micro_avx2_rows<4>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
    case 3:
      return micro_avx2_rows<3>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
    case 2:
      return micro_avx2_rows<2>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
    default:
      return micro_avx2_rows<1>(a, lda, panel, ldp, kc, c, ldc, cols, accumulate);
  }
}

// AVX-512: kMrWide rows x two panels (32 columns) per call, two zmm
// accumulators a row, so each broadcast of a feeds two 16-lane fmas (the
// AVX2 body's 6 x 16 block spends 8 loads per 12 fmas). 8 rows measured
// best on a Zen 4 (double-pumped 512-bit fmas: 6 and 12 rows were slower;
// U2++ fp32 B = 4 686 -> 638 ms against the AVX2 body, bench/README.md).
// Same fma chain per output, so the same bits; a partial second panel is
// handled by masks, a call of at most kNr columns goes to the AVX2 body.
constexpr int64_t kMrWide = 8;

template <int kRows>
__attribute__((target("avx512f,avx2,fma"))) void micro_avx512_rows(
    const float* a, int64_t lda, const float* panel, int64_t panel_stride, int64_t ldp, int64_t kc,
    float* c, int64_t ldc, int64_t cols, bool accumulate) {
  const float* panel1 = panel + panel_stride;
  const __mmask16 high = static_cast<__mmask16>((1u << (cols - kNr)) - 1u);
  __m512 lo[kRows], hi[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    if (accumulate) {
      lo[r] = _mm512_loadu_ps(c + r * ldc);
      hi[r] = _mm512_maskz_loadu_ps(high, c + r * ldc + kNr);
    } else {
      lo[r] = hi[r] = _mm512_setzero_ps();
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(panel + p * ldp);
    const __m512 b1 = _mm512_loadu_ps(panel1 + p * ldp);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
      lo[r] = _mm512_fmadd_ps(av, b0, lo[r]);
      hi[r] = _mm512_fmadd_ps(av, b1, hi[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, lo[r]);
    _mm512_mask_storeu_ps(c + r * ldc + kNr, high, hi[r]);
  }
}

template <int... kRows>
void micro_avx512_dispatch(std::integer_sequence<int, kRows...>, int64_t rows, const float* a,
                           int64_t lda, const float* panel, int64_t panel_stride, int64_t ldp,
                           int64_t kc, float* c, int64_t ldc, int64_t cols, bool accumulate) {
  // rows is in [1, kMrWide]: the body of exactly that many rows.
  ((rows == kRows + 1 ? micro_avx512_rows<kRows + 1>(a, lda, panel, panel_stride, ldp, kc, c, ldc,
                                                     cols, accumulate)
                      : void()),
   ...);
}

void micro_avx512(int64_t rows, const float* a, int64_t lda, const float* panel,
                  int64_t panel_stride, int64_t ldp, int64_t kc, float* c, int64_t ldc,
                  int64_t cols, bool accumulate) {
  if (cols <= kNr) {  // one panel: the AVX2 body, kMr rows at a time
    for (int64_t r = 0; r < rows; r += kMr) {
      micro_avx2(std::min(kMr, rows - r), a + r * lda, lda, panel, 0, ldp, kc, c + r * ldc, ldc,
                 cols, accumulate);
    }
    return;
  }
  micro_avx512_dispatch(std::make_integer_sequence<int, kMrWide>{}, rows, a, lda, panel,
                        panel_stride, ldp, kc, c, ldc, cols, accumulate);
}
#endif

MicroKernel micro_kernel() {
#if defined(__x86_64__)
  if (cpu_has(CpuIsa::kAvx512Vnni)) return {micro_avx512, kMrWide, 2};
  if (cpu_has(CpuIsa::kAvx2)) return {micro_avx2, kMr, 1};
#endif
  return {micro_scalar, kMr, 1};
}

// Panel `index` of b: packed[k * kNr + j] = b(k, index * kNr + j), zeros past N.
void pack_panel(const float* b, int64_t ldb, bool transpose_b, int64_t n, int64_t k, int64_t index,
                float* packed) {
  const int64_t n0 = index * kNr;
  const int64_t cols = std::min(kNr, n - n0);
  if (cols < kNr) std::fill(packed, packed + k * kNr, 0.0f);
  if (transpose_b) {
    for (int64_t j = 0; j < cols; ++j) {
      const float* row = b + (n0 + j) * ldb;
      for (int64_t p = 0; p < k; ++p) packed[p * kNr + j] = row[p];
    }
  } else {
    for (int64_t p = 0; p < k; ++p) {
      std::memcpy(packed + p * kNr, b + p * ldb + n0, sizeof(float) * static_cast<size_t>(cols));
    }
  }
}

// Packs kc rows (from kb) of a [K, N] b's panel `index` into kKc x kNr
// floats, zeros past N.
void pack_block(const float* b, int64_t ldb, int64_t n, int64_t index, int64_t kb, int64_t kc,
                float* packed) {
  const int64_t n0 = index * kNr;
  const int64_t cols = std::min(kNr, n - n0);
  if (cols == kNr) {  // a constant-size copy, inlined
    for (int64_t p = 0; p < kc; ++p) {
      std::memcpy(packed + p * kNr, b + (kb + p) * ldb + n0, sizeof(float) * kNr);
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p) {
    float* dst = packed + p * kNr;
    std::memcpy(dst, b + (kb + p) * ldb + n0, sizeof(float) * static_cast<size_t>(cols));
    std::fill(dst + cols, dst + kNr, 0.0f);
  }
}

// Packs kc rows (from kb) of panel `index` of a transposed b ([N, K], read as
// its transpose) into kKc x kNr floats, zeros past N.
void pack_block_transposed(const float* b, int64_t ldb, int64_t n, int64_t index, int64_t kb,
                           int64_t kc, float* packed) {
  const int64_t n0 = index * kNr;
  const int64_t cols = std::min(kNr, n - n0);
  if (cols < kNr) std::fill(packed, packed + kc * kNr, 0.0f);
  for (int64_t j = 0; j < cols; ++j) {
    const float* row = b + (n0 + j) * ldb + kb;
    for (int64_t p = 0; p < kc; ++p) packed[p * kNr + j] = row[p];
  }
}

// Rows [m0, m1) x columns [n0, n1) of c. b arrives packed whole
// (`packed`, reused by every row tile) unless one row tile spans every row
// or b is a [K, N] too large for that; then it is packed here, one kc x kNr
// block at a time, so the block sits in L1 for the rows (read in place, its
// rows straddle two cache lines each).
void run_tile(const MicroKernel& kernel, const float* a, int64_t lda, const float* b, int64_t ldb,
              bool transpose_b, const float* packed, float* c, int64_t ldc, int64_t m0, int64_t m1,
              int64_t n0, int64_t n1, int64_t n, int64_t k) {
  thread_local float block[2 * kKc * kNr];
  const int64_t step = kernel.panels * kNr;
  for (int64_t kb = 0; kb < k; kb += kKc) {
    const int64_t kc = std::min(kKc, k - kb);
    for (int64_t j = n0; j < n1; j += step) {
      const int64_t cols = std::min(step, n1 - j);
      const float* panel = nullptr;
      int64_t panel_stride = k * kNr;
      if (packed != nullptr) {
        panel = packed + (j / kNr) * k * kNr + kb * kNr;
      } else {
        const auto pack = transpose_b ? pack_block_transposed : pack_block;
        pack(b, ldb, n, j / kNr, kb, kc, block);
        if (cols > kNr) pack(b, ldb, n, j / kNr + 1, kb, kc, block + kKc * kNr);
        panel = block;
        panel_stride = kKc * kNr;
      }
      for (int64_t m = m0; m < m1; m += kernel.rows) {
        kernel.body(std::min(kernel.rows, m1 - m), a + m * lda + kb, lda, panel, panel_stride, kNr,
                    kc, c + m * ldc + j, ldc, cols, kb > 0);
      }
    }
  }
}

// The calling thread's packing buffer, kept between calls (a fresh
// allocation of a megabyte per call would fault its pages in every time).
std::vector<float>& packing_buffer(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer;
}

// Every tile of c over the pool (or in order when !parallel). Tiles never
// change a bit, only the traffic: a b too large for the caches is streamed
// once, by tiles spanning (up to kMcWide) every row.
int64_t rows_per_tile(int64_t n, int64_t k) {
  return n * k > kCachedPanelFloats ? kMcWide : kMc;
}

// Tiles of at most (rows, columns), made smaller while the product has
// fewer than two per thread: columns first, down to two panels (a wide row
// tile still streams its slab of b once), then wide row tiles to kMc, then
// rows down to kMinTileRows (three 8-row blocks of the AVX-512
// body, four of the AVX2 body's 6). On 16 threads a U2++
// FFN's w_2 at 250 rows (N = 256, K = 2048) was two tiles of 264 x 128, so
// fourteen threads waited.
struct TileShape {
  int64_t rows, columns;
};
TileShape tile_shape(int64_t m, int64_t n, int64_t k, int threads) {
  TileShape shape{rows_per_tile(n, k), kNc};
  if (threads <= 1) return shape;
  const auto count = [&] {
    return ((m + shape.rows - 1) / shape.rows) * ((n + shape.columns - 1) / shape.columns);
  };
  while (count() < 2 * static_cast<int64_t>(threads)) {
    if (shape.columns > 2 * kNr) {
      shape.columns /= 2;
    } else if (shape.rows > kMc) {
      shape.rows = kMc;
    } else if (shape.rows > kMinTileRows) {
      shape.rows = kMinTileRows;
    } else {
      break;
    }
  }
  return shape;
}

void run_tiles(const MicroKernel& kernel, const TileShape& shape, const float* a, int64_t lda,
               const float* b, int64_t ldb, bool transpose_b, const float* packed, float* c,
               int64_t ldc, int64_t m, int64_t n, int64_t k, bool parallel) {
  const int64_t tile_rows = shape.rows;
  const int64_t row_tiles = (m + tile_rows - 1) / tile_rows;
  const int64_t tile_columns = shape.columns;
  const int64_t column_tiles = (n + tile_columns - 1) / tile_columns;
  const auto tile = [&](int64_t index) {
    const int64_t m0 = (index / column_tiles) * tile_rows;
    const int64_t n0 = (index % column_tiles) * tile_columns;
    run_tile(kernel, a, lda, b, ldb, transpose_b, packed, c, ldc, m0, std::min(m, m0 + tile_rows),
             n0, std::min(n, n0 + tile_columns), n, k);
  };
  if (parallel) {
    parallel_for(row_tiles * column_tiles, tile);
  } else {
    for (int64_t i = 0; i < row_tiles * column_tiles; ++i) tile(i);
  }
}

}  // namespace

void gemm_f32(const float* a, int64_t lda, const float* b, int64_t ldb, bool transpose_b, float* c,
              int64_t ldc, int64_t m, int64_t n, int64_t k, bool parallel) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, 0.0f);
    return;
  }
  const MicroKernel kernel = micro_kernel();
  const TileShape shape = tile_shape(m, n, k, parallel ? cpu_threads() : 1);
  // b packed whole, once, where more than one row tile reuses it: a
  // transposed b (a weight or attention's keys) or a [K, N] b up to
  // kWholePackFloats. A product of few rows (a decode step's attention: one
  // query against 1500 keys, for each of 48 heads and rows) packs each block
  // where it is used instead: the whole copy went to memory and back.
  const bool pack_whole = m > shape.rows && (transpose_b || n * k <= kWholePackFloats);
  const int64_t panels = pack_whole ? (n + kNr - 1) / kNr : 0;
  float* packed = nullptr;
  if (panels > 0) packed = packing_buffer(static_cast<size_t>(panels * k * kNr)).data();
  const auto pack = [&](int64_t i) {
    pack_panel(b, ldb, transpose_b, n, k, i, packed + i * k * kNr);
  };
  if (parallel) {
    parallel_for(panels, pack);
  } else {
    for (int64_t i = 0; i < panels; ++i) pack(i);
  }
  run_tiles(kernel, shape, a, lda, b, ldb, transpose_b, packed, c, ldc, m, n, k, parallel);
}

void gemm_f32_packed_b(const float* a, int64_t lda, const float* packed_b, float* c, int64_t ldc,
                       int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t r = 0; r < m; ++r) std::fill(c + r * ldc, c + r * ldc + n, 0.0f);
    return;
  }
  run_tiles(micro_kernel(), tile_shape(m, n, k, cpu_threads()), a, lda, nullptr, 0, false, packed_b,
            c, ldc, m, n, k, /*parallel=*/true);
}

void linear_f32(const float* x, const float* weight, const float* bias, float* out, int64_t rows,
                int64_t out_features, int64_t in_features) {
  if (rows == 0 || out_features == 0) return;
  gemm_f32(x, in_features, weight, in_features, /*transpose_b=*/true, out, out_features, rows,
           out_features, in_features);
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * out_features;
    for (int64_t j = 0; j < out_features; ++j) row[j] = row[j] + bias[j];
  }
}

void matmul_f32(const float* a, const float* b, float* out, int64_t batch, int64_t m, int64_t n,
                int64_t k, bool transpose_b) {
  if (batch == 0 || m == 0 || n == 0) return;
  const int64_t ldb = transpose_b ? k : n;
  const auto one = [&](int64_t i, bool parallel) {
    gemm_f32(a + i * m * k, k, b + i * k * n, ldb, transpose_b, out + i * m * n, n, m, n, k,
             parallel);
  };
  if (batch == 1) {
    one(0, true);
    return;
  }
  // Attention's (batch, head) slices: one task each, every product whole.
  parallel_for(batch, [&](int64_t i) { one(i, false); });
}

}  // namespace oasr::ops::cpu
