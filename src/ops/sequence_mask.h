// Sequence masking for padded batches: frames past each sequence's length are
// zeroed, as WeNet does with masked_fill over padded frames before and after
// each Conformer convolution module.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace oasr::ops {

// x [B, T, C] -> a copy where frame t of row b is exactly zero for
// t >= lengths[b] (each length clamped to [0, T]); lengths.size() must be B.
// When no row has padding (every length >= T) x itself is returned, no copy.
// CPU: float32; CUDA: float32, float16, bfloat16 (kept frames are copied bit
// for bit, so both bodies return identical bits).
Tensor zero_tail_frames(const Tensor& x, std::span<const int64_t> lengths);

// The same with the lengths as an int64 [B] tensor on x's device, read only
// by the device (so a recorded device graph replays it with new lengths);
// always returns a copy, since only the device knows whether a row is padded.
Tensor zero_tail_frames(const Tensor& x, const Tensor& lengths);

}  // namespace oasr::ops
