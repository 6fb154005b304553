#include "ops/cpu/depthwise_conv2d.h"

#include "ops/cpu_threads.h"

namespace oasr::ops::cpu {

void depthwise_conv2d_f32(const float* x, const float* weight, const float* bias, float* out,
                          const DepthwiseConv2dShape& s) {
  const int64_t planes = s.batch * s.channels;
  // One task per (image, channel) plane: each output's sum is its own, so
  // the split does not change any bits.
  parallel_for(planes, [&](int64_t plane) {
    {
      const int64_t c = plane % s.channels;
      const float* image = x + plane * s.in_h * s.in_w;
      const float* taps = weight + c * s.kernel_h * s.kernel_w;
      float* y = out + plane * s.out_h * s.out_w;
      for (int64_t oh = 0; oh < s.out_h; ++oh) {
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          float acc = 0.0f;
          for (int64_t i = 0; i < s.kernel_h; ++i) {
            const int64_t h = oh * s.stride_h + i - s.pad_h;
            if (h < 0 || h >= s.in_h) continue;
            for (int64_t j = 0; j < s.kernel_w; ++j) {
              const int64_t w = ow * s.stride_w + j - s.pad_w;
              if (w < 0 || w >= s.in_w) continue;
              const float product = taps[i * s.kernel_w + j] * image[h * s.in_w + w];
              acc = acc + product;
            }
          }
          if (bias != nullptr) acc = acc + bias[c];
          y[oh * s.out_w + ow] = acc;
        }
      }
    }
  });
}

}  // namespace oasr::ops::cpu
