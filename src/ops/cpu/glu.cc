// Reference arithmetic, float32 throughout: s = 1 / (1 + exp(-b)); out = a * s.
// For b below about -88, exp(-b) overflows to +inf and s is exactly 0, the
// correct limit, so no special case is needed.
#include "ops/cpu/glu.h"

#include "core/activations.h"

namespace oasr::ops::cpu {
namespace {

// The shared sigmoid (core/activations.h), so a CUDA body gives the same bits.
inline float glu_sigmoid(float value) {
  return act::sigmoid(value);
}

}  // namespace

void glu_f32(const float* x, float* out, int64_t outer, int64_t half, int64_t inner) {
  const int64_t half_span = half * inner;
  for (int64_t o = 0; o < outer; ++o) {
    const float* first = x + o * 2 * half_span;
    const float* gate = first + half_span;
    float* dst = out + o * half_span;
    for (int64_t j = 0; j < half_span; ++j) dst[j] = first[j] * glu_sigmoid(gate[j]);
  }
}

}  // namespace oasr::ops::cpu
