// CUDA bodies of ops/kv_fp8.h: one thread per vector, the same conversions
// as the CPU body (core/float_types.h), so both give the same bits.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void quantize_pow2_e4m3(const Tensor& x, const Tensor& codes, const Tensor& scales);
// x contiguous [R, n, H, D]; codes / scales views whose rows (stride(0)) may
// be strided, each row's n * H vectors contiguous.
void quantize_pow2_e4m3_rows(const Tensor& x, const Tensor& codes, const Tensor& scales);
// The same into a whole store [R, capacity, H, D] / [R, capacity, H, 1],
// from token past_tokens[0] (an int32 read on the device) on.
void quantize_pow2_e4m3_rows_at(const Tensor& x, const Tensor& codes, const Tensor& scales,
                                const Tensor& past_tokens);
void dequantize_pow2_e4m3(const Tensor& codes, const Tensor& scales, const Tensor& out);

}  // namespace oasr::ops::cuda
