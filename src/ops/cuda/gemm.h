// CUDA bodies of ops/gemm.h through cuBLASLt: row-major, contiguous buffers
// of one dtype (float32, float16 or bfloat16) on one CUDA device. Products
// accumulate in float32 (CUBLAS_COMPUTE_32F, never TF32) with float32
// alpha/beta; the bias is added to the float32 sum by cuBLASLt's bias
// epilogue and the result is rounded once to the dtype. The K summation
// order is cuBLASLt's, so results are compared with the CPU bodies under a
// tolerance, never bitwise.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace oasr::ops::cuda {

// out[r, n] = sum_k x[r, k] * weight[n, k] (+ bias[n] when bias is not null).
// in_features = 0 gives the bias (or zeros); no rows or no outputs do nothing.
// Batch invariant: every row count runs the algorithm cuBLASLt's heuristic
// picks for one canonical row count, with split-K off, so a row's bits do not
// depend on how many rows share the call (unless that algorithm cannot run a
// shape, when the shape's own heuristic choice serves it).
void linear(const void* x, const void* weight, const void* bias, void* out, DType dtype,
            int device_index, int64_t rows, int64_t out_features, int64_t in_features);

// For each of `batch` matrices: out[m, n] = sum_k a[m, k] * b[k, n]
// (b[n, k] when transpose_b). k = 0 gives zeros.
void matmul(const void* a, const void* b, void* out, DType dtype, int device_index, int64_t batch,
            int64_t m, int64_t n, int64_t k, bool transpose_b);

}  // namespace oasr::ops::cuda
