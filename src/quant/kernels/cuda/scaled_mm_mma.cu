// The mma.sync scaled GEMMs (scaled_mm_cuda.h): out[M, N] = epilogue(A W^T)
// with A [M, K] and W [N, K] 8-bit, row-major. One CTA computes a
// BLOCK_M x BLOCK_N tile; WARPS_M x WARPS_N warps each own a sub-tile of
// 16x8 mma fragments. K advances BLOCK_K bytes per stage through a
// STAGES-deep cp.async ring in shared memory; fragments come from shared
// memory by ldmatrix (W's [N, K] rows are exactly the "col" B operand, so no
// transposed load is needed). The epilogue (scaled_mm_epilogue.cuh) is
// staged through shared memory per warp (scaled_mm_store.cuh) so each lane
// finishes four consecutive outputs of a row and the stores coalesce.
//
// Tails: rows past M, columns past N and K chunks past K are zero-filled in
// shared memory (cp.async with a zero source size); a zero contributes
// exactly 0 to an int32 sum. k32 steps lying wholly past K are skipped.
//
// e4m3 determinism: every k32 mma starts from a zero C and its result is
// added (__fadd_rn) to the fp32 register accumulator in K order, so each
// output's sum is the same sequence of adds for every tile and batch.
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"
#include "quant/kernels/cuda/scaled_mm_store.cuh"

namespace oasr::quant::cuda {
namespace {

using detail::EpilogueParams;

// ---- PTX wrappers -------------------------------------------------------------

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16-byte async copy; src_bytes == 0 writes 16 zero bytes (the tails).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// D = A B + D, exact int32.
__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                       int32_t (&d)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// acc += (A B from a zero C), each of the four adds rounded on its own.
__device__ __forceinline__ void mma_e4m3_add(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                             float (&acc)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  float d[4];
  const float zero = 0.0f;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %10, %10, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(zero));
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = __fadd_rn(acc[i], d[i]);
#else
  // Not compiled for this architecture: the host refuses fp8 below sm_89
  // (mma_sync_supported), so this is never launched.
  (void)a;
  (void)b0;
  (void)b1;
  (void)acc;
  __trap();
#endif
}

// ---- the kernel ---------------------------------------------------------------

// Shared-memory tile of `rows` x kBlockK bytes, 16-byte chunks XOR-swizzled so
// the 8 rows an ldmatrix reads at one logical chunk (and the cp.async stores)
// hit 8 different 16-byte bank groups: rows of kChunks chunks share a 128-byte
// line kRowsPerLine at a time, and the line index picks the XOR.
template <int kBlockK>
struct SwizzledTile {
  static constexpr int kChunks = kBlockK / 16;
  static constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  static constexpr int kXorMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  __device__ __forceinline__ static int offset(int row, int chunk) {
    const int physical = chunk ^ ((row / kRowsPerLine) & kXorMask);
    return row * kBlockK + physical * 16;
  }
};

template <int kBlockM, int kBlockN, int kBlockK, int kWarpsM, int kWarpsN, int kStages>
struct TileShape {
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kWarpM = kBlockM / kWarpsM;
  static constexpr int kWarpN = kBlockN / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16;
  static constexpr int kFragsN = kWarpN / 8;
  static constexpr int kSharedBytes = kStages * (kBlockM + kBlockN) * kBlockK;
  static_assert(kBlockM % kWarpsM == 0 && kBlockN % kWarpsN == 0, "warps divide the tile");
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "warp tile: multiples of 16x16");
  static_assert(kBlockK == 32 || kBlockK == 64 || kBlockK == 128, "BLOCK_K: 32, 64 or 128");
  static_assert(kStages >= 2, "need at least two stages");
};

// Copies rows [row0, row0 + kRows) x bytes [k0, k0 + kBlockK) of a row-major
// [rows, k] operand into a swizzled tile, zero-filling what lies outside.
template <int kRows, int kBlockK, int kThreads>
__device__ __forceinline__ void load_tile(uint32_t tile, const uint8_t* operand, int64_t rows,
                                          int64_t k, int64_t row0, int64_t k0) {
  constexpr int kChunks = kBlockK / 16;
#pragma unroll
  for (int index = static_cast<int>(threadIdx.x); index < kRows * kChunks; index += kThreads) {
    const int row = index / kChunks;
    const int chunk = index % kChunks;
    const int64_t global_row = row0 + row;
    const int64_t global_k = k0 + chunk * 16;
    const bool valid = global_row < rows && global_k < k;  // k % 16 == 0: whole chunks
    const uint8_t* source = valid ? operand + global_row * k + global_k : operand;
    cp_async_16(tile + SwizzledTile<kBlockK>::offset(row, chunk), source, valid);
  }
}

template <bool kFp8, int kBlockM, int kBlockN, int kBlockK, int kWarpsM, int kWarpsN, int kStages>
__global__ void __launch_bounds__(kWarpsM* kWarpsN * 32)
    scaled_mm_mma_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ w, int64_t k,
                         EpilogueParams epilogue) {
  using Shape = TileShape<kBlockM, kBlockN, kBlockK, kWarpsM, kWarpsN, kStages>;
  using Tile = SwizzledTile<kBlockK>;
  using Acc = typename std::conditional<kFp8, float, int32_t>::type;
  constexpr int kThreads = Shape::kThreads;
  constexpr int kFragsM = Shape::kFragsM;
  constexpr int kFragsN = Shape::kFragsN;

  extern __shared__ __align__(128) uint8_t shared[];
  const int64_t m = epilogue.m;
  const int64_t n = epilogue.n;
  const int64_t block_m0 = static_cast<int64_t>(blockIdx.x) * kBlockM;
  const int64_t block_n0 = static_cast<int64_t>(blockIdx.y) * kBlockN;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warp_m0 = (warp / kWarpsN) * Shape::kWarpM;
  const int warp_n0 = (warp % kWarpsN) * Shape::kWarpN;
  const uint32_t shared_base = shared_address(shared);
  auto a_tile = [&](int stage) -> uint32_t {
    return shared_base + stage * (kBlockM + kBlockN) * kBlockK;
  };
  auto w_tile = [&](int stage) -> uint32_t { return a_tile(stage) + kBlockM * kBlockK; };
  auto load_stage = [&](int stage, int64_t k_tile) {
    const int64_t k0 = k_tile * kBlockK;
    load_tile<kBlockM, kBlockK, kThreads>(a_tile(stage), a, m, k, block_m0, k0);
    load_tile<kBlockN, kBlockK, kThreads>(w_tile(stage), w, n, k, block_n0, k0);
  };

  Acc acc[kFragsM][kFragsN][4];
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = Acc(0);
    }
  }

  const int64_t k_tiles = (k + kBlockK - 1) / kBlockK;
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < k_tiles) load_stage(stage, stage);
    cp_async_commit();  // an empty group keeps the wait count uniform
  }

  // ldmatrix lane roles. A (x4): matrices (rows 0-7, k 0-15), (rows 8-15,
  // k 0-15), (rows 0-7, k 16-31), (rows 8-15, k 16-31) = a0..a3 of m16n8k32.
  // W (x4): (n 0-7, k 0-15), (n 0-7, k 16-31), (n 8-15, k 0-15),
  // (n 8-15, k 16-31) = b0, b1 of two n8 fragments.
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int a_chunk = lane >> 4;
  const int w_row = (lane & 7) + (lane >> 4) * 8;
  const int w_chunk = (lane >> 3) & 1;

  for (int64_t k_tile = 0; k_tile < k_tiles; ++k_tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile k_tile is visible; the stage read last iteration is free
    const int64_t next = k_tile + kStages - 1;
    if (next < k_tiles) load_stage(static_cast<int>(next % kStages), next);
    cp_async_commit();

    const int stage = static_cast<int>(k_tile % kStages);
    const uint32_t a_stage = a_tile(stage);
    const uint32_t w_stage = w_tile(stage);
#pragma unroll
    for (int step = 0; step < kBlockK / 32; ++step) {
      // A k32 step wholly past K holds only zero fill: skip it (warp-uniform),
      // so the e4m3 sum sees exactly the steps that start below K.
      if (k_tile * kBlockK + step * 32 >= k) break;
      uint32_t a_frag[kFragsM][4];
      uint32_t w_frag[kFragsN][2];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        const int row = warp_m0 + i * 16 + a_row;
        ldmatrix_x4(a_stage + Tile::offset(row, step * 2 + a_chunk), a_frag[i]);
      }
#pragma unroll
      for (int j = 0; j < kFragsN / 2; ++j) {
        const int row = warp_n0 + j * 16 + w_row;
        uint32_t r[4];
        ldmatrix_x4(w_stage + Tile::offset(row, step * 2 + w_chunk), r);
        w_frag[2 * j][0] = r[0];
        w_frag[2 * j][1] = r[1];
        w_frag[2 * j + 1][0] = r[2];
        w_frag[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) {
          if constexpr (kFp8) {
            mma_e4m3_add(a_frag[i], w_frag[j][0], w_frag[j][1], acc[i][j]);
          } else {
            mma_s8(a_frag[i], w_frag[j][0], w_frag[j][1], acc[i][j]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may land after the CTA exits
  // Every warp is done reading the stages: each reuses its own slab of the
  // shared memory to stage its tile, so the stores are whole row segments.
  static_assert(kWarpsM * kWarpsN * detail::kStagedSlabBytes<Shape::kWarpN> <= Shape::kSharedBytes,
                "the epilogue's staging slabs fit in the main loop's shared memory");
  __syncthreads();
  Acc* slab = reinterpret_cast<Acc*>(shared + warp * detail::kStagedSlabBytes<Shape::kWarpN>);
  detail::store_warp_tile<kFragsM, kFragsN>(epilogue, acc, slab, block_m0 + warp_m0,
                                            block_n0 + warp_n0, lane);
}

// ---- configurations -------------------------------------------------------------

using KernelFn = void (*)(const uint8_t*, const uint8_t*, int64_t, EpilogueParams);

struct CompiledConfig {
  MmaSyncConfig config;
  KernelFn int8_kernel;
  KernelFn fp8_kernel;
  int threads;
  int shared_bytes;
};

template <int kBlockM, int kBlockN, int kBlockK, int kWarpsM, int kWarpsN, int kStages>
CompiledConfig compiled() {
  using Shape = TileShape<kBlockM, kBlockN, kBlockK, kWarpsM, kWarpsN, kStages>;
  return {MmaSyncConfig{kBlockM, kBlockN, kBlockK, kWarpsM, kWarpsN, kStages},
          &scaled_mm_mma_kernel<false, kBlockM, kBlockN, kBlockK, kWarpsM, kWarpsN, kStages>,
          &scaled_mm_mma_kernel<true, kBlockM, kBlockN, kBlockK, kWarpsM, kWarpsN, kStages>,
          Shape::kThreads, Shape::kSharedBytes};
}

// Every compiled tile, smallest first. The same list serves int8 and e4m3
// (both 8-bit operands: the same fragments, the same shared layout).
const std::vector<CompiledConfig>& compiled_configs() {
  static const std::vector<CompiledConfig> configs = {
      compiled<16, 64, 128, 1, 4, 4>(),   // decode-like M <= 16: 16 KB x 4 stages
      compiled<32, 64, 64, 2, 2, 4>(),    // M <= 32
      compiled<64, 64, 64, 2, 2, 4>(),    // M <= 64, or few CTAs
      compiled<64, 128, 64, 2, 2, 4>(),   // mid M
      compiled<128, 128, 64, 2, 2, 4>(),  // large M, mid K (an A/B point for the sweep)
      // Long K: twice the bytes per stage, half the barriers per K.
      compiled<128, 256, 128, 2, 4, 3>(),  // large M, wide N
      compiled<256, 128, 128, 4, 2, 3>(),  // large M, narrow N
  };
  return configs;
}

const CompiledConfig& find_config(const MmaSyncConfig& config, const char* op) {
  for (const CompiledConfig& compiled : compiled_configs()) {
    const MmaSyncConfig& c = compiled.config;
    if (c.block_m == config.block_m && c.block_n == config.block_n && c.block_k == config.block_k &&
        c.warps_m == config.warps_m && c.warps_n == config.warps_n && c.stages == config.stages) {
      return compiled;
    }
  }
  OASR_THROW(kInvalidArgument, op, ": no compiled mma.sync configuration ", config.name(),
             "; use one from mma_sync_configs()");
}

constexpr int kMaxDevices = 64;

// Opts a kernel into more than 48 KB of dynamic shared memory, once per
// (kernel, device).
void allow_shared_memory(KernelFn kernel, int shared_bytes, int device_index) {
  if (shared_bytes <= 48 * 1024) return;
  static std::mutex mutex;
  static std::vector<std::pair<KernelFn, int>> done;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& entry : done) {
    if (entry.first == kernel && entry.second == device_index) return;
  }
  OASR_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  done.emplace_back(kernel, device_index);
}

}  // namespace

std::string MmaSyncConfig::name() const {
  std::ostringstream out;
  out << "mma_sync_s8_" << block_m << "x" << block_n << "x" << block_k << "_w" << warps_m << "x"
      << warps_n << "_s" << stages;
  return out.str();
}

std::vector<MmaSyncConfig> mma_sync_configs(QDType /*format*/) {
  std::vector<MmaSyncConfig> configs;
  for (const CompiledConfig& compiled : compiled_configs()) configs.push_back(compiled.config);
  return configs;
}

MmaSyncConfig choose_mma_sync_config(QDType /*format*/, int64_t m, int64_t n, int64_t k) {
  // Measured on an H200 (`oasr bench scaled-mm --sweep`, the Conformer
  // shapes at M = 4096 / 16000 / 32768, and 8192^3): with a short K (the
  // d_model = 256 GEMMs) a CTA spends most of its life in the prologue and
  // the epilogue, so small tiles that fit several CTAs per SM win (64x128:
  // 122 us against 180 us for 128x256 at 16000x2048x256); a long K wants the
  // big BLOCK_K = 128 tiles (fewer barriers per K). Small M: the smallest
  // tiles, so M = 1..64 does not compute a mostly empty tile.
  const std::vector<CompiledConfig>& configs = compiled_configs();
  if (m <= 16) return configs[0].config;
  if (m <= 32) return configs[1].config;
  if (m <= 64) return configs[2].config;
  auto tiles = [&](const MmaSyncConfig& c) {
    return ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
  };
  constexpr int64_t kWave = 132;  // SMs of an H100/H200
  if (k >= 1024) {
    const MmaSyncConfig& long_k = n >= 1024 ? configs[5].config : configs[6].config;
    if (tiles(long_k) >= kWave) return long_k;
  }
  if (tiles(configs[3].config) >= kWave / 2) return configs[3].config;  // 64x128
  return configs[2].config;                                             // 64x64
}

bool mma_sync_supported(QDType format, int device_index, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (format != QDType::kInt8 && format != QDType::kFp8E4M3) {
    return refuse("the mma.sync kernels serve int8 and float8_e4m3fn, not " +
                  std::string(to_string(format)));
  }
  // A positive answer is cached per device and format: every launch asks,
  // and the queries below cost more host time than a small GEMM takes.
  static std::atomic<bool> image_ok[kMaxDevices][2] = {};
  const int format_slot = format == QDType::kFp8E4M3 ? 1 : 0;
  const bool cacheable = device_index >= 0 && device_index < kMaxDevices;
  if (cacheable && image_ok[device_index][format_slot].load()) return true;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device_index < 0 || device_index >= devices) {
    cudaGetLastError();  // clear the error so the next launch check does not report it
    return refuse("no CUDA device cuda:" + std::to_string(device_index));
  }
  const int capability = detail::compute_capability(device_index);
  if (capability == 0) return refuse("cannot query cuda:" + std::to_string(device_index));
  const std::string arch = "sm_" + std::to_string(capability);
  if (capability < 80) {
    return refuse(arch + " has no int8 mma.sync m16n8k32 (needs sm_80 or newer)");
  }
  if (format == QDType::kFp8E4M3 && capability < 89) {
    return refuse(arch + " has no fp8 tensor cores (fp8 needs sm_89 or newer); use int8_w8a8");
  }
  // The build must hold code that runs on this device, and for fp8 code
  // compiled for sm_89+ (an sm_80 image would only trap).
  CudaDeviceGuard guard(device_index);
  cudaFuncAttributes attributes{};
  const KernelFn probe = format == QDType::kFp8E4M3 ? compiled_configs()[0].fp8_kernel
                                                    : compiled_configs()[0].int8_kernel;
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(probe)) != cudaSuccess) {
    cudaGetLastError();
    return refuse("this build has no mma.sync kernel image for " + arch +
                  " (rebuild with it in CMAKE_CUDA_ARCHITECTURES)");
  }
  const int compiled_arch =
      attributes.binaryVersion > 0 ? attributes.binaryVersion : attributes.ptxVersion;
  if (format == QDType::kFp8E4M3 && compiled_arch < 89) {
    return refuse("this build's kernel image for " + arch + " is sm_" +
                  std::to_string(compiled_arch) +
                  ", without fp8 mma (add sm_89+ to "
                  "CMAKE_CUDA_ARCHITECTURES)");
  }
  if (cacheable) image_ok[device_index][format_slot].store(true);
  return true;
}

void scaled_mm_mma_sync(const ScaledMMArgs& args) {
  // Up to 16 rows: the GEMV, on a device the lane serves (elsewhere the
  // refusal below names what is missing).
  if (gemv_takes(args.format, args.m, args.n, args.k) &&
      mma_sync_supported(args.format, args.device_index, nullptr)) {
    scaled_gemv_int8(args);
    return;
  }
  scaled_mm_mma_sync(args, choose_mma_sync_config(args.format, args.m, args.n, args.k));
}

void scaled_mm_mma_sync(const ScaledMMArgs& args, const MmaSyncConfig& config) {
  constexpr const char* kOp = "scaled_mm_mma_sync";
  if (!detail::validate_scaled_mm_args(args, kOp)) return;
  std::string why;
  OASR_CHECK(mma_sync_supported(args.format, args.device_index, &why), kUnsupported, kOp, ": ",
             why);
  const CompiledConfig& compiled = find_config(config, kOp);
  CudaDeviceGuard guard(args.device_index);
  const int64_t m_tiles = (args.m + config.block_m - 1) / config.block_m;
  const int64_t n_tiles = (args.n + config.block_n - 1) / config.block_n;
  OASR_CHECK(m_tiles <= 0x7fffffff && n_tiles <= 65535, kUnsupported, kOp, ": M=", args.m,
             " N=", args.n, " needs more CTAs than a grid holds with ", config.name());
  const KernelFn kernel =
      args.format == QDType::kFp8E4M3 ? compiled.fp8_kernel : compiled.int8_kernel;
  allow_shared_memory(kernel, compiled.shared_bytes, args.device_index);
  const dim3 grid(static_cast<unsigned int>(m_tiles), static_cast<unsigned int>(n_tiles));
  kernel<<<grid, compiled.threads, compiled.shared_bytes, ops::cuda::current_stream()>>>(
      static_cast<const uint8_t*>(args.a), static_cast<const uint8_t*>(args.w), args.k,
      detail::make_epilogue_params(args));
  ops::cuda::check_launch(kOp);
}

}  // namespace oasr::quant::cuda
