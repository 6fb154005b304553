// Reference arithmetic, per row:
//   m   = max over x_l                  (NaN if any x_l is NaN, as in PyTorch)
//   s   = sum over exp(x_l - m)         each exp in float32, summed in double
//   y_l = float((x_l - m) - log(s))     x_l - m in float32, the rest in double
// The double sum makes the result at least as accurate as PyTorch's float32
// reduction; the two agree within a few float32 ulps of the output.
#include "ops/cpu/log_softmax.h"

#include <cmath>
#include <limits>

namespace oasr::ops::cpu {

void log_softmax_f32(const float* x, float* out, int64_t outer, int64_t length, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * length * inner + i;
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t l = 0; l < length; ++l) {
        const float v = x[base + l * inner];
        if (std::isnan(v) || v > row_max) row_max = v;
        if (std::isnan(row_max)) break;
      }
      // An all -inf row would give (-inf) - (-inf) = NaN below, which is also
      // PyTorch's answer; a +inf maximum likewise yields NaN.
      double total = 0.0;
      for (int64_t l = 0; l < length; ++l) {
        total += static_cast<double>(std::exp(x[base + l * inner] - row_max));
      }
      const double log_total = std::log(total);
      for (int64_t l = 0; l < length; ++l) {
        const int64_t at = base + l * inner;
        const float shifted = x[at] - row_max;
        out[at] = static_cast<float>(static_cast<double>(shifted) - log_total);
      }
    }
  }
}

}  // namespace oasr::ops::cpu
