// CPU body of ops/softmax.h. x, keep and out are contiguous with the logical
// shape [outer, length, inner]; softmax runs along `length` (stride `inner`).
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// keep is null (plain softmax) or a uint8 array shaped like x: nonzero keeps
// a position, 0 masks it (probability exactly 0; a row with nothing kept is
// all zeros).
void softmax_f32(const float* x, const uint8_t* keep, float* out, int64_t outer, int64_t length,
                 int64_t inner);

}  // namespace oasr::ops::cpu
