#include "ops/cpu/depthwise_conv1d.h"

#include <algorithm>
#include <vector>

#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#if defined(__x86_64__)
#include <immintrin.h>

#include "core/activations_avx2.h"
#endif

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

namespace {

// The output frames one pool task computes (per batch row).
constexpr int64_t kFramesPerTask = 32;

// The taps of output frame t that land inside x: k in [begin, end).
struct TapRange {
  int64_t begin;
  int64_t end;
};
TapRange taps_inside(int64_t t, int64_t kernel, int64_t pad_left, int64_t length) {
  return {std::max<int64_t>(0, pad_left - t), std::min<int64_t>(kernel, length + pad_left - t)};
}

// Channels [c_begin, channels) of one output frame, one channel at a time.
// taps_t is the weight as [kernel, channels]; tap k reads row first_row + k of
// signal (one batch row of x; first_row may be negative, only taps inside
// are read).
void frame_scalar(const float* signal, int64_t first_row, const float* taps_t, const float* bias,
                  float* y, int64_t channels, TapRange taps, int64_t c_begin) {
  for (int64_t c = c_begin; c < channels; ++c) {
    float sum = 0.0f;
    for (int64_t k = taps.begin; k < taps.end; ++k) {
      const float product = taps_t[k * channels + c] * signal[(first_row + k) * channels + c];
      sum = sum + product;
    }
    y[c] = bias != nullptr ? sum + bias[c] : sum;
  }
}

#if defined(__x86_64__)
OASR_AVX2_TARGET void frame_avx2(const float* signal, int64_t first_row, const float* taps_t,
                                 const float* bias, float* y, int64_t channels, TapRange taps) {
  int64_t c = 0;
  for (; c + 8 <= channels; c += 8) {
    __m256 sum = _mm256_setzero_ps();
    for (int64_t k = taps.begin; k < taps.end; ++k) {
      const __m256 product =
          _mm256_mul_ps(_mm256_loadu_ps(taps_t + k * channels + c),
                        _mm256_loadu_ps(signal + (first_row + k) * channels + c));
      sum = _mm256_add_ps(sum, product);
    }
    if (bias != nullptr) sum = _mm256_add_ps(sum, _mm256_loadu_ps(bias + c));
    _mm256_storeu_ps(y + c, sum);
  }
  frame_scalar(signal, first_row, taps_t, bias, y, channels, taps, c);
}
#endif

}  // namespace

void depthwise_conv1d_channels_last_f32(const float* x, const float* weight, const float* bias,
                                        float* out, int64_t batch, int64_t channels, int64_t length,
                                        int64_t kernel, int64_t pad_left, int64_t out_length) {
  std::vector<float> taps_t(static_cast<size_t>(kernel * channels));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t k = 0; k < kernel; ++k) taps_t[k * channels + c] = weight[c * kernel + k];
  }
#if defined(__x86_64__)
  const bool avx2 = cpu_has(CpuIsa::kAvx2);
#endif
  const int64_t chunks = (out_length + kFramesPerTask - 1) / kFramesPerTask;
  parallel_for(batch * chunks, [&](int64_t task) {
    const int64_t b = task / chunks;
    const int64_t t_begin = (task % chunks) * kFramesPerTask;
    const int64_t t_end = std::min(out_length, t_begin + kFramesPerTask);
    for (int64_t t = t_begin; t < t_end; ++t) {
      const TapRange taps = taps_inside(t, kernel, pad_left, length);
      const float* signal = x + b * length * channels;
      float* y = out + (b * out_length + t) * channels;
#if defined(__x86_64__)
      if (avx2) {
        frame_avx2(signal, t - pad_left, taps_t.data(), bias, y, channels, taps);
        continue;
      }
#endif
      frame_scalar(signal, t - pad_left, taps_t.data(), bias, y, channels, taps, 0);
    }
  });
}

}  // namespace oasr::ops::cpu
