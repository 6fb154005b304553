// The host gather of a quantized convolution's int8 patches
// (quant/kernels/im2col_geometry.h), from a float32 x [batch, channels,
// height, width]: the same bytes as gathering float32 patches and quantizing
// them with quantize_row_static_int8 at the uniform multiplier.
#pragma once

#include <cstdint>

#include "quant/kernels/im2col_geometry.h"

namespace oasr::quant::cpu {

// patches: [batch * out_h * out_w, kernel_h * kernel_w * channels] int8.
// Rows over the worker pool (ops/cpu_threads.h); AVX2 where the CPU has it.
void im2col_quantize_int8(const float* x, const Im2colGeometry& geometry, float multiplier,
                          int8_t* patches);

}  // namespace oasr::quant::cpu
