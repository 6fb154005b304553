#include "ops/cuda/step_tokens.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

__global__ void positions_kernel(const int32_t* past_tokens, int64_t n, int64_t* ids) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) ids[i] = int64_t{*past_tokens} + i;
}

// Element e of row r's n * width contiguous elements goes to the store's row
// r at token offset *past_tokens (row_stride elements a row, width a token).
template <typename T>
__global__ void write_tokens_kernel(const T* x, int64_t rows, int64_t per_row, int64_t width,
                                    int64_t row_stride, int64_t capacity,
                                    const int32_t* past_tokens, T* store) {
  const int64_t first = int64_t{*past_tokens} * width;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t at = first + i % per_row;
    if (at < 0 || at >= capacity * width) continue;
    store[(i / per_row) * row_stride + at] = x[i];
  }
}

}  // namespace

void positions_after(const Tensor& past_tokens, const Tensor& ids) {
  const int64_t n = ids.numel();
  if (n == 0) return;
  use_device(past_tokens.device().index);
  positions_kernel<<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
      past_tokens.data<int32_t>(), n, ids.data<int64_t>());
  check_launch("positions_after");
}

void write_tokens_at(const Tensor& x, const Tensor& store, const Tensor& past_tokens) {
  const int64_t rows = x.size(0);
  const int64_t width = x.size(2) * x.size(3);
  const int64_t per_row = x.size(1) * width;
  if (rows * per_row == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "write_tokens_at", [&](auto tag) {
    using T = decltype(tag);
    write_tokens_kernel<T><<<grid_for(rows * per_row), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), rows, per_row, width, store.strides()[0],
        store.size(1), past_tokens.data<int32_t>(), static_cast<T*>(store.raw_data()));
  });
  check_launch("write_tokens_at");
}

}  // namespace oasr::ops::cuda
