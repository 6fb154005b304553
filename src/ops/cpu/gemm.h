// CPU bodies of ops/gemm.h: row-major, contiguous float32 buffers.
//
// Summation order (the definition every body follows; the AVX2 body and the
// scalar one return the same bits, tests/unit/test_cpu_simd_ops.cc): each
// output starts at +0 and takes c = fma(a[m, k], b[k, n], c) for k = 0, 1,
// ..., K - 1 in order, one correctly rounded fma per term; then, where there
// is a bias, y = c + bias[n] (one float32 addition, so the bias never enters
// the sum). An output's bits therefore depend on its row of a, its column of
// b and K alone -- never on M, N, the blocking or the thread count -- which
// is what batch invariance needs (ASREngine: an utterance's result does not
// depend on its neighbours or its padding). OpenBLAS's sgemm, which served
// here before, changes its K blocking with K and its kernel with M * N * K,
// so a row's bits moved with the batch. Keys past an utterance's length
// enter a probs x values product as fma(+0, v, c) = c, so a padded key axis
// leaves the valid rows' bits as they are.
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

// One product in the order above with leading dimensions: c[m, n] (ldc) =
// a[m, k] (lda) x b, b read as [K, N] (ldb) or, when transpose_b, [N, K]
// (ldb). K = 0 writes zeros. `parallel` splits the work over the worker
// pool (ops/cpu_threads.h); a caller already inside a pool task passes false.
void gemm_f32(const float* a, int64_t lda, const float* b, int64_t ldb, bool transpose_b, float* c,
              int64_t ldc, int64_t m, int64_t n, int64_t k, bool parallel = true);

// The layout gemm_f32 packs b into, for a caller that can write it directly
// (the convolution's im2col): panel i holds columns [i * kGemmPanelColumns,
// (i + 1) * kGemmPanelColumns) of b as [K][kGemmPanelColumns], zeros past N;
// panels follow each other.
inline constexpr int64_t kGemmPanelColumns = 16;
inline int64_t gemm_packed_b_floats(int64_t n, int64_t k) {
  return (n + kGemmPanelColumns - 1) / kGemmPanelColumns * k * kGemmPanelColumns;
}
// gemm_f32 with b given in that layout (same order, same bits; parallel).
void gemm_f32_packed_b(const float* a, int64_t lda, const float* packed_b, float* c, int64_t ldc,
                       int64_t m, int64_t n, int64_t k);

}  // namespace oasr::ops::cpu
