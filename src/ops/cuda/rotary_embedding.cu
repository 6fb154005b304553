#include "ops/cuda/rotary_embedding.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One thread per (row, head, i < D / 2) pair, grid-strided.
template <typename T>
__global__ void rotary_kernel(const T* x, const int64_t* positions, const float* inv_freq, T* out,
                              int64_t rows, int64_t heads, int64_t half) {
  const int64_t pairs = rows * heads * half;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p % half;
    const int64_t row_head = p / half;
    const int64_t row = row_head / heads;
    const float angle = __fmul_rn(static_cast<float>(positions[row]), inv_freq[i]);
    const float c = to_float(from_float<T>(static_cast<float>(cos(static_cast<double>(angle)))));
    const float s = to_float(from_float<T>(static_cast<float>(sin(static_cast<double>(angle)))));
    const int64_t base = row_head * 2 * half;
    const float first = to_float(x[base + i]);
    const float second = to_float(x[base + i + half]);
    const float a = to_float(from_float<T>(__fmul_rn(first, c)));
    const float b = to_float(from_float<T>(__fmul_rn(second, s)));
    const float d = to_float(from_float<T>(__fmul_rn(second, c)));
    const float e = to_float(from_float<T>(__fmul_rn(first, s)));
    out[base + i] = from_float<T>(__fsub_rn(a, b));
    out[base + i + half] = from_float<T>(__fadd_rn(d, e));
  }
}

}  // namespace

void rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                      const Tensor& out) {
  constexpr const char* kOp = "rotary_embedding";
  if (x.numel() == 0) return;
  const int64_t head_dim = x.size(-1);
  const int64_t heads = x.size(-2);
  const int64_t rows = x.numel() / (heads * head_dim);
  use_device(x.device().index);
  dispatch_float(x.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const int64_t pairs = rows * heads * (head_dim / 2);
    rotary_kernel<T><<<grid_for(pairs), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), positions.data<int64_t>(), inv_freq.data<float>(),
        static_cast<T*>(out.raw_data()), rows, heads, head_dim / 2);
  });
  check_launch(kOp);
}

}  // namespace oasr::ops::cuda
