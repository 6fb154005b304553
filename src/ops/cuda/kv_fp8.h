// CUDA bodies of ops/kv_fp8.h: one thread per vector, the same conversions
// as the CPU body (core/float_types.h), so both give the same bits.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void quantize_pow2_e4m3(const Tensor& x, const Tensor& codes, const Tensor& scales);
// x contiguous [R, n, H, D]; codes / scales views whose rows (stride(0)) may
// be strided, each row's n * H vectors contiguous.
void quantize_pow2_e4m3_rows(const Tensor& x, const Tensor& codes, const Tensor& scales);
void dequantize_pow2_e4m3(const Tensor& codes, const Tensor& scales, const Tensor& out);

}  // namespace oasr::ops::cuda
