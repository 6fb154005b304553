// AVX-VNNI int8 GEMM (see the header for the exactness argument).
//
// The AVX-512 VNNI kernel's shape at half the width, within sixteen ymm
// registers: a tile is 6 rows x 16 channels (half a 32-channel panel), 12
// accumulators of 8 int32 lanes, two 32-byte weight vectors a K group and
// one broadcast of a row's four bytes. The epilogue subtracts the channel's
// compensation (exact int32) and runs the AVX2 epilogue on each 8-lane
// vector, so the float operations are the scalar epilogue's, in its order.
//
// Blocking: a task is kBlockTiles row tiles x one panel; the tiles' packed
// rows stay in L1 while they meet the panel's two halves.
#include "quant/kernels/cpu/scaled_mm_int8_avx_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/activations_avx2.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"
#include "quant/kernels/cpu/int8_gemm_x86.h"

#define OASR_AVX_VNNI_TARGET __attribute__((target("avxvnni,avx2,fma,f16c")))

namespace oasr::quant {
namespace {

using x86::a_scratch;
using x86::epilogue8;
using x86::pack_a_rows_u8;

constexpr int kTileRows = 6;
constexpr int kTileColumns = 16;  // half a panel
constexpr int64_t kPanelColumns = PackedInt8WeightVnni::kPanelColumns;
constexpr int64_t kPanelQuadBytes = kPanelColumns * 4;  // bytes per K group in a panel
constexpr int64_t kBlockTiles = 8;                      // at most 48 rows per task

struct TileAccumulators {
  __m256i lanes[kTileRows][2];
};

// `a` points at the tile's first packed row, read as int32 words (four
// bytes of one K group), `lda` words per row; `half` (0 or 1) picks the
// panel's channels 16 * half .. + 15.
OASR_AVX_VNNI_TARGET void tile_dot(const int32_t* a, int64_t lda, const int8_t* panel, int half,
                                   int64_t k_quads, TileAccumulators& out) {
  __m256i c[kTileRows][2];
#pragma GCC unroll 6
  for (int r = 0; r < kTileRows; ++r) c[r][0] = c[r][1] = _mm256_setzero_si256();
  const int8_t* w = panel + 64 * half;
  for (int64_t q = 0; q < k_quads; ++q) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w));
    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 32));
#pragma GCC unroll 6
    for (int r = 0; r < kTileRows; ++r) {
      const __m256i b = _mm256_set1_epi32(a[r * lda + q]);
      c[r][0] = _mm256_dpbusd_avx_epi32(c[r][0], b, w0);
      c[r][1] = _mm256_dpbusd_avx_epi32(c[r][1], b, w1);
    }
    w += kPanelQuadBytes;
  }
#pragma GCC unroll 6
  for (int r = 0; r < kTileRows; ++r) {
    out.lanes[r][0] = c[r][0];
    out.lanes[r][1] = c[r][1];
  }
}

// One tile's epilogue operands: its 16 channels' compensation, w_scale and
// bias (from the zero-padded copies for the last, partial panel).
struct TileEpilogue {
  const int32_t* compensation;
  const float* w_scale;
  const float* bias;  // nullptr: no bias (t + -0 == t, so skipping the add is exact)
  int64_t columns;    // valid channels in this tile, 1..16
};

template <Activation kAct>
OASR_AVX_VNNI_TARGET void store_tile(const TileAccumulators& acc, const float* a_scale, int rows,
                                     const TileEpilogue& tile, float* out, int64_t ldo) {
  for (int r = 0; r < rows; ++r) {
    const __m256 row_scale = _mm256_set1_ps(a_scale[r]);
    float* dst = out + r * ldo;
    for (int v = 0; v < 2; ++v) {
      const int64_t first = 8 * v;
      if (first >= tile.columns) break;
      const __m256i exact = _mm256_sub_epi32(
          acc.lanes[r][v],
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.compensation + first)));
      const __m256 y = epilogue8<kAct>(exact, row_scale, tile.w_scale + first,
                                       tile.bias == nullptr ? nullptr : tile.bias + first);
      if (first + 8 <= tile.columns) {
        _mm256_storeu_ps(dst + first, y);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, y);
        std::memcpy(dst + first, lanes, sizeof(float) * (tile.columns - first));
      }
    }
  }
}

struct GemmProblem {
  const int32_t* a_packed;  // A as u8, k_quads words per row, rows padded to tiles
  const float* a_scale;
  const PackedInt8WeightVnni* w;
  const float* w_scale;
  const float* bias;
  int64_t m;
  float* out;
  x86::PanelTail<kPanelColumns> tail;  // the last panel's operands
};

template <Activation kAct>
OASR_AVX_VNNI_TARGET void run_block(const GemmProblem& problem, int64_t tile_begin,
                                    int64_t tile_end, int64_t p) {
  const PackedInt8WeightVnni& w = *problem.w;
  const int64_t k_quads = w.k_quads();
  const int64_t n = w.n();
  const int64_t panel_col0 = p * kPanelColumns;
  const bool tail = panel_col0 + kPanelColumns > n;
  TileAccumulators acc;
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int32_t* a_tile = problem.a_packed + tile * kTileRows * k_quads;
    const int64_t row0 = tile * kTileRows;
    const int rows = static_cast<int>(std::min<int64_t>(kTileRows, problem.m - row0));
    for (int half = 0; half < 2; ++half) {
      const int64_t col0 = panel_col0 + kTileColumns * half;
      if (col0 >= n) break;
      tile_dot(a_tile, k_quads, w.panel(p), half, k_quads, acc);
      TileEpilogue epilogue;
      epilogue.columns = std::min<int64_t>(kTileColumns, n - col0);
      const int64_t in_panel = kTileColumns * half;
      if (!tail) {
        epilogue.compensation = w.compensation() + col0;
        epilogue.w_scale = problem.w_scale + col0;
        epilogue.bias = problem.bias == nullptr ? nullptr : problem.bias + col0;
      } else {
        epilogue.compensation = problem.tail.compensation + in_panel;
        epilogue.w_scale = problem.tail.w_scale + in_panel;
        epilogue.bias = problem.bias == nullptr ? nullptr : problem.tail.bias + in_panel;
      }
      store_tile<kAct>(acc, problem.a_scale + row0, rows, epilogue, problem.out + row0 * n + col0,
                       n);
    }
  }
}

using BlockFunction = void (*)(const GemmProblem&, int64_t, int64_t, int64_t);

}  // namespace

bool cpu_has_avx_vnni() {
  return cpu_has(CpuIsa::kAvxVnni) && cpu_reports_avx_vnni();
}

void scaled_mm_int8_avx_vnni(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                             const float* w_scale, const float* bias, Activation act, int64_t m,
                             float* out) {
  OASR_CHECK(cpu_has_avx_vnni(), kUnsupported,
             "int8 AVX-VNNI GEMM called where the dispatch level or the CPU lacks AVX-VNNI; "
             "choose the cpu_avx2_int8 or cpu_reference lane");
  OASR_CHECK(m >= 0, kInvalidArgument, "int8 AVX-VNNI GEMM: negative M = ", m);
  if (w.avx2_fallback() != nullptr) {
    scaled_mm_int8_avx2(a, a_scale, *w.avx2_fallback(), w_scale, bias, act, m, out);
    return;
  }
  const int64_t n = w.n(), k = w.k(), k_quads = w.k_quads();
  if (m == 0 || n == 0) return;

  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  GemmProblem problem;
  problem.a_packed = a_scratch(tiles * kTileRows * k_quads);
  problem.a_scale = a_scale;
  problem.w = &w;
  problem.w_scale = w_scale;
  problem.bias = bias;
  problem.m = m;
  problem.out = out;
  problem.tail.fill((w.panel_count() - 1) * kPanelColumns, n, w.compensation(), w_scale, bias);

  const std::shared_ptr<ops::cpu::WorkerPool> pool = ops::cpu::shared_worker_pool();
  auto* a_packed = reinterpret_cast<uint8_t*>(const_cast<int32_t*>(problem.a_packed));
  x86::pack_a_tiles(tiles * kTileRows, kTileRows, k, *pool, [&](int64_t begin, int64_t end) {
    pack_a_rows_u8(a, m, k, begin, end, 4 * k_quads, a_packed);
  });

  const BlockFunction block = x86::with_activation(act, "int8 AVX-VNNI GEMM", [](auto a) {
    return BlockFunction{run_block<decltype(a)::value>};
  });
  // At most one panel a task (the blocking above).
  x86::run_task_grid(*pool, tiles, kBlockTiles, w.panel_count(), 1,
                     [&](int64_t tile_begin, int64_t tile_end, int64_t panel, int64_t) {
                       block(problem, tile_begin, tile_end, panel);
                     });
}

void scaled_mm_int8_avx_vnni(const int8_t* a, const float* a_scale, const int8_t* w,
                             const float* w_scale, const float* bias, Activation act, int64_t m,
                             int64_t n, int64_t k, float* out) {
  const PackedInt8WeightVnni packed = pack_int8_weight_vnni(w, n, k);
  scaled_mm_int8_avx_vnni(a, a_scale, packed, w_scale, bias, act, m, out);
}

}  // namespace oasr::quant
