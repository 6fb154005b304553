#include "ops/cuda/log_softmax.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// inner == 1: one block per row of `length` contiguous elements.
template <typename T>
__global__ void log_softmax_row_kernel(const T* x, T* out, int64_t rows, int64_t length) {
  __shared__ float scratch[32];
  const float kNegInf = -__int_as_float(0x7f800000);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = x + row * length;
    T* dst = out + row * length;
    float local_max = kNegInf;
    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      local_max = nan_max(local_max, to_float(src[l]));
    }
    const float row_max = block_reduce(local_max, NanMaxOp{}, kNegInf, scratch);
    float local_sum = 0.0f;
    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      local_sum = __fadd_rn(local_sum, expf(__fsub_rn(to_float(src[l]), row_max)));
    }
    const float log_total = logf(block_reduce(local_sum, SumOp{}, 0.0f, scratch));
    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      dst[l] = from_float<T>(__fsub_rn(__fsub_rn(to_float(src[l]), row_max), log_total));
    }
  }
}

// inner > 1: one thread per (outer, inner) column, sequential along `length`.
template <typename T>
__global__ void log_softmax_column_kernel(const T* x, T* out, int64_t outer, int64_t length,
                                          int64_t inner) {
  const float kNegInf = -__int_as_float(0x7f800000);
  const int64_t columns = outer * inner;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner;
    const int64_t base = o * length * inner + (c - o * inner);
    float row_max = kNegInf;
    for (int64_t l = 0; l < length; ++l) row_max = nan_max(row_max, to_float(x[base + l * inner]));
    float total = 0.0f;
    for (int64_t l = 0; l < length; ++l) {
      total = __fadd_rn(total, expf(__fsub_rn(to_float(x[base + l * inner]), row_max)));
    }
    const float log_total = logf(total);
    for (int64_t l = 0; l < length; ++l) {
      const int64_t at = base + l * inner;
      out[at] = from_float<T>(__fsub_rn(__fsub_rn(to_float(x[at]), row_max), log_total));
    }
  }
}

}  // namespace

void log_softmax(const Tensor& x, const Tensor& out, int64_t outer, int64_t length, int64_t inner) {
  if (outer * length * inner == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "log_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    if (inner == 1) {
      log_softmax_row_kernel<T>
          <<<grid_for_rows(outer), threads_for_row(length), 0, current_stream()>>>(src, dst, outer,
                                                                                   length);
    } else {
      log_softmax_column_kernel<T>
          <<<grid_for(outer * inner), kThreadsPerBlock, 0, current_stream()>>>(src, dst, outer,
                                                                               length, inner);
    }
  });
  check_launch("log_softmax");
}

}  // namespace oasr::ops::cuda
