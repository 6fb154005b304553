// Elementwise dtype conversion on the GPU with the same per-element function
// as the CPU (core/convert_element.h), so both give identical bits.
#include <cuda_runtime.h>

#include "core/convert_element.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/stream.h"

namespace oasr {

namespace {
__global__ void convert_kernel(const char* src, DType src_dtype, char* dst, DType dst_dtype,
                               int64_t n) {
  const int src_size = dtype_size_hd(src_dtype);
  const int dst_size = dtype_size_hd(dst_dtype);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    convert_element(src + i * src_size, src_dtype, dst + i * dst_size, dst_dtype);
  }
}
}  // namespace

void cuda_convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                        int device_index) {
  if (n == 0) return;
  OASR_CUDA_CHECK(cudaSetDevice(device_index));
  constexpr int kThreads = 256;
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  convert_kernel<<<blocks, kThreads, 0, cuda_current_stream()>>>(
      static_cast<const char*>(src), src_dtype, static_cast<char*>(dst), dst_dtype, n);
  OASR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace oasr
