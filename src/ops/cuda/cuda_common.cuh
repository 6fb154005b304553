// Shared by the CUDA op bodies (ops/cuda/*.cu): the stream every op runs on,
// launch geometry, and the dtype dispatch from DType to the element type.
// Every body loads its elements as float, computes in float32 and rounds once
// to the output dtype (round to nearest even), so a float16/bfloat16 result
// differs from the float32 CPU reference by that one rounding plus the
// float32 reassociation a parallel reduction brings.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/cuda/stream.h"

#include <atomic>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "core/error.h"

namespace oasr::ops::cuda {

// The thread's stream (core/cuda/stream.h): the legacy default stream, or a
// device graph's while it records or replays.
inline cudaStream_t current_stream() {
  return cuda_current_stream();
}

constexpr int kThreadsPerBlock = 256;

// Blocks for a grid-stride loop over n elements.
inline unsigned int grid_for(int64_t n, int threads = kThreadsPerBlock) {
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<unsigned int>(wanted < 65535 * 8 ? (wanted > 0 ? wanted : 1) : 65535 * 8);
}

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Calls fn(T{}) with T the element type of a floating dtype the CUDA bodies
// serve (float32, float16, bfloat16); anything else is refused by name.
template <typename Fn>
void dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn(float{});
      return;
    case DType::kF16:
      fn(__half{});
      return;
    case DType::kBF16:
      fn(__nv_bfloat16{});
      return;
    default:
      OASR_THROW(kUnsupported, op, ": the CUDA body serves float32, float16 and bfloat16, got ",
                 dtype_name(dtype));
  }
}

// Checks the launch just made (bad configuration, missing kernel image).
inline void check_launch(const char* op) {
  const cudaError_t status = cudaGetLastError();
  OASR_CHECK(status == cudaSuccess, kInternal, op,
             ": CUDA kernel launch failed: ", cudaGetErrorName(status), " (",
             cudaGetErrorString(status), ")");
}

// major * 10 + minor of a device (0 when it cannot be queried), cached: the
// kernels that depend on it ask on every launch, and the query is slow.
inline int compute_capability(int device_index) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  const bool cacheable = device_index >= 0 && device_index < kMaxDevices;
  if (cacheable && cache[device_index].load() != 0) return cache[device_index].load();
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index) !=
          cudaSuccess) {
    cudaGetLastError();  // clear it so the next launch check does not report it
    return 0;
  }
  const int capability = major * 10 + minor;
  if (cacheable) cache[device_index].store(capability);
  return capability;
}

// Makes `device_index` the current device, so launches on the legacy stream
// go to the GPU holding the op's tensors.
inline void use_device(int device_index) {
  OASR_CUDA_CHECK(cudaSetDevice(device_index));
}

// ---- row reductions ---------------------------------------------------------

// max that propagates NaN (like PyTorch's max reductions): NaN wins.
__device__ __forceinline__ float nan_max(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct NanMaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return nan_max(a, b); }
};

// Reduces over the 32 lanes of a full warp; every lane gets the result.
template <typename Op>
__device__ __forceinline__ float warp_reduce(float value, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Reduces over the block; every thread gets the result. blockDim.x must be a
// multiple of 32 (at most 1024), every thread of the block must call it, and
// `scratch` is 32 floats of shared memory (reusable by the next call: the
// leading barrier keeps a new call from overwriting a result still being
// read). `identity` is op's neutral element (0 for a sum, -inf for a max).
template <typename Op>
__device__ __forceinline__ float block_reduce(float value, Op op, float identity, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  value = warp_reduce(value, op);
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = warp_reduce(lane < warps ? scratch[lane] : identity, op);
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
}

// Threads for a block that reduces one row of `length` elements: about four
// elements per thread, a multiple of 32, between 32 and 1024.
inline int threads_for_row(int64_t length) {
  const int64_t per_four = (length + 3) / 4;
  const int64_t rounded = (per_four + 31) / 32 * 32;
  return static_cast<int>(rounded < 32 ? 32 : (rounded > 1024 ? 1024 : rounded));
}

// Blocks for a block-per-row kernel whose blocks stride over `rows`.
inline unsigned int grid_for_rows(int64_t rows) {
  constexpr int64_t kMaxBlocks = 65535 * 8;
  return static_cast<unsigned int>(rows < 1 ? 1 : (rows < kMaxBlocks ? rows : kMaxBlocks));
}

}  // namespace oasr::ops::cuda
