// CPU body of ops/log_softmax.h. x and out are contiguous with the logical
// shape [outer, length, inner]; log-softmax runs along `length` (stride
// `inner`).
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

void log_softmax_f32(const float* x, float* out, int64_t outer, int64_t length, int64_t inner);

}  // namespace oasr::ops::cpu
