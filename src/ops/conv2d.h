// 2-d convolution over NCHW tensors (float32 on the CPU; float32, float16 or
// bfloat16 on CUDA), as torch.nn.functional.conv2d with dilation 1 (WeNet's
// Conv2dSubsampling front end and similar).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

struct Conv2dOptions {
  int64_t stride_h = 1;
  int64_t stride_w = 1;
  int64_t padding_h = 0;  // zeros on both the top and the bottom
  int64_t padding_w = 0;  // zeros on both the left and the right
  int64_t groups = 1;     // only 1 is served; other values are refused
};

// x [N, Cin, H, W], weight [Cout, Cin, KH, KW], bias [Cout] or undefined ->
// [N, Cout, Hout, Wout] with Hout = (H + 2 padding_h - KH) / stride_h + 1
// (likewise Wout); a kernel larger than the padded input is refused.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const Conv2dOptions& options = {});

// The same convolution over channels-last tensors, with an optional ReLU:
// x [N, H, W, Cin], weight [Cout, Cin, KH, KW] (PyTorch's layout), bias [Cout]
// or undefined -> [N, Hout, Wout, Cout], max(0, .) applied before the one
// rounding when `relu`. Keeping a stack of convolutions channels-last needs
// no layout copies between them. CUDA only (see ops/cuda/conv2d.h), where
// conv2d_nhwc_served says; refused elsewhere.
bool conv2d_nhwc_served(const Tensor& x, const Tensor& weight);
Tensor conv2d_nhwc(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dOptions& options, bool relu);

// y [N, H, W, C] -> [N, H, C * W], channel-major within each row: what
// flattening the NCHW tensor as x.transpose(1, 2).reshape(N, H, C * W) gives
// (WeNet's subsampling flatten). Any device; exact copies.
Tensor flatten_nhwc_channel_major(const Tensor& y);

}  // namespace oasr::ops
