// CPU body of ops/activation.h.
#pragma once

#include <cstdint>

#include "core/activations.h"

namespace oasr::ops::cpu {

// out[i] = act::apply(activation, x[i]) for i < n; out may be x (in place).
// Bitwise equal to calling core/activations.h element by element.
void activation_f32(const float* x, float* out, int64_t n, Activation activation);

}  // namespace oasr::ops::cpu
