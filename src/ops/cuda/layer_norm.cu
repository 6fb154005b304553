#include "ops/cuda/layer_norm.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// Blocks stride over the rows. With kFusedAdd, the first pass forms the
// residual sum, stores it rounded to T and normalizes what it stored; each
// thread rereads only the elements it wrote itself, so no barrier is needed
// between the store and the later passes.
template <typename T, bool kFusedAdd>
__global__ void layer_norm_kernel(const T* x, const T* residual, float alpha, const T* weight,
                                  const T* bias, float eps, T* sum, T* out, int64_t rows,
                                  int64_t features) {
  __shared__ float scratch[32];
  const float count = static_cast<float>(features);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t offset = row * features;
    const T* values = x + offset;
    float partial = 0.0f;
    if constexpr (kFusedAdd) {
      for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
        const float scaled = __fmul_rn(alpha, to_float(x[offset + d]));
        const T rounded = from_float<T>(__fadd_rn(to_float(residual[offset + d]), scaled));
        sum[offset + d] = rounded;
        partial = __fadd_rn(partial, to_float(rounded));
      }
      values = sum + offset;
    } else {
      for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
        partial = __fadd_rn(partial, to_float(values[d]));
      }
    }
    const float mean = __fdiv_rn(block_reduce(partial, SumOp{}, 0.0f, scratch), count);

    float squares = 0.0f;
    for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
      const float centered = __fsub_rn(to_float(values[d]), mean);
      squares = __fadd_rn(squares, __fmul_rn(centered, centered));
    }
    const float variance = __fdiv_rn(block_reduce(squares, SumOp{}, 0.0f, scratch), count);
    const float rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));

    for (int64_t d = threadIdx.x; d < features; d += blockDim.x) {
      float y = __fmul_rn(__fsub_rn(to_float(values[d]), mean), rstd);
      if (weight != nullptr) y = __fmul_rn(y, to_float(weight[d]));
      if (bias != nullptr) y = __fadd_rn(y, to_float(bias[d]));
      out[offset + d] = from_float<T>(y);
    }
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <bool kFusedAdd>
void launch(const char* op, const Tensor& x, const Tensor& residual, float alpha,
            const Tensor& weight, const Tensor& bias, float eps, const Tensor& sum,
            const Tensor& out) {
  if (x.numel() == 0) return;
  const int64_t features = x.size(-1);
  const int64_t rows = x.numel() / features;
  use_device(x.device().index);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_kernel<T, kFusedAdd>
        <<<grid_for_rows(rows), threads_for_row(features), 0, current_stream()>>>(
            static_cast<const T*>(x.raw_data()), data_or_null<T>(residual), alpha,
            data_or_null<T>(weight), data_or_null<T>(bias), eps,
            sum.defined() ? static_cast<T*>(sum.raw_data()) : nullptr,
            static_cast<T*>(out.raw_data()), rows, features);
  });
  check_launch(op);
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                const Tensor& out) {
  launch<false>("layer_norm", x, Tensor(), 1.0f, weight, bias, eps, Tensor(), out);
}

void add_scaled_layer_norm(const Tensor& x, const Tensor& residual, float alpha,
                           const Tensor& weight, const Tensor& bias, float eps, const Tensor& sum,
                           const Tensor& normalized) {
  launch<true>("add_scaled_layer_norm", x, residual, alpha, weight, bias, eps, sum, normalized);
}

}  // namespace oasr::ops::cuda
