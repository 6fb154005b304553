#include "ops/cuda/activation.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

template <typename T, Activation kActivation>
__global__ void activation_kernel(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_float<T>(act::apply(kActivation, to_float(x[i])));
  }
}

// Calls fn(std::integral_constant<Activation, a>{}) for a non-identity `a`.
template <typename Fn>
void dispatch_activation(Activation activation, Fn&& fn) {
  switch (activation) {
    case Activation::kRelu:
      return fn(std::integral_constant<Activation, Activation::kRelu>{});
    case Activation::kSwish:
      return fn(std::integral_constant<Activation, Activation::kSwish>{});
    case Activation::kGeluErf:
      return fn(std::integral_constant<Activation, Activation::kGeluErf>{});
    case Activation::kGeluTanh:
      return fn(std::integral_constant<Activation, Activation::kGeluTanh>{});
    case Activation::kSigmoid:
      return fn(std::integral_constant<Activation, Activation::kSigmoid>{});
    case Activation::kTanh:
      return fn(std::integral_constant<Activation, Activation::kTanh>{});
    case Activation::kNone:
      break;
  }
  OASR_THROW(kInternal, "activation: no kernel for Activation value ",
             static_cast<int>(activation));
}

template <Activation kActivation>
void launch(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "activation", [&](auto tag) {
    using T = decltype(tag);
    activation_kernel<T, kActivation><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), n);
  });
  check_launch("activation");
}

// ---- 16-bit inputs: a table of every input's result --------------------------
// A float16 or bfloat16 input has 65536 values, so activation_kernel's
// function of it is a 65536-entry table. The table is built on the device by
// that very function (activation_kernel over all bit patterns), so a lookup
// returns its bits by construction; a pass then costs its memory traffic
// instead of the exact formula's ~100 instructions per element (swish over
// [64 x 250, 2048] float16: bench/README.md "CUDA graphs").

constexpr int kTableEntries = 1 << 16;
constexpr int kTableBytes = kTableEntries * 2;
constexpr int kTableThreads = 1024;
// Below this many elements the elementwise kernel is as fast as loading the
// 128 KiB table into each block's shared memory.
constexpr int64_t kTableMinElements = int64_t{1} << 20;

__global__ void all_bit_patterns_kernel(uint16_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kTableEntries) out[i] = static_cast<uint16_t>(i);
}

__global__ void __launch_bounds__(kTableThreads)
    table_kernel(const uint16_t* __restrict__ table, const uint16_t* x, uint16_t* out, int64_t n) {
  extern __shared__ uint4 shared_table[];  // kTableBytes
  const uint4* source = reinterpret_cast<const uint4*>(table);
  for (int i = threadIdx.x; i < kTableBytes / 16; i += blockDim.x) shared_table[i] = source[i];
  __syncthreads();
  const uint16_t* lookup = reinterpret_cast<const uint16_t*>(shared_table);
  const auto map_word = [&](uint32_t w) {
    return static_cast<uint32_t>(lookup[w & 0xffffu]) |
           (static_cast<uint32_t>(lookup[w >> 16]) << 16);
  };
  // 16-byte vectors (x and out are 16-byte aligned), two per thread in flight.
  const int64_t vectors = n / 8;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  uint4* outv = reinterpret_cast<uint4*>(out);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += 2 * stride) {
    const bool second = i + stride < vectors;
    const uint4 a = xv[i];
    uint4 b = {};
    if (second) b = xv[i + stride];
    outv[i] = uint4{map_word(a.x), map_word(a.y), map_word(a.z), map_word(a.w)};
    if (second)
      outv[i + stride] = uint4{map_word(b.x), map_word(b.y), map_word(b.z), map_word(b.w)};
  }
  for (int64_t i = vectors * 8 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = lookup[x[i]];
  }
}

// The table of (device, dtype, activation), built on first use and kept for
// the process's life (a recorded device graph may replay lookups into it).
// Null while the stream is being captured and the table does not exist yet:
// building it then would put its construction into the graph.
const uint16_t* result_table(int device_index, DType dtype, Activation activation) {
  static std::mutex mutex;
  static auto* tables = new std::map<std::tuple<int, DType, Activation>, uint16_t*>();
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device_index, dtype, activation);
  const auto found = tables->find(key);
  if (found != tables->end()) return found->second;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  OASR_CUDA_CHECK(cudaStreamIsCapturing(current_stream(), &capture));
  if (capture != cudaStreamCaptureStatusNone) return nullptr;
  void* patterns = nullptr;
  void* results = nullptr;
  OASR_CHECK(cudaMalloc(&patterns, kTableBytes) == cudaSuccess &&
                 cudaMalloc(&results, kTableBytes) == cudaSuccess,
             kOutOfMemory, "activation: cannot allocate its 128 KiB result table");
  all_bit_patterns_kernel<<<kTableEntries / 256, 256, 0, current_stream()>>>(
      static_cast<uint16_t*>(patterns));
  dispatch_activation(activation, [&](auto act_tag) {
    constexpr Activation kAct = decltype(act_tag)::value;
    dispatch_float(dtype, "activation", [&](auto tag) {
      using T = decltype(tag);
      activation_kernel<T, kAct><<<kTableEntries / 256, 256, 0, current_stream()>>>(
          static_cast<const T*>(patterns), static_cast<T*>(results), kTableEntries);
    });
  });
  check_launch("activation table");
  OASR_CUDA_CHECK(cudaStreamSynchronize(current_stream()));
  cudaFree(patterns);
  auto* table = static_cast<uint16_t*>(results);
  tables->emplace(key, table);
  return table;
}

int table_blocks(int device_index) {
  static std::mutex mutex;
  static std::map<int, int> blocks;
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = blocks.find(device_index);
  if (found != blocks.end()) return found->second;
  int sms = 0;
  OASR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_index));
  OASR_CUDA_CHECK(
      cudaFuncSetAttribute(table_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTableBytes));
  return blocks[device_index] = sms;  // one 128 KiB block per SM
}

// True when the table served the pass.
bool run_table(const Tensor& x, const Tensor& out, Activation activation) {
  if (x.dtype() != DType::kF16 && x.dtype() != DType::kBF16) return false;
  const int64_t n = x.numel();
  if (n < kTableMinElements) return false;
  if (reinterpret_cast<uintptr_t>(x.raw_data()) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out.raw_data()) % 16 != 0) {
    return false;
  }
  const int device_index = x.device().index;
  const uint16_t* table = result_table(device_index, x.dtype(), activation);
  if (table == nullptr) return false;
  table_kernel<<<table_blocks(device_index), kTableThreads, kTableBytes, current_stream()>>>(
      table, static_cast<const uint16_t*>(x.raw_data()), static_cast<uint16_t*>(out.raw_data()), n);
  check_launch("activation (table)");
  return true;
}

}  // namespace

void activation(const Tensor& x, const Tensor& out, Activation activation) {
  if (x.numel() == 0) return;
  use_device(x.device().index);
  if (activation == Activation::kNone) {
    if (out.raw_data() != x.raw_data()) {
      OASR_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), x.raw_data(), x.nbytes(),
                                      cudaMemcpyDeviceToDevice, current_stream()));
    }
    return;
  }
  if (run_table(x, out, activation)) return;
  dispatch_activation(activation, [&](auto act_tag) { launch<decltype(act_tag)::value>(x, out); });
}

}  // namespace oasr::ops::cuda
