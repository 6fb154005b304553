// CUDA body of ops/sequence_mask.h. x and out are contiguous [B, T, C], on
// one CUDA device, of one dtype (float32, float16 or bfloat16); lengths is a
// contiguous int64 [B] on the same device (any values: frame t of row b is
// kept when t < lengths[b], which clamps by itself). Kept frames are copied
// bit for bit and the others are +0, so the result is bit-equal to the CPU
// body's.
#pragma once

#include "core/tensor.h"

namespace oasr::ops::cuda {

void zero_tail_frames(const Tensor& x, const Tensor& lengths, const Tensor& out);

}  // namespace oasr::ops::cuda
