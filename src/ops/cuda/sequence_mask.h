// CUDA body of ops/sequence_mask.h. x and out are contiguous [B, T, C], on
// one CUDA device, of one dtype (float32, float16 or bfloat16); valid has B
// entries in [0, T]. Kept frames are copied bit for bit and the others are
// +0, so the result is bit-equal to the CPU body's.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace oasr::ops::cuda {

void zero_tail_frames(const Tensor& x, std::span<const int64_t> valid, const Tensor& out);

}  // namespace oasr::ops::cuda
