// The row math of the CUDA LayerNorm (ops/cuda/layer_norm.h documents it),
// as device functions shared by ops/cuda/layer_norm.cu and the fused
// quantize producers (quant/kernels/cuda/norm_quant.cu): both run this very
// code with the same launch geometry (row_launch below), so the reductions
// sum in the same order and the fused producers see the same mean, rstd and
// y_d bits as ops::cuda::layer_norm.
//
// Rows of at most kWarpRowFeatures features take one warp each, several rows
// per block, reduced with warp shuffles alone (no barriers: a block per row
// of 256 features left the GPU waiting on __syncthreads); wider rows take a
// block each. Either way a row's reduction order depends on its width only.
#pragma once

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {

inline constexpr int64_t kWarpRowFeatures = 1024;
inline constexpr int kWarpRowsPerBlock = 8;

// The threads that share one row: a warp (kWarpRows) or the whole block.
template <bool kWarpRows>
struct RowGroup {
  __device__ int lane() const {
    return kWarpRows ? static_cast<int>(threadIdx.x & 31u) : static_cast<int>(threadIdx.x);
  }
  __device__ int width() const { return kWarpRows ? 32 : static_cast<int>(blockDim.x); }
  // This thread's first row and the step between its rows.
  __device__ int64_t first_row() const {
    return kWarpRows ? static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5)
                     : static_cast<int64_t>(blockIdx.x);
  }
  __device__ int64_t row_step() const {
    return kWarpRows ? static_cast<int64_t>(gridDim.x) * kWarpRowsPerBlock
                     : static_cast<int64_t>(gridDim.x);
  }
  // Every thread of the group gets the result; `scratch` is 32 floats of
  // shared memory (unused by warp rows).
  template <typename Op>
  __device__ float reduce(float value, Op op, float identity, float* scratch) const {
    if constexpr (kWarpRows) {
      (void)identity;
      (void)scratch;
      return warp_reduce(value, op);
    } else {
      return block_reduce(value, op, identity, scratch);
    }
  }
};

// Warp rows of at most kRegisterRowFeatures features keep each lane's values
// in registers (kRegisterValues contiguous ones per lane, see RegisterRow),
// so the row is read from memory once instead of three times. Their sums run
// in that lane order, so their bits are their own (not the warp path's):
// the mode, and with it the order, follows from the width alone.
inline constexpr int kRegisterValues = 8;
inline constexpr int64_t kRegisterRowFeatures = 32 * kRegisterValues;

enum class RowMode { kBlock, kWarp, kWarpRegisters };

// The launch both kernels use for `rows` rows of `features`.
struct RowLaunch {
  unsigned int blocks;
  int threads;
  RowMode mode;
};
inline RowLaunch row_launch(int64_t rows, int64_t features) {
  if (features <= kWarpRowFeatures) {
    return {grid_for_rows((rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock),
            32 * kWarpRowsPerBlock,
            features <= kRegisterRowFeatures ? RowMode::kWarpRegisters : RowMode::kWarp};
  }
  return {grid_for_rows(rows), threads_for_row(features), RowMode::kBlock};
}

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
// of the group must call it (`scratch` is 32 floats of shared memory).
template <typename T, bool kFusedAdd, bool kWarpRows>
__device__ __forceinline__ LayerNormRow<T> layer_norm_row_stats(RowGroup<kWarpRows> group,
                                                                const T* x, const T* residual,
                                                                float alpha, T* sum, int64_t offset,
                                                                int64_t features, float eps,
                                                                float* scratch) {
  const float count = static_cast<float>(features);
  const T* values = x + offset;
  if constexpr (kWarpRows) {
    // A lane's elements d = lane + 32 i, loaded together before the sums use
    // them (and kept for the squares): at a decoder step's few rows each
    // warp's chain of dependent loads, not bandwidth, bounded the kernel
    // (12.9 us for 16 x 384 on an H100). The sums run in the same order.
    constexpr int kPerLane = static_cast<int>(kWarpRowFeatures / 32);
    const int lane = group.lane();
    float v[kPerLane];
    float r[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      v[i] = d < features ? to_float(x[offset + d]) : 0.0f;
      if constexpr (kFusedAdd) r[i] = d < features ? to_float(residual[offset + d]) : 0.0f;
    }
    float partial = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d >= features) break;
      if constexpr (kFusedAdd) {
        const T rounded = from_float<T>(__fadd_rn(r[i], __fmul_rn(alpha, v[i])));
        sum[offset + d] = rounded;
        v[i] = to_float(rounded);
      }
      partial = __fadd_rn(partial, v[i]);
    }
    if constexpr (kFusedAdd) values = sum + offset;
    const float mean = __fdiv_rn(group.reduce(partial, SumOp{}, 0.0f, scratch), count);
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (lane + 32 * i >= features) break;
      const float centered = __fsub_rn(v[i], mean);
      squares = __fadd_rn(squares, __fmul_rn(centered, centered));
    }
    const float variance = __fdiv_rn(group.reduce(squares, SumOp{}, 0.0f, scratch), count);
    const float rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
    return {values, mean, rstd};
  }
  float partial = 0.0f;
  if constexpr (kFusedAdd) {
    for (int64_t d = group.lane(); d < features; d += group.width()) {
      const float scaled = __fmul_rn(alpha, to_float(x[offset + d]));
      const T rounded = from_float<T>(__fadd_rn(to_float(residual[offset + d]), scaled));
      sum[offset + d] = rounded;
      partial = __fadd_rn(partial, to_float(rounded));
    }
    values = sum + offset;
  } else {
    for (int64_t d = group.lane(); d < features; d += group.width()) {
      partial = __fadd_rn(partial, to_float(values[d]));
    }
  }
  const float mean = __fdiv_rn(group.reduce(partial, SumOp{}, 0.0f, scratch), count);

  float squares = 0.0f;
  for (int64_t d = group.lane(); d < features; d += group.width()) {
    const float centered = __fsub_rn(to_float(values[d]), mean);
    squares = __fadd_rn(squares, __fmul_rn(centered, centered));
  }
  const float variance = __fdiv_rn(group.reduce(squares, SumOp{}, 0.0f, scratch), count);
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

// The register form of a warp row: lane l holds the kRegisterValues
// contiguous elements l * kRegisterValues + j (0 past the row's end), so a
// lane moves them with one 16-byte access for 16-bit types where the
// address allows it (the same elements either way: the bits never depend on
// alignment). Each lane sums its elements in order, then the warp reduces
// the lane sums by shuffles. (Element lane + 32 j, the warp path's order,
// made every access a 2-byte one: the normalization ran at ~1.4 TB/s.)
struct RegisterRow {
  float v[kRegisterValues];
  float mean;
  float rstd;
};

// This lane's first element and how many of its elements lie in the row.
__device__ __forceinline__ int64_t register_row_first() {
  return static_cast<int64_t>(threadIdx.x & 31u) * kRegisterValues;
}
__device__ __forceinline__ int register_row_count(int64_t features) {
  const int64_t left = features - register_row_first();
  return left <= 0 ? 0 : (left >= kRegisterValues ? kRegisterValues : static_cast<int>(left));
}

// kRegisterValues elements of T at p as float32 (all in range).
template <typename T>
__device__ __forceinline__ void load_register_values(const T* p, float (&v)[kRegisterValues]) {
  if constexpr (sizeof(T) * kRegisterValues == 16) {
    if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      T e[kRegisterValues];
      memcpy(e, &raw, sizeof(raw));
#pragma unroll
      for (int j = 0; j < kRegisterValues; ++j) v[j] = to_float(e[j]);
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < kRegisterValues; ++j) v[j] = to_float(p[j]);
}

// Stores kRegisterValues values of T (or bytes) at p (all in range).
template <typename T>
__device__ __forceinline__ void store_register_values(T* p, const T (&v)[kRegisterValues]) {
  if constexpr (sizeof(T) * kRegisterValues == 16) {
    if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
      uint4 raw;  // memcpy: v itself need not be 16-byte aligned
      memcpy(&raw, v, sizeof(raw));
      *reinterpret_cast<uint4*>(p) = raw;
      return;
    }
  } else if constexpr (sizeof(T) * kRegisterValues == 8) {
    if ((reinterpret_cast<uintptr_t>(p) & 7u) == 0) {
      uint2 raw;
      memcpy(&raw, v, sizeof(raw));
      *reinterpret_cast<uint2*>(p) = raw;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < kRegisterValues; ++j) p[j] = v[j];
}

template <typename T, bool kFusedAdd>
__device__ __forceinline__ RegisterRow layer_norm_register_row(const T* x, const T* residual,
                                                               float alpha, T* sum, int64_t offset,
                                                               int64_t features, float eps) {
  const float count = static_cast<float>(features);
  const int64_t first = offset + register_row_first();
  const int here = register_row_count(features);
  RegisterRow row;
#pragma unroll
  for (int j = 0; j < kRegisterValues; ++j) row.v[j] = 0.0f;
  if (here == kRegisterValues) {
    load_register_values(x + first, row.v);
    if constexpr (kFusedAdd) {
      float r[kRegisterValues];
      load_register_values(residual + first, r);
      T rounded[kRegisterValues];
#pragma unroll
      for (int j = 0; j < kRegisterValues; ++j) {
        rounded[j] = from_float<T>(__fadd_rn(r[j], __fmul_rn(alpha, row.v[j])));
        row.v[j] = to_float(rounded[j]);
      }
      store_register_values(sum + first, rounded);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kRegisterValues; ++j) {
      if (j >= here) continue;
      if constexpr (kFusedAdd) {
        const float scaled = __fmul_rn(alpha, to_float(x[first + j]));
        const T rounded = from_float<T>(__fadd_rn(to_float(residual[first + j]), scaled));
        sum[first + j] = rounded;
        row.v[j] = to_float(rounded);
      } else {
        row.v[j] = to_float(x[first + j]);
      }
    }
  }
  float partial = 0.0f;
#pragma unroll
  for (int j = 0; j < kRegisterValues; ++j) {
    if (j < here) partial = __fadd_rn(partial, row.v[j]);
  }
  row.mean = __fdiv_rn(warp_reduce(partial, SumOp{}), count);
  float squares = 0.0f;
#pragma unroll
  for (int j = 0; j < kRegisterValues; ++j) {
    if (j < here) {
      const float centered = __fsub_rn(row.v[j], row.mean);
      squares = __fadd_rn(squares, __fmul_rn(centered, centered));
    }
  }
  const float variance = __fdiv_rn(warp_reduce(squares, SumOp{}), count);
  row.rstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  return row;
}

// layer_norm_row_value for this lane's element j (feature d) of a register row.
template <typename T>
__device__ __forceinline__ float register_row_value(const RegisterRow& row, const T* weight,
                                                    const T* bias, int j, int64_t d) {
  float y = __fmul_rn(__fsub_rn(row.v[j], row.mean), row.rstd);
  if (weight != nullptr) y = __fmul_rn(y, to_float(weight[d]));
  if (bias != nullptr) y = __fadd_rn(y, to_float(bias[d]));
  return y;
}

}  // namespace oasr::ops::cuda
