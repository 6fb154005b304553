// CPU body of ops/sequence_mask.h.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// x and out are contiguous [batch, frames, channels]; valid[b] is in
// [0, frames]. out = x for frames t < valid[b] of row b, +0 for the rest.
void zero_tail_frames_f32(const float* x, const int64_t* valid, float* out, int64_t batch,
                          int64_t frames, int64_t channels);

}  // namespace oasr::ops::cpu
