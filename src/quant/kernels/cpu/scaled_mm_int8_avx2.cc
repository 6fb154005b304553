// AVX2 int8 GEMM (see the header for the exactness argument).
//
// Shape of the computation. A is sign-extended into int16 (row-major, rows
// padded to whole tiles of kTileRows), so the micro-kernel broadcasts one
// 32-bit (a[r, 2p], a[r, 2p+1]) pair per row and multiplies it with a weight
// vector holding eight channels' pairs (_mm256_madd_epi16 -> eight int32
// partial dot products). A tile of kTileRows x 16 outputs lives in 12 ymm
// accumulators over the whole K, then the epilogue runs on the registers'
// contents and stores fp32.
//
// Why madd_epi16 and not the u8 x s8 _mm256_maddubs_epi16 that int8
// libraries use on AVX2: maddubs sums two u8*s8 products into a saturating
// int16, and with our signed activations shifted to u8 (a + 128 <= 255) a
// pair reaches 255 * 127 * 2 > 32767, so it can saturate; moving the sign
// onto the other operand (|a| x sign(a) w) costs one more instruction per
// multiply, which is what maddubs saves. madd_epi16 + add_epi32 is exact;
// on the development machine's core (AMD Zen 3: two vector multiply pipes,
// a madd + add mix measured at ~3.2 ops per cycle) that is ~25 int8 MACs per
// cycle against ~32 for maddubs + madd(ones) + add; this micro-kernel
// measures ~22 in L1.
//
// Blocking. A task is a block of kBlockTiles row tiles x kBlockPanels weight
// panels. Inside it the row tile (kTileRows x K int16: 24 KiB at K = 2048)
// stays in L1 while it meets the block's panels, and the panels (up to
// 256 KiB) stay in L2 while the block's row tiles pass. Tasks are handed out
// dynamically, which copes with a loaded, shared machine.
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "core/activations_avx2.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"
#include "quant/kernels/cpu/int8_gemm_x86.h"

namespace oasr::quant {
namespace {

using x86::a_scratch;
using x86::aligned_alloc_array;
using x86::epilogue8;

constexpr int kTileRows = 6;
constexpr int64_t kPanelColumns = PackedInt8Weight::kPanelColumns;
constexpr int64_t kPanelPairStride = kPanelColumns * 2;  // int16 values per K pair in a panel
constexpr int64_t kBlockTiles = 8;                       // at most 48 rows per task
constexpr int64_t kBlockPanels = 4;                      // at most 64 channels per task

// ---- packing -------------------------------------------------------------------

void check_k(int64_t k) {
  OASR_CHECK(k >= 0 && k <= kAvx2MaxK, kUnsupported, "int8 AVX2 GEMM: K = ", k, " exceeds ",
             kAvx2MaxK,
             ", the largest K whose int32 accumulation is exact (|sum| <= K * 128 * 128 < 2^31); "
             "use the cpu_reference lane or split the reduction");
}

// Rows [row_begin, row_end) of A sign-extended to int16, row-major with
// `ld` = 2 * k_pairs values per row (the odd-K pad and the rows past m are
// zero, so the micro-kernel can always run full tiles).
OASR_AVX2_TARGET void pack_a_rows(const int8_t* a, int64_t m, int64_t k, int64_t row_begin,
                                  int64_t row_end, int64_t ld, int16_t* packed) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    int16_t* dst = packed + row * ld;
    if (row >= m) {
      std::fill(dst, dst + ld, int16_t{0});
      continue;
    }
    const int8_t* src = a + row * k;
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), _mm256_cvtepi8_epi16(bytes));
    }
    for (; j < k; ++j) dst[j] = src[j];
    for (; j < ld; ++j) dst[j] = 0;
  }
}

// ---- micro-kernel and epilogue -------------------------------------------------

// acc[r][v] += sum over K pairs of a[r] pair * panel pair, for channels
// 8v..8v+7 of the panel. Exact int32 (header).
struct TileAccumulators {
  __m256i lanes[kTileRows][2];
};

// `a` points at the tile's first row of packed A (int16 pairs read as int32
// words), `lda` words per row.
OASR_AVX2_TARGET void tile_dot(const int32_t* a, int64_t lda, const int16_t* panel, int64_t k_pairs,
                               TileAccumulators& out) {
  const int32_t* a0 = a;
  const int32_t* a1 = a0 + lda;
  const int32_t* a2 = a1 + lda;
  const int32_t* a3 = a2 + lda;
  const int32_t* a4 = a3 + lda;
  const int32_t* a5 = a4 + lda;
  __m256i c00 = _mm256_setzero_si256(), c01 = _mm256_setzero_si256();
  __m256i c10 = _mm256_setzero_si256(), c11 = _mm256_setzero_si256();
  __m256i c20 = _mm256_setzero_si256(), c21 = _mm256_setzero_si256();
  __m256i c30 = _mm256_setzero_si256(), c31 = _mm256_setzero_si256();
  __m256i c40 = _mm256_setzero_si256(), c41 = _mm256_setzero_si256();
  __m256i c50 = _mm256_setzero_si256(), c51 = _mm256_setzero_si256();
  for (int64_t p = 0; p < k_pairs; ++p) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + 16));
    __m256i b = _mm256_set1_epi32(a0[p]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(b, w0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(b, w1));
    b = _mm256_set1_epi32(a1[p]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(b, w0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(b, w1));
    b = _mm256_set1_epi32(a2[p]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(b, w0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(b, w1));
    b = _mm256_set1_epi32(a3[p]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(b, w0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(b, w1));
    b = _mm256_set1_epi32(a4[p]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(b, w0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(b, w1));
    b = _mm256_set1_epi32(a5[p]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(b, w0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(b, w1));
    panel += kPanelPairStride;
  }
  out.lanes[0][0] = c00, out.lanes[0][1] = c01;
  out.lanes[1][0] = c10, out.lanes[1][1] = c11;
  out.lanes[2][0] = c20, out.lanes[2][1] = c21;
  out.lanes[3][0] = c30, out.lanes[3][1] = c31;
  out.lanes[4][0] = c40, out.lanes[4][1] = c41;
  out.lanes[5][0] = c50, out.lanes[5][1] = c51;
}

// Everything the epilogue reads for one panel: w_scale and bias of its 16
// channels (copied and zero-padded for the last, partial panel).
struct PanelEpilogue {
  const float* w_scale;
  const float* bias;  // nullptr: no bias (t + -0 == t, so skipping the add is exact)
  int64_t columns;    // valid channels in this panel, 1..16
};

template <Activation kAct>
OASR_AVX2_TARGET void store_tile(const TileAccumulators& acc, const float* a_scale, int rows,
                                 const PanelEpilogue& panel, float* out, int64_t ldo) {
  for (int r = 0; r < rows; ++r) {
    const __m256 row_scale = _mm256_set1_ps(a_scale[r]);
    float* dst = out + r * ldo;
    for (int v = 0; v < 2; ++v) {
      const int64_t first = 8 * v;
      if (first >= panel.columns) break;
      const __m256 y = epilogue8<kAct>(acc.lanes[r][v], row_scale, panel.w_scale + first,
                                       panel.bias == nullptr ? nullptr : panel.bias + first);
      if (first + 8 <= panel.columns) {
        _mm256_storeu_ps(dst + first, y);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, y);
        std::memcpy(dst + first, lanes, sizeof(float) * (panel.columns - first));
      }
    }
  }
}

struct GemmProblem {
  const int32_t* a_packed;  // A as int16 pairs, k_pairs words per row, rows padded to tiles
  const float* a_scale;
  const PackedInt8Weight* w;
  const float* w_scale;
  const float* bias;
  int64_t m;
  float* out;
  x86::PanelTail<kPanelColumns> tail;  // the last panel's w_scale / bias (no compensation)
};

template <Activation kAct>
OASR_AVX2_TARGET void run_block(const GemmProblem& problem, int64_t tile_begin, int64_t tile_end,
                                int64_t panel_begin, int64_t panel_end) {
  const PackedInt8Weight& w = *problem.w;
  const int64_t k_pairs = w.k_pairs();
  const int64_t n = w.n();
  TileAccumulators acc;
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int32_t* a_tile = problem.a_packed + tile * kTileRows * k_pairs;
    const int64_t row0 = tile * kTileRows;
    const int rows = static_cast<int>(std::min<int64_t>(kTileRows, problem.m - row0));
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      tile_dot(a_tile, k_pairs, w.panel(p), k_pairs, acc);
      const int64_t col0 = p * kPanelColumns;
      PanelEpilogue epilogue;
      epilogue.columns = std::min(kPanelColumns, n - col0);
      if (epilogue.columns == kPanelColumns) {
        epilogue.w_scale = problem.w_scale + col0;
        epilogue.bias = problem.bias == nullptr ? nullptr : problem.bias + col0;
      } else {
        epilogue.w_scale = problem.tail.w_scale;
        epilogue.bias = problem.bias == nullptr ? nullptr : problem.tail.bias;
      }
      store_tile<kAct>(acc, problem.a_scale + row0, rows, epilogue, problem.out + row0 * n + col0,
                       n);
    }
  }
}

using BlockFunction = void (*)(const GemmProblem&, int64_t, int64_t, int64_t, int64_t);

}  // namespace

bool cpu_has_avx2() {
  return cpu_has(CpuIsa::kAvx2);
}

void PackedInt8Weight::AlignedFree::operator()(int16_t* p) const {
  ::operator delete[](p, std::align_val_t(64));
}

PackedInt8Weight pack_int8_weight(const int8_t* w, int64_t n, int64_t k) {
  check_k(k);
  OASR_CHECK(n >= 0, kInvalidArgument, "int8 AVX2 GEMM: negative N = ", n);
  PackedInt8Weight packed;
  packed.n_ = n;
  packed.k_ = k;
  const int64_t values = packed.panel_count() * packed.k_pairs() * kPanelPairStride;
  packed.data_.reset(aligned_alloc_array<int16_t>(std::max<int64_t>(values, 1)));
  int16_t* data = packed.data_.get();
  std::fill(data, data + values, int16_t{0});
  for (int64_t p = 0; p < packed.panel_count(); ++p) {
    int16_t* panel = data + p * packed.k_pairs() * kPanelPairStride;
    const int64_t columns = std::min(kPanelColumns, n - p * kPanelColumns);
    for (int64_t c = 0; c < columns; ++c) {
      const int8_t* row = w + (p * kPanelColumns + c) * k;
      int16_t* dst = panel + c * 2;
      for (int64_t j = 0; j + 1 < k; j += 2, dst += kPanelPairStride) {
        dst[0] = row[j];
        dst[1] = row[j + 1];
      }
      if (k % 2 != 0) dst[0] = row[k - 1];  // its partner stays 0
    }
  }
  return packed;
}

void scaled_mm_int8_avx2(const int8_t* a, const float* a_scale, const PackedInt8Weight& w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         float* out) {
  OASR_CHECK(cpu_has_avx2(), kUnsupported,
             "int8 AVX2 GEMM called on a CPU without AVX2+FMA; choose the cpu_reference lane");
  OASR_CHECK(m >= 0, kInvalidArgument, "int8 AVX2 GEMM: negative M = ", m);
  OASR_CHECK(!w.empty(), kInvalidArgument,
             "int8 AVX2 GEMM: the weight was not packed (call pack_int8_weight at bind)");
  const int64_t n = w.n(), k = w.k(), k_pairs = w.k_pairs();
  if (m == 0 || n == 0) return;

  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  GemmProblem problem;
  problem.a_packed = a_scratch(std::max<int64_t>(tiles * k_pairs * kTileRows, 1));
  problem.a_scale = a_scale;
  problem.w = &w;
  problem.w_scale = w_scale;
  problem.bias = bias;
  problem.m = m;
  problem.out = out;
  problem.tail.fill((w.panel_count() - 1) * kPanelColumns, n, nullptr, w_scale, bias);

  const std::shared_ptr<ops::cpu::WorkerPool> pool = ops::cpu::shared_worker_pool();
  int16_t* a_packed = reinterpret_cast<int16_t*>(const_cast<int32_t*>(problem.a_packed));
  // Sign-extending A is one cheap pass (split over the threads only when
  // large enough to repay waking them).
  x86::pack_a_tiles(tiles * kTileRows, kTileRows, k, *pool, [&](int64_t begin, int64_t end) {
    pack_a_rows(a, m, k, begin, end, 2 * k_pairs, a_packed);
  });

  const BlockFunction block = x86::with_activation(
      act, "int8 AVX2 GEMM", [](auto a) { return BlockFunction{run_block<decltype(a)::value>}; });
  x86::run_task_grid(
      *pool, tiles, kBlockTiles, w.panel_count(), kBlockPanels,
      [&](int64_t tile_begin, int64_t tile_end, int64_t panel_begin, int64_t panel_end) {
        block(problem, tile_begin, tile_end, panel_begin, panel_end);
      });
}

void scaled_mm_int8_avx2(const int8_t* a, const float* a_scale, const int8_t* w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         int64_t n, int64_t k, float* out) {
  const PackedInt8Weight packed = pack_int8_weight(w, n, k);
  scaled_mm_int8_avx2(a, a_scale, packed, w_scale, bias, act, m, out);
}

}  // namespace oasr::quant
