#include "ops/cuda/rms_norm.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// Blocks stride over the rows; a block's threads stride over one row's
// features, so a row's sum order depends on D (and the block size, chosen
// from D alone) only: rows are batch invariant.
template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* weight, float eps, T* out, int64_t rows,
                                int64_t features) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* values = x + row * features;
    float partial = 0.0f;
    for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
      const float v = to_float(values[d]);
      partial = __fadd_rn(partial, __fmul_rn(v, v));
    }
    const float total = block_reduce(partial, SumOp{}, 0.0f, scratch);
    const float mean_square = __fdiv_rn(total, static_cast<float>(features));
    const float rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean_square, eps)));
    T* y = out + row * features;
    for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
      const float normalized = to_float(from_float<T>(__fmul_rn(to_float(values[d]), rstd)));
      const float scaled =
          weight != nullptr ? __fmul_rn(to_float(weight[d]), normalized) : normalized;
      y[d] = from_float<T>(scaled);
    }
  }
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  constexpr const char* kOp = "rms_norm";
  if (x.numel() == 0) return;
  const int64_t features = x.size(-1);
  const int64_t rows = x.numel() / features;
  use_device(x.device().index);
  dispatch_float(x.dtype(), kOp, [&](auto tag) {
    using T = decltype(tag);
    rms_norm_kernel<T><<<grid_for_rows(rows), threads_for_row(features), 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()),
        weight.defined() ? static_cast<const T*>(weight.raw_data()) : nullptr, eps,
        static_cast<T*>(out.raw_data()), rows, features);
  });
  check_launch(kOp);
}

}  // namespace oasr::ops::cuda
