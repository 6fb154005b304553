#include "quant/kernels/cpu/fused_producers.h"

#include <algorithm>
#include <vector>

#include "ops/cpu_threads.h"

#include "ops/cpu/layer_norm.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/numerics.h"

namespace oasr::quant::cpu {
namespace {

// Rows per pool task: the normalized rows live only in a task's scratch
// buffer (the GPU kernel keeps them in registers), then the per-token rule
// quantizes each. Rows are independent, so the split changes no bit.
constexpr int64_t kRowsPerTask = 16;

template <typename Out, typename QuantizeRow>
void norm_quant_rows(const float* x, const float* weight, const float* bias, int64_t rows,
                     int64_t features, float eps, Out* q, float* scale, QuantizeRow quantize_row) {
  ops::for_row_chunks(
      rows, features, kRowsPerTask, /*parallel=*/true, [&](int64_t begin, int64_t count) {
        std::vector<float> normalized(static_cast<size_t>(count * features));
        ops::cpu::layer_norm_f32(x + begin * features, weight, bias, normalized.data(), count,
                                 features, eps, /*parallel=*/false);
        for (int64_t r = 0; r < count; ++r) {
          quantize_row(normalized.data() + r * features, nullptr, features,
                       q + (begin + r) * features, scale + begin + r);
        }
      });
}

template <typename Out, typename QuantizeRow>
void add_norm_quant_rows(const float* x, const float* residual, float alpha, const float* weight,
                         const float* bias, int64_t rows, int64_t features, float eps, float* sum,
                         Out* q, float* scale, QuantizeRow quantize_row) {
  ops::for_row_chunks(
      rows, features, kRowsPerTask, /*parallel=*/true, [&](int64_t begin, int64_t count) {
        std::vector<float> normalized(static_cast<size_t>(count * features));
        const int64_t offset = begin * features;
        ops::cpu::add_scaled_layer_norm_f32(x + offset, residual + offset, alpha, weight, bias,
                                            sum + offset, normalized.data(), count, features, eps,
                                            /*parallel=*/false);
        for (int64_t r = 0; r < count; ++r) {
          quantize_row(normalized.data() + r * features, nullptr, features,
                       q + offset + r * features, scale + begin + r);
        }
      });
}

// The per-token int8 rule on one row: the AVX2 body where the CPU has it
// (the same bits, tests/quant/test_avx2_quantize.cc).
using Int8RowQuantizer = void (*)(const float*, const float*, int64_t, int8_t*, float*);
Int8RowQuantizer int8_row_quantizer() {
  return cpu_has_avx2() ? quantize_row_per_token_int8_avx2 : quantize_row_dynamic_int8;
}

}  // namespace

void layer_norm_quant_int8(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, int8_t* q, float* scale) {
  norm_quant_rows(x, weight, bias, rows, features, eps, q, scale, int8_row_quantizer());
}

void layer_norm_quant_e4m3(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, uint8_t* q, float* scale) {
  norm_quant_rows(x, weight, bias, rows, features, eps, q, scale, quantize_row_dynamic_e4m3);
}

void add_layer_norm_residual_quant_int8(const float* x, const float* residual, float alpha,
                                        const float* weight, const float* bias, int64_t rows,
                                        int64_t features, float eps, float* sum, int8_t* q,
                                        float* scale) {
  add_norm_quant_rows(x, residual, alpha, weight, bias, rows, features, eps, sum, q, scale,
                      int8_row_quantizer());
}

void add_layer_norm_residual_quant_e4m3(const float* x, const float* residual, float alpha,
                                        const float* weight, const float* bias, int64_t rows,
                                        int64_t features, float eps, float* sum, uint8_t* q,
                                        float* scale) {
  add_norm_quant_rows(x, residual, alpha, weight, bias, rows, features, eps, sum, q, scale,
                      quantize_row_dynamic_e4m3);
}

void quantize_epilogue_static_int8(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   int8_t* q) {
  if (cpu_has_avx2()) {  // the same rule, eight lanes at a time over the pool
    quantize_static_int8_avx2(y, multiplier, rows, n, q);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) quantize_row_static_int8(y + r * n, multiplier, n, q + r * n);
}

void quantize_epilogue_static_e4m3(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   uint8_t* q) {
  for (int64_t r = 0; r < rows; ++r) quantize_row_static_e4m3(y + r * n, multiplier, n, q + r * n);
}

}  // namespace oasr::quant::cpu
