// CPU body of ops/glu.h. x is contiguous [outer, 2 * half, inner]; out is
// contiguous [outer, half, inner].
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// out[o, h, i] = x[o, h, i] * sigmoid(x[o, half + h, i])
void glu_f32(const float* x, float* out, int64_t outer, int64_t half, int64_t inner);

}  // namespace oasr::ops::cpu
