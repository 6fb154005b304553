// The geometry of a quantized convolution's patches, shared by the host and
// device gathers (quant/kernels/cpu/im2col_quantize.h,
// quant/kernels/cuda/quantize_cuda.h): x [batch, channels, height, width]
// (a Conv1d is height 1) gathered into int8 rows
//   patches[(b * out_h + oy) * out_w + ox, (r * kernel_w + s) * channels + c]
//     = quantize_int8(x[b, c, iy, ix] * multiplier),
//   iy = oy * stride_h - pad_h + r, ix = ox * stride_w - pad_w + s,
// zero in the padding (a zero quantizes to zero, so gathering and
// quantizing commute). KRSC order, the stored weight's.
#pragma once

#include <cstdint>

namespace oasr::quant {

struct Im2colGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t out_h = 0, out_w = 0;
};

}  // namespace oasr::quant
