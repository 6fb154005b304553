#include "ops/cuda/layer_norm.h"

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/layer_norm_row.cuh"

namespace oasr::ops::cuda {
namespace {

// Groups (a warp or a block, layer_norm_row.cuh's row_launch) stride over
// the rows; the row math is layer_norm_row.cuh's, shared with the fused
// quantize producers (quant/kernels/cuda/norm_quant.cu).
template <typename T, bool kFusedAdd, RowMode kMode>
__global__ void layer_norm_kernel(const T* x, const T* residual, float alpha, const T* weight,
                                  const T* bias, float eps, T* sum, T* out, int64_t rows,
                                  int64_t features) {
  __shared__ float scratch[32];
  const RowGroup<kMode != RowMode::kBlock> group;
  for (int64_t row = group.first_row(); row < rows; row += group.row_step()) {
    const int64_t offset = row * features;
    if constexpr (kMode == RowMode::kWarpRegisters) {
      const RegisterRow values =
          layer_norm_register_row<T, kFusedAdd>(x, residual, alpha, sum, offset, features, eps);
      const int64_t first = register_row_first();
      const int here = register_row_count(features);
      T y[kRegisterValues];
#pragma unroll
      for (int j = 0; j < kRegisterValues; ++j) {
        y[j] =
            from_float<T>(j < here ? register_row_value(values, weight, bias, j, first + j) : 0.0f);
      }
      if (here == kRegisterValues) {
        store_register_values(out + offset + first, y);
      } else {
        for (int j = 0; j < here; ++j) out[offset + first + j] = y[j];
      }
    } else {
      const LayerNormRow<T> stats = layer_norm_row_stats<T, kFusedAdd>(
          group, x, residual, alpha, sum, offset, features, eps, scratch);
      // Four elements computed before any is stored: out may alias the
      // inputs for the compiler, which would otherwise wait on each load.
      constexpr int kInFlight = 4;
      const int64_t step = group.width();
      int64_t d = group.lane();
      for (; d + (kInFlight - 1) * step < features; d += kInFlight * step) {
        T y[kInFlight];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          y[u] = from_float<T>(layer_norm_row_value(stats, weight, bias, d + u * step));
        }
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) out[offset + d + u * step] = y[u];
      }
      for (; d < features; d += step) {
        out[offset + d] = from_float<T>(layer_norm_row_value(stats, weight, bias, d));
      }
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
  const RowLaunch geometry = row_launch(rows, features);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const auto run = [&](auto kernel) {
      kernel<<<geometry.blocks, geometry.threads, 0, current_stream()>>>(
          static_cast<const T*>(x.raw_data()), data_or_null<T>(residual), alpha,
          data_or_null<T>(weight), data_or_null<T>(bias), eps,
          sum.defined() ? static_cast<T*>(sum.raw_data()) : nullptr,
          static_cast<T*>(out.raw_data()), rows, features);
    };
    switch (geometry.mode) {
      case RowMode::kWarpRegisters:
        run(layer_norm_kernel<T, kFusedAdd, RowMode::kWarpRegisters>);
        break;
      case RowMode::kWarp:
        run(layer_norm_kernel<T, kFusedAdd, RowMode::kWarp>);
        break;
      case RowMode::kBlock:
        run(layer_norm_kernel<T, kFusedAdd, RowMode::kBlock>);
        break;
    }
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
