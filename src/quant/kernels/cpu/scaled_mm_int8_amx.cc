// AMX int8 GEMM (see the header for the exactness argument and the packing).
//
// Shape of the computation. A is copied as it is (signed bytes), rows
// padded with zeros to whole blocks of kBlockRows and to whole tiles of K.
// The micro-kernel keeps a 32 x 32 int32 block in four accumulator tiles
// (tmm0-3) and walks K one tile at a time: two A tiles (rows 0-15 and
// 16-31, tmm4-5), two B tiles (channels 0-15 and 16-31 of the panel,
// tmm6-7), four tdpbssd. The tiles are then stored to a 32 x 32 buffer and
// the AVX2 epilogue of scaled_mm_int8_avx2 runs on each 8-lane piece, so the
// float operations are the scalar int8_epilogue's, in its order.
//
// A task is at most kTaskBlocks row blocks x kTaskPanels panels (fewer
// where the product would have under two tasks a thread): the row block's
// A (32 x K) stays in L1/L2 while it meets the task's panels. Each task
// loads the tile configuration on its thread and releases the tiles at the
// end (the configuration is per thread; releasing keeps the kernel from
// saving 8 KB of tile data at every context switch of a worker).
#include "quant/kernels/cpu/scaled_mm_int8_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/activations_avx2.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu/worker_pool.h"
#include "quant/kernels/cpu/int8_gemm_x86.h"

#define OASR_AMX_TARGET                                                         \
  __attribute__((                                                               \
      target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma," \
             "f16c")))

namespace oasr::quant {
namespace {

using x86::a_scratch;
using x86::epilogue8;

constexpr int64_t kTileRows = 16;                                       // rows of an A or C tile
constexpr int64_t kTileBytes = 64;                                      // bytes of a tile row
constexpr int64_t kBlockRows = 2 * kTileRows;                           // a micro-kernel's rows
constexpr int64_t kPanelColumns = PackedInt8WeightVnni::kPanelColumns;  // 32
constexpr int64_t kPanelQuadBytes = kPanelColumns * 4;                  // a B tile's row stride
constexpr int64_t kTaskBlocks = 2;                                      // rows per task: at most 64
constexpr int64_t kTaskPanels = 4;  // channels per task: at most 128
static_assert(kPanelColumns == 2 * kTileRows, "a panel is two B tiles of 16 channels");

// The palette-1 tile configuration (Intel SDM, LDTILECFG): every tile used
// here is 16 rows of 64 bytes. One constant object in read-only data: the
// compiler sees ldtilecfg read only the first bytes of its operand, so a
// configuration built on the stack could lose its later fields' stores.
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64 && offsetof(TileConfig, colsb) == 16 &&
                  offsetof(TileConfig, rows) == 48,
              "LDTILECFG's 64-byte layout");
constexpr TileConfig kFullTiles = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
static_assert(kTileBytes == 64 && kTileRows == 16, "kFullTiles spells these out");

struct GemmProblem {
  const int8_t* a_packed;  // A as s8, lda bytes per row, rows padded to blocks
  int64_t lda;
  const float* a_scale;
  const PackedInt8WeightVnni* w;
  const float* w_scale;
  const float* bias;
  int64_t m;
  float* out;
  x86::PanelTail<kPanelColumns> tail;  // the last panel's operands
};

// The 32 x 32 block at (a_block, panel) into acc; `upper_only` when the
// block's rows 16-31 are all padding.
OASR_AMX_TARGET void block_dot(const int8_t* a_block, int64_t lda, const int8_t* panel,
                               int64_t k_tiles, bool upper_only, int32_t (*acc)[kPanelColumns]) {
  constexpr int64_t kAccStride = kPanelColumns * sizeof(int32_t);
  constexpr int64_t kPanelTileBytes = kAmxQuadsPerTile * kPanelQuadBytes;
  _tile_zero(0);
  _tile_zero(1);
  if (upper_only) {
    for (int64_t t = 0; t < k_tiles; ++t) {
      _tile_loadd(4, a_block + t * kTileBytes, lda);
      _tile_loadd(6, panel + t * kPanelTileBytes, kPanelQuadBytes);
      _tile_loadd(7, panel + t * kPanelTileBytes + kTileBytes, kPanelQuadBytes);
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
    }
    _tile_stored(0, &acc[0][0], kAccStride);
    _tile_stored(1, &acc[0][kTileRows], kAccStride);
    return;
  }
  _tile_zero(2);
  _tile_zero(3);
  const int8_t* a_lower = a_block + kTileRows * lda;
  for (int64_t t = 0; t < k_tiles; ++t) {
    _tile_loadd(4, a_block + t * kTileBytes, lda);
    _tile_loadd(5, a_lower + t * kTileBytes, lda);
    _tile_loadd(6, panel + t * kPanelTileBytes, kPanelQuadBytes);
    _tile_loadd(7, panel + t * kPanelTileBytes + kTileBytes, kPanelQuadBytes);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  _tile_stored(0, &acc[0][0], kAccStride);
  _tile_stored(1, &acc[0][kTileRows], kAccStride);
  _tile_stored(2, &acc[kTileRows][0], kAccStride);
  _tile_stored(3, &acc[kTileRows][kTileRows], kAccStride);
}

// §3's epilogue on rows x columns of acc, eight channels at a time.
template <Activation kAct>
OASR_AMX_TARGET void store_block(const int32_t (*acc)[kPanelColumns], const float* a_scale,
                                 int64_t rows, int64_t columns, const float* w_scale,
                                 const float* bias, float* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    const __m256 row_scale = _mm256_set1_ps(a_scale[r]);
    float* dst = out + r * ldo;
    for (int64_t first = 0; first < columns; first += 8) {
      const __m256i exact = _mm256_load_si256(reinterpret_cast<const __m256i*>(&acc[r][first]));
      const __m256 y = epilogue8<kAct>(exact, row_scale, w_scale + first,
                                       bias == nullptr ? nullptr : bias + first);
      if (first + 8 <= columns) {
        _mm256_storeu_ps(dst + first, y);
      } else {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, y);
        std::memcpy(dst + first, lanes, sizeof(float) * (columns - first));
      }
    }
  }
}

template <Activation kAct>
OASR_AMX_TARGET void run_task(const GemmProblem& problem, int64_t block_begin, int64_t block_end,
                              int64_t panel_begin, int64_t panel_end) {
  const PackedInt8WeightVnni& w = *problem.w;
  const int64_t n = w.n();
  const int64_t k_tiles = w.k_quads() / kAmxQuadsPerTile;
  _tile_loadconfig(&kFullTiles);
  alignas(64) int32_t acc[kBlockRows][kPanelColumns];
  for (int64_t block = block_begin; block < block_end; ++block) {
    const int64_t row0 = block * kBlockRows;
    const int64_t rows = std::min(kBlockRows, problem.m - row0);
    const int8_t* a_block = problem.a_packed + row0 * problem.lda;
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      block_dot(a_block, problem.lda, w.panel(p), k_tiles, rows <= kTileRows, acc);
      const int64_t col0 = p * kPanelColumns;
      const int64_t columns = std::min(kPanelColumns, n - col0);
      const bool full = columns == kPanelColumns;
      const float* w_scale = full ? problem.w_scale + col0 : problem.tail.w_scale;
      const float* bias = problem.bias == nullptr ? nullptr
                          : full                  ? problem.bias + col0
                                                  : problem.tail.bias;
      store_block<kAct>(acc, problem.a_scale + row0, rows, columns, w_scale, bias,
                        problem.out + row0 * n + col0, n);
    }
  }
  _tile_release();
}

using TaskFunction = void (*)(const GemmProblem&, int64_t, int64_t, int64_t, int64_t);

// Rows [row_begin, row_end) of A into `packed` (ld bytes a row), the K pad
// and the rows past m zero.
void pack_a_rows_s8(const int8_t* a, int64_t m, int64_t k, int64_t row_begin, int64_t row_end,
                    int64_t ld, int8_t* packed) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    int8_t* dst = packed + row * ld;
    const int64_t copied = row < m ? k : 0;
    if (copied > 0) std::memcpy(dst, a + row * k, static_cast<size_t>(copied));
    std::memset(dst + copied, 0, static_cast<size_t>(ld - copied));
  }
}

}  // namespace

bool cpu_has_amx_int8() {
  return cpu_has(CpuIsa::kAmxInt8);
}

PackedInt8WeightVnni pack_int8_weight_amx(const int8_t* w, int64_t n, int64_t k) {
  return pack_int8_weight_vnni(w, n, k, kAmxQuadsPerTile);
}

void scaled_mm_int8_amx(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                        const float* w_scale, const float* bias, Activation act, int64_t m,
                        float* out) {
  OASR_CHECK(cpu_has_amx_int8(), kUnsupported,
             "int8 AMX GEMM called where the dispatch level lacks AMX-INT8; choose the "
             "cpu_avx512_vnni_int8, cpu_avx2_int8 or cpu_reference lane");
  OASR_CHECK(m >= 0, kInvalidArgument, "int8 AMX GEMM: negative M = ", m);
  OASR_CHECK(w.avx2_fallback() != nullptr || w.k_quads() % kAmxQuadsPerTile == 0, kInvalidArgument,
             "int8 AMX GEMM: the weight was packed for the VNNI lane (K groups not padded to ",
             kAmxQuadsPerTile, "); pack it with pack_int8_weight_amx");
  // Few rows, or K past the exact bound (the AVX2 packing): the VNNI kernel
  // on the same packing gives the same bits.
  if (m < kAmxMinRows || w.avx2_fallback() != nullptr) {
    scaled_mm_int8_vnni(a, a_scale, w, w_scale, bias, act, m, out);
    return;
  }
  const int64_t n = w.n(), k = w.k();
  if (n == 0) return;

  const int64_t blocks = (m + kBlockRows - 1) / kBlockRows;
  GemmProblem problem;
  problem.lda = kTileBytes * (w.k_quads() / kAmxQuadsPerTile);
  auto* a_packed = reinterpret_cast<int8_t*>(a_scratch(blocks * kBlockRows * problem.lda / 4));
  problem.a_packed = a_packed;
  problem.a_scale = a_scale;
  problem.w = &w;
  problem.w_scale = w_scale;
  problem.bias = bias;
  problem.m = m;
  problem.out = out;
  problem.tail.fill((w.panel_count() - 1) * kPanelColumns, n, nullptr, w_scale, bias);

  const std::shared_ptr<ops::cpu::WorkerPool> pool = ops::cpu::shared_worker_pool();
  x86::pack_a_tiles(blocks * kBlockRows, kBlockRows, k, *pool, [&](int64_t begin, int64_t end) {
    pack_a_rows_s8(a, m, k, begin, end, problem.lda, a_packed);
  });

  const TaskFunction task_fn = x86::with_activation(
      act, "int8 AMX GEMM", [](auto a) { return TaskFunction{run_task<decltype(a)::value>}; });
  x86::run_task_grid(
      *pool, blocks, kTaskBlocks, w.panel_count(), kTaskPanels,
      [&](int64_t block_begin, int64_t block_end, int64_t panel_begin, int64_t panel_end) {
        task_fn(problem, block_begin, block_end, panel_begin, panel_end);
      });
}

void scaled_mm_int8_amx(const int8_t* a, const float* a_scale, const int8_t* w,
                        const float* w_scale, const float* bias, Activation act, int64_t m,
                        int64_t n, int64_t k, float* out) {
  const PackedInt8WeightVnni packed = pack_int8_weight_amx(w, n, k);
  scaled_mm_int8_amx(a, a_scale, packed, w_scale, bias, act, m, out);
}

}  // namespace oasr::quant
