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

}  // namespace oasr::ops::cuda
