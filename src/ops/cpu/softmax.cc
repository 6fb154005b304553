// Reference arithmetic, per row (the future CUDA body is tested against this
// under a tolerance):
//   m   = max over kept x_l                 (a NaN makes m NaN, as in PyTorch)
//   e_l = exp(x_l - m)                      float32
//   s   = sum over kept e_l                 double, sequential l = 0..L-1
//   p_l = float(e_l / s) for kept l, 0 for masked l
// Subtracting the row maximum keeps exp() in range whatever the offset.
#include "ops/cpu/softmax.h"

#include <cmath>

#include <limits>
#include "core/activations.h"

namespace oasr::ops::cpu {
namespace {

// The shared polynomial exp (core/activations.h): a CUDA body using the same
// function gives the same bits.
inline float softmax_exp(float value) {
  return act::exp_f32(value);
}

}  // namespace

void softmax_f32(const float* x, const uint8_t* keep, float* out, int64_t outer, int64_t length,
                 int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * length * inner + i;
      const auto kept = [&](int64_t l) { return keep == nullptr || keep[base + l * inner] != 0; };

      float row_max = -std::numeric_limits<float>::infinity();
      bool any_kept = false;
      for (int64_t l = 0; l < length; ++l) {
        if (!kept(l)) continue;
        any_kept = true;
        const float v = x[base + l * inner];
        if (std::isnan(v) || v > row_max) row_max = v;
        if (std::isnan(row_max)) break;
      }
      if (!any_kept) {
        for (int64_t l = 0; l < length; ++l) out[base + l * inner] = 0.0f;
        continue;
      }

      double total = 0.0;
      for (int64_t l = 0; l < length; ++l) {
        const int64_t at = base + l * inner;
        if (!kept(l)) {
          out[at] = 0.0f;
          continue;
        }
        const float e = softmax_exp(x[at] - row_max);
        out[at] = e;
        total += static_cast<double>(e);
      }
      for (int64_t l = 0; l < length; ++l) {
        const int64_t at = base + l * inner;
        if (kept(l)) out[at] = static_cast<float>(static_cast<double>(out[at]) / total);
      }
    }
  }
}

}  // namespace oasr::ops::cpu
