// layer_norm_quant and add_layer_norm_residual_quant (quantize_cuda.h): the
// CUDA LayerNorm's own row code (ops/cuda/layer_norm_row.cuh) with its launch
// geometry, so mean, rstd and every y_d have ops::cuda::layer_norm's bits,
// followed by quantize_per_token of y_d rounded to the served dtype. y_d is
// recomputed in the quantize pass rather than kept: the same operations on
// the same inputs give the same bits, and nothing is staged in memory.
#include "ops/cuda/layer_norm_row.cuh"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/kernels/cuda/quantize_device.cuh"

namespace oasr::quant::cuda {
namespace {

using ops::cuda::from_float;
using ops::cuda::to_float;

// ops/cuda/layer_norm.cu's layer_norm_kernel geometry (row_launch): a warp
// or a block per row, striding over the rows.
template <typename T, bool kFusedAdd, bool kE4m3, ops::cuda::RowMode kMode>
__global__ void layer_norm_quant_kernel(const T* x, const T* residual, float alpha, const T* weight,
                                        const T* bias, float eps, T* sum, uint8_t* q, float* scale,
                                        int64_t rows, int64_t features) {
  using Format = Format8<kE4m3>;
  using ops::cuda::RowMode;
  __shared__ float scratch[32];
  const ops::cuda::RowGroup<kMode != RowMode::kBlock> group;
  for (int64_t row = group.first_row(); row < rows; row += group.row_step()) {
    const int64_t offset = row * features;
    if constexpr (kMode == RowMode::kWarpRegisters) {
      constexpr int kValues = ops::cuda::kRegisterValues;
      const ops::cuda::RegisterRow values = ops::cuda::layer_norm_register_row<T, kFusedAdd>(
          x, residual, alpha, sum, offset, features, eps);
      // The value the unfused pair's normalized tensor holds: y_d rounded to T.
      const int64_t first = ops::cuda::register_row_first();
      const int here = ops::cuda::register_row_count(features);
      float served[kValues];
      float amax = 0.0f;
#pragma unroll
      for (int j = 0; j < kValues; ++j) {
        served[j] = 0.0f;
        if (j < here) {
          served[j] = to_float(
              from_float<T>(ops::cuda::register_row_value(values, weight, bias, j, first + j)));
          amax = amax_step(amax, act::detail::abs_f32(served[j]));
        }
      }
      amax = floor_amax(group.reduce(amax, AmaxOp{}, 0.0f, scratch));
      const float multiplier = act::detail::div_rn(Format::kMax, amax);
      uint8_t codes[kValues];
#pragma unroll
      for (int j = 0; j < kValues; ++j) {
        codes[j] = Format::quantize(act::detail::mul_rn(served[j], multiplier));
      }
      if (here == kValues) {
        ops::cuda::store_register_values(q + offset + first, codes);
      } else {
        for (int j = 0; j < here; ++j) q[offset + first + j] = codes[j];
      }
      if (group.lane() == 0) scale[row] = act::detail::div_rn(amax, Format::kMax);
    } else {
      const ops::cuda::LayerNormRow<T> stats = ops::cuda::layer_norm_row_stats<T, kFusedAdd>(
          group, x, residual, alpha, sum, offset, features, eps, scratch);
      // The value the unfused pair's normalized tensor holds: y_d rounded to T.
      auto served = [&](int64_t d) {
        return to_float(from_float<T>(ops::cuda::layer_norm_row_value(stats, weight, bias, d)));
      };
      float amax = 0.0f;
      for (int64_t d = group.lane(); d < features; d += group.width()) {
        amax = amax_step(amax, act::detail::abs_f32(served(d)));
      }
      amax = floor_amax(group.reduce(amax, AmaxOp{}, 0.0f, scratch));
      const float multiplier = act::detail::div_rn(Format::kMax, amax);
      for (int64_t d = group.lane(); d < features; d += group.width()) {
        q[offset + d] = Format::quantize(act::detail::mul_rn(served(d), multiplier));
      }
      if (group.lane() == 0) scale[row] = act::detail::div_rn(amax, Format::kMax);
    }
  }
}

template <bool kFusedAdd>
void launch(const char* op, QDType format, const void* x, const void* residual, float alpha,
            const void* weight, const void* bias, DType dtype, int64_t rows, int64_t features,
            float eps, void* sum, void* q, float* scale, int device_index) {
  OASR_CHECK(rows >= 0 && features >= 0, kInvalidArgument, op,
             ": rows and features must be >= 0, got rows=", rows, " features=", features);
  // Like ops::cuda::layer_norm, an empty tensor is no work (and no scales).
  if (rows == 0 || features == 0) return;
  OASR_CHECK(x != nullptr && q != nullptr && scale != nullptr, kInvalidArgument, op,
             ": x, q and scale must be device pointers, got a null one");
  if constexpr (kFusedAdd) {
    OASR_CHECK(residual != nullptr && sum != nullptr, kInvalidArgument, op,
               ": residual and sum must be device pointers, got a null one");
  }
  ops::cuda::use_device(device_index);
  dispatch_format(format, op, [&](auto is_e4m3) {
    constexpr bool kE4m3 = decltype(is_e4m3)::value;
    ops::cuda::dispatch_float(dtype, op, [&](auto tag) {
      using T = decltype(tag);
      const ops::cuda::RowLaunch geometry = ops::cuda::row_launch(rows, features);
      const auto run = [&](auto kernel) {
        kernel<<<geometry.blocks, geometry.threads, 0, ops::cuda::current_stream()>>>(
            static_cast<const T*>(x), static_cast<const T*>(residual), alpha,
            static_cast<const T*>(weight), static_cast<const T*>(bias), eps, static_cast<T*>(sum),
            static_cast<uint8_t*>(q), scale, rows, features);
      };
      using ops::cuda::RowMode;
      switch (geometry.mode) {
        case RowMode::kWarpRegisters:
          run(layer_norm_quant_kernel<T, kFusedAdd, kE4m3, RowMode::kWarpRegisters>);
          break;
        case RowMode::kWarp:
          run(layer_norm_quant_kernel<T, kFusedAdd, kE4m3, RowMode::kWarp>);
          break;
        case RowMode::kBlock:
          run(layer_norm_quant_kernel<T, kFusedAdd, kE4m3, RowMode::kBlock>);
          break;
      }
    });
  });
  ops::cuda::check_launch(op);
}

}  // namespace

void layer_norm_quant(QDType format, const void* x, const void* weight, const void* bias,
                      DType dtype, int64_t rows, int64_t features, float eps, void* q, float* scale,
                      int device_index) {
  launch<false>("layer_norm_quant", format, x, nullptr, 1.0f, weight, bias, dtype, rows, features,
                eps, nullptr, q, scale, device_index);
}

void add_layer_norm_residual_quant(QDType format, const void* x, const void* residual, float alpha,
                                   const void* weight, const void* bias, DType dtype, int64_t rows,
                                   int64_t features, float eps, void* sum, void* q, float* scale,
                                   int device_index) {
  launch<true>("add_layer_norm_residual_quant", format, x, residual, alpha, weight, bias, dtype,
               rows, features, eps, sum, q, scale, device_index);
}

}  // namespace oasr::quant::cuda
