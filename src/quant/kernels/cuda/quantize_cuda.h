// The CUDA quantize kernels (quant/numerics.h rules), on device pointers,
// ordered on ops::cuda::current_stream(). Inputs are in the served dtype
// (float32, float16 or bfloat16): widening to fp32 is exact, so quantizing
// from it gives the CPU reference's bits for the same values. Outputs:
// int8 or float8_e4m3fn bits ([rows, K]) and fp32 per-row scales.
// Host-only header.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "quant/format.h"
#include "quant/kernels/im2col_geometry.h"

namespace oasr::quant::cuda {

// Per-token dynamic quantization of x [m, k] (smooth_inv fp32 [k] or null):
// q [m, k], scale [m] (quantize_row_dynamic_int8 / _e4m3 per row).
void quantize_per_token(QDType format, const void* x, DType x_dtype, const float* smooth_inv,
                        int64_t m, int64_t k, void* q, float* scale, int device_index);

// Static quantization with the per-channel multiplier fp32 [k]
// (static_multiplier(input_scale, smooth_inv_j)): q [m, k].
void quantize_static(QDType format, const void* x, DType x_dtype, const float* multiplier,
                     int64_t m, int64_t k, void* q, int device_index);

// The fused norm producers, bit-identical to ops::cuda::layer_norm /
// add_scaled_layer_norm (output rounded to `dtype`) followed by
// quantize_per_token of that rounded output (no smoother). x, residual, sum,
// weight and bias are of `dtype`; weight / bias may be null (1 and 0).
void layer_norm_quant(QDType format, const void* x, const void* weight, const void* bias,
                      DType dtype, int64_t rows, int64_t features, float eps, void* q, float* scale,
                      int device_index);
void add_layer_norm_residual_quant(QDType format, const void* x, const void* residual, float alpha,
                                   const void* weight, const void* bias, DType dtype, int64_t rows,
                                   int64_t features, float eps, void* sum, void* q, float* scale,
                                   int device_index);

// A quantized convolution's patches (quant/kernels/im2col_geometry.h) from x
// of x_dtype.
using quant::Im2colGeometry;
void im2col_quantize_int8(const void* x, DType x_dtype, const Im2colGeometry& geometry,
                          float multiplier, int8_t* patches, int device_index);

}  // namespace oasr::quant::cuda
