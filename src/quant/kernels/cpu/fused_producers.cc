#include "quant/kernels/cpu/fused_producers.h"

#include <vector>

#include "ops/cpu/layer_norm.h"
#include "quant/numerics.h"

namespace oasr::quant::cpu {
namespace {

// One row at a time: the normalized row lives only in a scratch buffer (the
// GPU kernel keeps it in registers), then the per-token rule quantizes it.
template <typename Out, typename QuantizeRow>
void norm_quant_rows(const float* x, const float* weight, const float* bias, int64_t rows,
                     int64_t features, float eps, Out* q, float* scale, QuantizeRow quantize_row) {
  std::vector<float> normalized(static_cast<size_t>(features));
  for (int64_t r = 0; r < rows; ++r) {
    ops::cpu::layer_norm_f32(x + r * features, weight, bias, normalized.data(), 1, features, eps);
    quantize_row(normalized.data(), nullptr, features, q + r * features, scale + r);
  }
}

template <typename Out, typename QuantizeRow>
void add_norm_quant_rows(const float* x, const float* residual, float alpha, const float* weight,
                         const float* bias, int64_t rows, int64_t features, float eps, float* sum,
                         Out* q, float* scale, QuantizeRow quantize_row) {
  std::vector<float> normalized(static_cast<size_t>(features));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = r * features;
    ops::cpu::add_scaled_layer_norm_f32(x + offset, residual + offset, alpha, weight, bias,
                                        sum + offset, normalized.data(), 1, features, eps);
    quantize_row(normalized.data(), nullptr, features, q + offset, scale + r);
  }
}

}  // namespace

void layer_norm_quant_int8(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, int8_t* q, float* scale) {
  norm_quant_rows(x, weight, bias, rows, features, eps, q, scale, quantize_row_dynamic_int8);
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
                      quantize_row_dynamic_int8);
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
  for (int64_t r = 0; r < rows; ++r) quantize_row_static_int8(y + r * n, multiplier, n, q + r * n);
}

void quantize_epilogue_static_e4m3(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   uint8_t* q) {
  for (int64_t r = 0; r < rows; ++r) quantize_row_static_e4m3(y + r * n, multiplier, n, q + r * n);
}

}  // namespace oasr::quant::cpu
