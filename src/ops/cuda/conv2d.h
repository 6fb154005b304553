// CUDA body of ops/conv2d.h: im2col into [N*Hout*Wout, Cin*KH*KW] in the
// tensor's dtype, the cuBLASLt GEMM of ops/cuda/gemm.h against the weight
// viewed as [Cout, Cin*KH*KW] (bias through its epilogue), then a strided
// copy from [N, Hout*Wout, Cout] into NCHW. Sums accumulate in float32 in
// cuBLASLt's K order and round once to the dtype, so results are compared
// with the CPU body under a tolerance, never bitwise.
#pragma once

#include "core/tensor.h"
#include "ops/cpu/conv2d.h"

namespace oasr::ops::cuda {

// x [N, Cin, H, W], weight [Cout, Cin, KH, KW], bias [Cout] or undefined:
// contiguous tensors of one dtype on one CUDA device; out [N, Cout, Hout,
// Wout] contiguous, allocated by the caller. shape is the front's geometry.
void conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
            const cpu::Conv2dShape& shape);

// Channels-last (ops/conv2d.h's conv2d_nhwc). A patch of at most 32 taps
// (Cin = 1: the first subsampling convolution) runs as one direct kernel: each
// thread sums 8 output channels of one position in float32, in (row, column,
// channel) order, adds the bias, applies the ReLU and rounds once. Wider
// patches (Cin a multiple of 8) gather NHWC columns with 16-byte copies, run
// the cuBLASLt GEMM with its bias epilogue straight into `out` (rows are
// positions, so no layout copy follows) and apply the ReLU in place.
// weight_krsc is [Cout, KH * KW * Cin], out [N, Hout, Wout, Cout].
bool conv2d_nhwc_served(int64_t in_channels, int64_t out_channels, int64_t kernel_h,
                        int64_t kernel_w, DType dtype);
void conv2d_nhwc(const Tensor& x, const Tensor& weight_krsc, const Tensor& bias, const Tensor& out,
                 const cpu::Conv2dShape& shape, bool relu);
// y [N, H, W, C] contiguous -> out [N, H, C * W]: a tiled transpose of each
// [W, C] matrix (W * C < 2^31).
void flatten_channel_major(const Tensor& y, const Tensor& out);

}  // namespace oasr::ops::cuda
