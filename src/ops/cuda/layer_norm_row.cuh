// The row math of the CUDA LayerNorm (ops/cuda/layer_norm.h documents it),
// as device functions shared by ops/cuda/layer_norm.cu and the fused
// quantize producers (quant/kernels/cuda/norm_quant.cu): both run this very
// code with the same launch geometry (grid_for_rows / threads_for_row), so
// the block reductions sum in the same order and the fused producers see the
// same mean, rstd and y_d bits as ops::cuda::layer_norm.
#pragma once

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {

// One row's normalization: the values normalized (x, or the residual sum as
// stored) with their mean and 1 / sqrt(var + eps).
template <typename T>
struct LayerNormRow {
  const T* values;
  float mean;
  float rstd;
};

// The statistics of the row at `offset`. With kFusedAdd it first forms
// sum_d = residual_d + alpha * x_d, stores it rounded to T and normalizes
// what it stored; each thread rereads only the elements it wrote itself, so
// no barrier is needed between the store and the later passes. Every thread
// of the block must call it (block reductions; `scratch` is 32 floats of
// shared memory).
template <typename T, bool kFusedAdd>
__device__ __forceinline__ LayerNormRow<T> layer_norm_row_stats(const T* x, const T* residual,
                                                                float alpha, T* sum, int64_t offset,
                                                                int64_t features, float eps,
                                                                float* scratch) {
  const float count = static_cast<float>(features);
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
  return {values, mean, rstd};
}

// y_d = ((v_d - mean) * rstd) * w_d + b_d in float32, each operation rounded;
// the caller rounds it once to T. weight / bias null = 1 / 0.
template <typename T>
__device__ __forceinline__ float layer_norm_row_value(const LayerNormRow<T>& row, const T* weight,
                                                      const T* bias, int64_t d) {
  float y = __fmul_rn(__fsub_rn(to_float(row.values[d]), row.mean), row.rstd);
  if (weight != nullptr) y = __fmul_rn(y, to_float(weight[d]));
  if (bias != nullptr) y = __fadd_rn(y, to_float(bias[d]));
  return y;
}

}  // namespace oasr::ops::cuda
