// The dot products are OpenBLAS's cblas_sgemm: its blocked K summation order
// is fixed for a given library build and thread count, not sequential, so a
// CUDA GEMM is compared with these bodies under a tolerance, never bitwise.
// The bias is added afterwards as one float32 addition per output
// (y = float(dot) + bias), so it never enters a partial sum.
#include "ops/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace oasr::ops::cpu {
namespace {

// cblas takes 32-bit sizes (blasint).
blasint blas_size(int64_t value, const char* op, const char* what) {
  OASR_CHECK(value <= std::numeric_limits<blasint>::max(), kUnsupported, op, ": ", what, " = ",
             value, " exceeds what OpenBLAS's 32-bit interface accepts");
  return static_cast<blasint>(value);
}

}  // namespace

void linear_f32(const float* x, const float* weight, const float* bias, float* out, int64_t rows,
                int64_t out_features, int64_t in_features) {
  if (rows == 0 || out_features == 0) return;
  const blasint m = blas_size(rows, "linear", "rows");
  const blasint n = blas_size(out_features, "linear", "out_features");
  const blasint k = blas_size(in_features, "linear", "in_features");
  if (k == 0) {
    // An empty sum is zero; BLAS would also reject lda = 0.
    std::fill(out, out + rows * out_features, 0.0f);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, weight, k, 0.0f, out,
                n);
  }
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * out_features;
    for (int64_t j = 0; j < out_features; ++j) row[j] = row[j] + bias[j];
  }
}

void matmul_f32(const float* a, const float* b, float* out, int64_t batch, int64_t m, int64_t n,
                int64_t k, bool transpose_b) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(out, out + batch * m * n, 0.0f);
    return;
  }
  const blasint bm = blas_size(m, "matmul", "M");
  const blasint bn = blas_size(n, "matmul", "N");
  const blasint bk = blas_size(k, "matmul", "K");
  for (int64_t i = 0; i < batch; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, bm, bn, bk,
                1.0f, a + i * m * k, bk, b + i * k * n, transpose_b ? bk : bn, 0.0f,
                out + i * m * n, bn);
  }
}

}  // namespace oasr::ops::cpu
