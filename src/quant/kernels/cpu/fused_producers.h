// CPU reference bodies of the fused quantize producers (spec "Fewer quantize
// launches"): the contract the GPU kernels match. Each is the unfused pair
// written as one pass over a row, built from the very row functions the
// unfused path runs (ops/cpu/layer_norm's normalisation, numerics.h's
// quantize rules), so it is bit-identical to that pair by construction.
//
// Rows are contiguous float32 of `features` (or `n`) values; weight / bias
// may be null (then 1 and 0). On the CPU the served dtype is float32, so the
// normalized value / the GEMM epilogue result is quantized as computed; a
// GPU body rounds it to the served dtype first (what the unfused pair's
// intermediate tensor holds), then quantizes.
#pragma once

#include <cstdint>

namespace oasr::quant::cpu {

// layer_norm_quant: q, scale = quantize_per_token(layer_norm(x)) (no smoother).
void layer_norm_quant_int8(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, int8_t* q, float* scale);
void layer_norm_quant_e4m3(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, uint8_t* q, float* scale);

// add_layer_norm_residual_quant: sum = residual + alpha * x (the new residual
// stream, returned in full precision), q, scale = quantize_per_token(layer_norm(sum)).
void add_layer_norm_residual_quant_int8(const float* x, const float* residual, float alpha,
                                        const float* weight, const float* bias, int64_t rows,
                                        int64_t features, float eps, float* sum, int8_t* q,
                                        float* scale);
void add_layer_norm_residual_quant_e4m3(const float* x, const float* residual, float alpha,
                                        const float* weight, const float* bias, int64_t rows,
                                        int64_t features, float eps, float* sum, uint8_t* q,
                                        float* scale);

// The tail of scaled_mm_quant's epilogue: y [rows, n] holds act(a_scale *
// w_scale * acc + bias) (already in the served dtype's values); each element
// is multiplied by the consumer's static multiplier m_j = smooth_inv_j *
// (1 / input_scale) and quantized, so the consumer's input never exists in
// full precision. Same rule as the consumer's own static quantize.
void quantize_epilogue_static_int8(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   int8_t* q);
void quantize_epilogue_static_e4m3(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   uint8_t* q);

}  // namespace oasr::quant::cpu
