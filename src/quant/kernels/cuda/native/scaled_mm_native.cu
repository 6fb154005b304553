// Host side of the native lane (scaled_mm_native.h): support checks, the
// tuning table, dispatch to the generated per-(format, output) entry points.
// This file includes no CUTLASS header; the kernels live in the generated
// native/sm90_*.cu files, compiled for sm_90a only.
#include "quant/kernels/cuda/native/scaled_mm_native.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"
#include "quant/kernels/cuda/native/sm90_configs.h"
#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"
#if OASR_HAVE_NATIVE_SM90
#include "quant/kernels/cuda/native/sm90_launch.h"
#endif

namespace oasr::quant::cuda {
namespace {

constexpr int kMaxDevices = 64;

NativeConfig make_config(int index, int tile_m, int tile_n, int cluster_m, int cluster_n,
                         bool cooperative) {
  NativeConfig config;
  config.index = index;
  config.tile_m = tile_m;
  config.tile_n = tile_n;
  config.cluster_m = cluster_m;
  config.cluster_n = cluster_n;
  config.cooperative = cooperative;
  return config;
}

const std::vector<NativeConfig>& compiled_configs() {
  static const std::vector<NativeConfig> configs = [] {
    std::vector<NativeConfig> list;
#if OASR_HAVE_NATIVE_SM90
#define OASR_SM90_ROW(index, tile_m, tile_n, cluster_m, cluster_n, cooperative) \
  list.push_back(make_config(index, tile_m, tile_n, cluster_m, cluster_n, cooperative));
    OASR_SM90_CONFIGS(OASR_SM90_ROW)
#undef OASR_SM90_ROW
#endif
    return list;
  }();
  return configs;
}

// One measured row of the tuning table: for (format, output, activation, N,
// K), the configuration that was fastest for every M up to m_max.
struct TuningRow {
  const char* format;  // "int8" | "fp8"
  const char* out;     // "f32" | "f16" | "bf16" | "q8"
  const char* act;     // activation_name of the epilogue's activation
  int64_t m_max;
  int64_t n;
  int64_t k;
  int config;
};

const std::vector<TuningRow> kTuningTable = {
#include "quant/kernels/cuda/native/sm90_tuning_table.inc"
};

const char* out_kind(DType served, bool quantizing) {
  if (quantizing) return "q8";
  switch (served) {
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    default:
      return "f32";
  }
}

// Shapes the sweep did not measure: what the sweep on an H200 found
// (64-row ping-pong tiles up to M = 1024; then the cooperative 128x128 tile
// on a 2x1 cluster; for int8 the 128x256 tile for long K and wide N -- not
// for e4m3, whose promoting mainloop keeps a second accumulator set, which
// a 128x256 tile spills: 2965 us at 8192^3 against 847 for torch._scaled_mm).
int untuned_config(QDType format, int64_t m, int64_t n, int64_t k) {
  if (m <= 1024) return 0;
  if (format == QDType::kInt8 && n >= 2048 && k >= 1024) return 2;
  return 1;
}

int sm_count(int device_index) {
  static std::atomic<int> cache[kMaxDevices] = {};
  const bool cacheable = device_index >= 0 && device_index < kMaxDevices;
  if (cacheable && cache[device_index].load() != 0) return cache[device_index].load();
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device_index) != cudaSuccess) {
    cudaGetLastError();
    return 0;  // CUTLASS queries it itself
  }
  if (cacheable) cache[device_index].store(count);
  return count;
}

#if OASR_HAVE_NATIVE_SM90
native::Sm90LaunchFn launch_function(QDType format, DType served, bool quantizing) {
  const bool fp8 = format == QDType::kFp8E4M3;
  if (quantizing) return fp8 ? native::launch_sm90_e4m3_q8 : native::launch_sm90_s8_q8;
  switch (served) {
    case DType::kF16:
      return fp8 ? native::launch_sm90_e4m3_f16 : native::launch_sm90_s8_f16;
    case DType::kBF16:
      return fp8 ? native::launch_sm90_e4m3_bf16 : native::launch_sm90_s8_bf16;
    default:
      return fp8 ? native::launch_sm90_e4m3_f32 : native::launch_sm90_s8_f32;
  }
}
#endif

}  // namespace

std::string NativeConfig::name(QDType format) const {
  return std::string("sm90_") + (format == QDType::kFp8E4M3 ? "e4m3" : "s8") + "_" +
         (cooperative ? "cooperative" : "pingpong") + "_" + std::to_string(tile_m) + "x" +
         std::to_string(tile_n) + "x128_c" + std::to_string(cluster_m) + "x" +
         std::to_string(cluster_n);
}

std::vector<NativeConfig> native_configs() {
  return compiled_configs();
}

NativeConfig choose_native_config(QDType format, int64_t m, int64_t n, int64_t k, DType served,
                                  bool quantizing, Activation act) {
  const std::vector<NativeConfig>& configs = compiled_configs();
  OASR_CHECK(!configs.empty(), kUnsupported,
             "the native scaled GEMMs are not in this build (it has no sm_90a kernels)");
  const std::string format_name = format == QDType::kFp8E4M3 ? "fp8" : "int8";
  auto lookup = [&](const std::string& out, const std::string& act_name) {
    auto matches = [&](const TuningRow& row) {
      return row.n == n && row.k == k && format_name == row.format && out == row.out &&
             act_name == row.act;
    };
    const TuningRow* best = nullptr;
    for (const TuningRow& row : kTuningTable) {
      if (!matches(row) || row.m_max < m) continue;
      if (best == nullptr || row.m_max < best->m_max) best = &row;
    }
    // Past the largest measured M the largest bucket's choice holds.
    if (best == nullptr) {
      for (const TuningRow& row : kTuningTable) {
        if (!matches(row)) continue;
        if (best == nullptr || row.m_max > best->m_max) best = &row;
      }
    }
    return best;
  };
  // The sweep measures float16 and the quantizing output; bfloat16 (the same
  // bytes per element) and float32 take float16's row. An activation without
  // rows of its own takes the rows measured without one.
  auto lookup_output = [&](const std::string& act_name) {
    const TuningRow* row = lookup(out_kind(served, quantizing), act_name);
    if (row == nullptr && !quantizing) row = lookup("f16", act_name);
    return row;
  };
  const TuningRow* best = lookup_output(activation_name(act));
  if (best == nullptr) best = lookup_output("none");
  const int index = best != nullptr ? best->config : untuned_config(format, m, n, k);
  for (const NativeConfig& config : configs) {
    if (config.index == index) return config;
  }
  OASR_THROW(kInternal, "the native tuning table names configuration ", index,
             ", which is not compiled (native/sm90_configs.h)");
}

bool native_supported(QDType format, int device_index, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (format != QDType::kInt8 && format != QDType::kFp8E4M3) {
    return refuse("the native kernels serve int8 and float8_e4m3fn, not " +
                  std::string(to_string(format)));
  }
  if (compiled_configs().empty()) {
    return refuse(
        "this build has no native sm_90a kernels (build with 90a in CMAKE_CUDA_ARCHITECTURES and "
        "the CUTLASS headers of scripts/setup.sh)");
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device_index < 0 || device_index >= devices) {
    cudaGetLastError();
    return refuse("no CUDA device cuda:" + std::to_string(device_index));
  }
  const int capability = detail::compute_capability(device_index);
  if (capability != 90) {
    return refuse(
        "the native kernels are sm_90a (Hopper) code; cuda:" + std::to_string(device_index) +
        " is sm_" + std::to_string(capability) + " (use mma_sync)");
  }
  return true;
}

bool native_takes(const ScaledMMArgs& args) {
  if (args.out_multiplier == nullptr) return true;
  // 8-bit rows through TMA: 16-byte row pitch.
  return args.n % 16 == 0;
}

std::string native_kernel_name(QDType format, int64_t m, int64_t n, int64_t k) {
  if (gemv_takes(format, m, n, k)) return gemv_kernel_name(m);
  // The report asks per layer with its served dtype unknown here; the table
  // row of float16 output names the configuration.
  return choose_native_config(format, m, n, k, DType::kF16, false).name(format);
}

// Whether the native epilogue is the faster one for `args`. An int8 GEMM with
// a swish epilogue only above M = 8192: with the division-free swish and its
// own tuning rows the native kernel took 87.9 us against mma.sync's 133.5 at
// 16000x2048x256, and the full-size U2++ encoder at B = 64 (M = 16000) went
// from 11.10 to 10.58 ms; at B = 16 (M = 4000) the encoder measured 3.83 ms
// with it against 3.71 without, though the GEMM alone was faster (30.6 vs
// 39.2 us), and at M = 250 the GEMM alone was slower (15.8 vs 12.7 us)
// (H100, bench/README.md "Division-free swish"). Every int8 lane gives the
// CPU reference's bits, so a choice by M keeps batch invariance; fp8's lanes
// differ in summation order, and fp8 never switches lanes by M.
bool native_preferred(const ScaledMMArgs& args) {
  constexpr int64_t kInt8SwishNativeMinRows = 8193;
  if (args.format == QDType::kInt8 && args.act == Activation::kSwish)
    return args.m >= kInt8SwishNativeMinRows;
  return true;
}

void scaled_mm_native(const ScaledMMArgs& args) {
  if (gemv_takes(args.format, args.m, args.n, args.k) &&
      native_supported(args.format, args.device_index, nullptr)) {
    scaled_gemv_int8(args);
    return;
  }
  if (!native_takes(args) || !native_preferred(args)) {
    scaled_mm_mma_sync(args);
    return;
  }
  scaled_mm_native(args, choose_native_config(args.format, args.m, args.n, args.k, args.served,
                                              args.out_multiplier != nullptr, args.act));
}

void scaled_mm_native(const ScaledMMArgs& args, const NativeConfig& config) {
  constexpr const char* kOp = "scaled_mm_native";
  if (!detail::validate_scaled_mm_args(args, kOp)) return;
  std::string why;
  OASR_CHECK(native_supported(args.format, args.device_index, &why), kUnsupported, kOp, ": ", why);
  OASR_CHECK(native_takes(args), kInvalidArgument, kOp,
             ": the quantizing epilogue needs N % 16 == 0 (got N=", args.n,
             "); scaled_mm_native(args) runs the mma.sync kernel for it");
  OASR_CHECK(reinterpret_cast<uintptr_t>(args.out) % 16 == 0, kInvalidArgument, kOp,
             ": out must be 16-byte aligned (TMA stores)");
  OASR_CHECK(args.m <= 0x7fffffff && args.n <= 0x7fffffff, kInvalidArgument, kOp, ": M=", args.m,
             " N=", args.n, " exceeds the kernels' 32-bit extents");
#if OASR_HAVE_NATIVE_SM90
  CudaDeviceGuard guard(args.device_index);
  launch_function(args.format, args.served, args.out_multiplier != nullptr)(
      args, config.index, ops::cuda::current_stream(), sm_count(args.device_index));
  ops::cuda::check_launch(kOp);
#else
  (void)config;
#endif
}

namespace native {

void* native_workspace(int device_index, size_t bytes) {
  if (bytes == 0) return nullptr;
  struct Buffer {
    void* pointer = nullptr;
    size_t bytes = 0;
  };
  static std::mutex mutex;
  static Buffer buffers[kMaxDevices];
  OASR_CHECK(device_index >= 0 && device_index < kMaxDevices, kInvalidArgument,
             "native scaled GEMM: device index ", device_index, " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  Buffer& buffer = buffers[device_index];
  if (buffer.bytes < bytes) {
    // The outgrown buffer is never freed: a recorded device graph
    // (core/device_graph.h) may still replay kernels that use it. Growth at
    // least doubles, so what is kept is at most the current size.
    bytes = std::max(bytes, 2 * buffer.bytes);
    buffer = {};
    OASR_CHECK(cudaMalloc(&buffer.pointer, bytes) == cudaSuccess, kOutOfMemory,
               "native scaled GEMM: cannot allocate ", bytes, " bytes of workspace");
    buffer.bytes = bytes;
  }
  return buffer.pointer;
}

}  // namespace native
}  // namespace oasr::quant::cuda
