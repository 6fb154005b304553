// CPU bodies of ops/gemm.h: row-major, contiguous float32 buffers.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// out[r, n] = sum_k x[r, k] * weight[n, k], then + bias[n] when bias is not null.
void linear_f32(const float* x, const float* weight, const float* bias, float* out, int64_t rows,
                int64_t out_features, int64_t in_features);

// For each of `batch` matrices: out[m, n] = sum_k a[m, k] * b[k, n]
// (b[n, k] when transpose_b).
void matmul_f32(const float* a, const float* b, float* out, int64_t batch, int64_t m, int64_t n,
                int64_t k, bool transpose_b);

}  // namespace oasr::ops::cpu
