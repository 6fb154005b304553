#include "ops/cuda/embedding.h"

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// Elements are moved as raw words of their size (a gather computes nothing).
// A row outside [0, vocab) is clamped into it: the front checks ids on the
// host, but embedding_device_ids' caller establishes their range itself, and
// a mistake there must not read outside the table.
template <typename Word>
__global__ void embedding_kernel(const int64_t* rows, const Word* table, Word* out, int64_t count,
                                 int64_t features, int64_t vocab) {
  const int64_t total = count * features;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t position = i / features;
    const int64_t feature = i - position * features;
    const int64_t row = min(max(rows[position], int64_t{0}), vocab - 1);
    out[i] = table[row * features + feature];
  }
}

}  // namespace

void embedding(const int64_t* rows, int64_t count, const void* table, int64_t vocab,
               int64_t features, void* out, DType dtype, int device_index) {
  const int64_t total = count * features;
  if (total == 0) return;
  CudaDeviceGuard guard(device_index);
  const unsigned int blocks = grid_for(total);
  switch (dtype_size(dtype)) {
    case 4:
      embedding_kernel<uint32_t><<<blocks, kThreadsPerBlock, 0, current_stream()>>>(
          rows, static_cast<const uint32_t*>(table), static_cast<uint32_t*>(out), count, features,
          vocab);
      break;
    case 2:
      embedding_kernel<uint16_t><<<blocks, kThreadsPerBlock, 0, current_stream()>>>(
          rows, static_cast<const uint16_t*>(table), static_cast<uint16_t*>(out), count, features,
          vocab);
      break;
    default:
      OASR_THROW(kUnsupported,
                 "embedding: the CUDA body serves float32, float16 and bfloat16, got ",
                 dtype_name(dtype));
  }
  check_launch("embedding");
}

}  // namespace oasr::ops::cuda
