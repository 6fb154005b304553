// AVX-512 VNNI int8 GEMM (see the header for the exactness argument).
//
// Shape of the computation. A is stored as u8 (a + 128, i.e. a XOR 0x80),
// rows padded to whole tiles of kTileRows and to whole groups of four K.
// The micro-kernel broadcasts one row's four bytes of a K group and meets
// them with two 64-byte weight vectors (32 channels x 4 bytes) through
// vpdpbusd: 16 accumulators of 16 int32 lanes for an 8 x 32 tile, over the
// whole K. The epilogue subtracts the channel's compensation (exact int32),
// then runs x86::epilogue16 on each 16-lane vector, so the float operations
// are the same IEEE-rounded ones in the same order as the scalar
// int8_epilogue.
//
// Blocking, as in the AVX2 kernel: a task is kBlockTiles row tiles x
// kBlockPanels panels; the row tile stays in L1 while it meets the block's
// panels and the panels stay in L2 while the block's row tiles pass.
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "core/activations_avx2.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"
#include "quant/kernels/cpu/int8_gemm_x86.h"

#define OASR_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace oasr::quant {
namespace {

using x86::a_scratch;
using x86::aligned_alloc_array;
using x86::epilogue16;
using x86::pack_a_rows_u8;

constexpr int kTileRows = 8;
constexpr int64_t kPanelColumns = PackedInt8WeightVnni::kPanelColumns;
constexpr int64_t kPanelQuadBytes = kPanelColumns * 4;  // bytes per K group in a panel
constexpr int64_t kBlockTiles = 6;                      // at most 48 rows per task
constexpr int64_t kBlockPanels = 2;                     // at most 64 channels per task

struct TileAccumulators {
  __m512i lanes[kTileRows][2];
};

// `a` points at the tile's first packed row, read as int32 words (four
// bytes of one K group), `lda` words per row.
OASR_VNNI_TARGET void tile_dot(const int32_t* a, int64_t lda, const int8_t* panel, int64_t k_quads,
                               TileAccumulators& out) {
  __m512i c[kTileRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kTileRows; ++r) c[r][0] = c[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < k_quads; ++q) {
    const __m512i w0 = _mm512_load_si512(panel);
    const __m512i w1 = _mm512_load_si512(panel + 64);
#pragma GCC unroll 8
    for (int r = 0; r < kTileRows; ++r) {
      const __m512i b = _mm512_set1_epi32(a[r * lda + q]);
      c[r][0] = _mm512_dpbusd_epi32(c[r][0], b, w0);
      c[r][1] = _mm512_dpbusd_epi32(c[r][1], b, w1);
    }
    panel += kPanelQuadBytes;
  }
#pragma GCC unroll 8
  for (int r = 0; r < kTileRows; ++r) {
    out.lanes[r][0] = c[r][0];
    out.lanes[r][1] = c[r][1];
  }
}

// One panel's epilogue operands: 32 channels' compensation, w_scale and
// bias (copied and zero-padded for the last, partial panel).
struct PanelEpilogue {
  const int32_t* compensation;
  const float* w_scale;
  const float* bias;  // nullptr: no bias (t + -0 == t, so skipping the add is exact)
  int64_t columns;    // valid channels in this panel, 1..32
};

template <Activation kAct>
OASR_VNNI_TARGET void store_tile(const TileAccumulators& acc, const float* a_scale, int rows,
                                 const PanelEpilogue& panel, float* out, int64_t ldo) {
  for (int r = 0; r < rows; ++r) {
    const __m512 row_scale = _mm512_set1_ps(a_scale[r]);
    float* dst = out + r * ldo;
    for (int v = 0; v < 2; ++v) {
      const int64_t first = 16 * v;
      if (first >= panel.columns) break;
      const __m512i exact =
          _mm512_sub_epi32(acc.lanes[r][v], _mm512_loadu_si512(panel.compensation + first));
      const __m512 y = epilogue16<kAct>(exact, row_scale, panel.w_scale + first,
                                        panel.bias == nullptr ? nullptr : panel.bias + first);
      const int64_t valid = std::min<int64_t>(16, panel.columns - first);
      _mm512_mask_storeu_ps(dst + first, static_cast<__mmask16>((1u << valid) - 1), y);
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
OASR_VNNI_TARGET void run_block(const GemmProblem& problem, int64_t tile_begin, int64_t tile_end,
                                int64_t panel_begin, int64_t panel_end) {
  const PackedInt8WeightVnni& w = *problem.w;
  const int64_t k_quads = w.k_quads();
  const int64_t n = w.n();
  TileAccumulators acc;
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int32_t* a_tile = problem.a_packed + tile * kTileRows * k_quads;
    const int64_t row0 = tile * kTileRows;
    const int rows = static_cast<int>(std::min<int64_t>(kTileRows, problem.m - row0));
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      tile_dot(a_tile, k_quads, w.panel(p), k_quads, acc);
      const int64_t col0 = p * kPanelColumns;
      PanelEpilogue epilogue;
      epilogue.columns = std::min(kPanelColumns, n - col0);
      if (epilogue.columns == kPanelColumns) {
        epilogue.compensation = w.compensation() + col0;
        epilogue.w_scale = problem.w_scale + col0;
        epilogue.bias = problem.bias == nullptr ? nullptr : problem.bias + col0;
      } else {
        epilogue.compensation = problem.tail.compensation;
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

bool cpu_has_avx512_vnni() {
  return cpu_has(CpuIsa::kAvx512Vnni);
}

void PackedInt8WeightVnni::AlignedFree::operator()(void* p) const {
  ::operator delete[](p, std::align_val_t(64));
}

PackedInt8WeightVnni pack_int8_weight_vnni(const int8_t* w, int64_t n, int64_t k,
                                           int64_t k_quad_multiple) {
  OASR_CHECK(n >= 0 && k >= 0, kInvalidArgument, "int8 VNNI GEMM: negative N = ", n, " or K = ", k);
  OASR_CHECK(k_quad_multiple >= 1, kInvalidArgument,
             "int8 VNNI GEMM: the K-group multiple must be >= 1, got ", k_quad_multiple);
  PackedInt8WeightVnni packed;
  packed.n_ = n;
  packed.k_ = k;
  packed.k_quads_ = ((k + 3) / 4 + k_quad_multiple - 1) / k_quad_multiple * k_quad_multiple;
  if (k > kVnniMaxK) {  // exact only in the AVX2 kernel's wider bound
    packed.avx2_ = std::make_unique<PackedInt8Weight>(pack_int8_weight(w, n, k));
    return packed;
  }
  const int64_t bytes = packed.panel_count() * packed.k_quads() * kPanelQuadBytes;
  packed.data_.reset(aligned_alloc_array<int8_t>(bytes));
  std::memset(packed.data_.get(), 0, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  const int64_t padded_n = packed.panel_count() * kPanelColumns;
  packed.compensation_.reset(aligned_alloc_array<int32_t>(padded_n));
  std::fill(packed.compensation_.get(), packed.compensation_.get() + std::max<int64_t>(padded_n, 1),
            0);
  for (int64_t channel = 0; channel < n; ++channel) {
    const int8_t* row = w + channel * k;
    int8_t* panel =
        packed.data_.get() + (channel / kPanelColumns) * packed.k_quads() * kPanelQuadBytes;
    const int64_t column = channel % kPanelColumns;
    int32_t sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      panel[(j / 4) * kPanelQuadBytes + column * 4 + (j % 4)] = row[j];
      sum += row[j];
    }
    packed.compensation_[channel] = 128 * sum;
  }
  return packed;
}

void scaled_mm_int8_vnni(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         float* out) {
  OASR_CHECK(cpu_has_avx512_vnni(), kUnsupported,
             "int8 VNNI GEMM called where the dispatch level lacks AVX-512 VNNI; choose the "
             "cpu_avx2_int8 or cpu_reference lane");
  OASR_CHECK(m >= 0, kInvalidArgument, "int8 VNNI GEMM: negative M = ", m);
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

  const BlockFunction block = x86::with_activation(
      act, "int8 VNNI GEMM", [](auto a) { return BlockFunction{run_block<decltype(a)::value>}; });
  x86::run_task_grid(
      *pool, tiles, kBlockTiles, w.panel_count(), kBlockPanels,
      [&](int64_t tile_begin, int64_t tile_end, int64_t panel_begin, int64_t panel_end) {
        block(problem, tile_begin, tile_end, panel_begin, panel_end);
      });
}

void scaled_mm_int8_vnni(const int8_t* a, const float* a_scale, const int8_t* w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         int64_t n, int64_t k, float* out) {
  const PackedInt8WeightVnni packed = pack_int8_weight_vnni(w, n, k);
  scaled_mm_int8_vnni(a, a_scale, packed, w_scale, bias, act, m, out);
}

}  // namespace oasr::quant
