#include "ops/cpu/depthwise_conv1d.h"

#include <algorithm>

namespace oasr::ops::cpu {

void depthwise_conv1d_f32(const float* x, const float* weight, const float* bias, float* out,
                          int64_t batch, int64_t channels, int64_t length, int64_t kernel,
                          int64_t pad_left, int64_t out_length) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* signal = x + (b * channels + c) * length;
      const float* taps = weight + c * kernel;
      float* y = out + (b * channels + c) * out_length;
      std::fill(y, y + out_length, 0.0f);
      // Tap k outermost, time innermost: every output still receives its
      // taps in increasing k (the documented order), and the inner loop
      // runs over contiguous memory. Tap k reads x[t + k - pad_left], which
      // lies inside x for t in [t_begin, t_end).
      for (int64_t k = 0; k < kernel; ++k) {
        const float w = taps[k];
        const int64_t shift = k - pad_left;
        const int64_t t_begin = std::max<int64_t>(0, -shift);
        const int64_t t_end = std::min<int64_t>(out_length, length - shift);
        for (int64_t t = t_begin; t < t_end; ++t) {
          const float product = w * signal[t + shift];
          y[t] = y[t] + product;
        }
      }
      if (bias != nullptr) {
        for (int64_t t = 0; t < out_length; ++t) y[t] = y[t] + bias[c];
      }
    }
  }
}

}  // namespace oasr::ops::cpu
