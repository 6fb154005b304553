// Depthwise 2-d convolution (nn.Conv2d with groups = in = out channels,
// dilation 1) over NCHW tensors with symmetric zero padding: the depthwise
// stages of NeMo's dw_striding subsampling (FastConformer). float32 on the
// CPU; float32, float16 or bfloat16 on CUDA (all arguments one dtype, one
// device).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

struct DepthwiseConv2dOptions {
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t padding_h = 0;  // zeros above and below
  int64_t padding_w = 0;  // zeros left and right
};

// x [N, C, H, W], weight [C, 1, KH, KW], bias [C] or undefined ->
// [N, C, Hout, Wout], Hout = (H + 2 padding_h - KH) / stride_h + 1 (likewise
// Wout). Each output sums weight[c, 0, i, j] * x[n, c, oh*sh + i - ph,
// ow*sw + j - pw] over taps (i, j) in row-major order from +0.0f, products
// and sums separately rounded to float32 (no fma), taps on the padding
// skipped, then adds the bias: every body (CPU, CUDA) gives the same float32
// bits. A kernel larger than the padded input is refused.
Tensor depthwise_conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const DepthwiseConv2dOptions& options = {});

}  // namespace oasr::ops
