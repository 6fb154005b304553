// Two passes. Each input element's code is a function of its value alone
// (quantize_int8(x * multiplier)), and a 3x3 / stride-2 gather reads most
// elements twice or more, so every element is quantized once, into a
// channels-last int8 copy of x; then each patch row copies whole channel
// runs (or zeros, in the padding) from it. The codes are the reference's
// (the AVX2 lanes are quantize_int8 lane by lane), and gathering commutes
// with quantizing, so the bytes are those of the float32 patches quantized.
#include "quant/kernels/cpu/im2col_quantize.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/cpu_features.h"
#include "ops/cpu_threads.h"
#include "quant/numerics.h"
#if defined(__x86_64__)
#include "quant/kernels/cpu/int8_gemm_x86.h"
#endif

namespace oasr::quant::cpu {
namespace {

// codes[ix * channels + c] = quantize_int8(row_c[ix] * multiplier) for one
// input row (b, iy), where row_c = x + ((b * channels + c) * height + iy) * width.
void quantize_row_channels_last_scalar(const float* first, int64_t plane, int64_t channels,
                                       int64_t width, float multiplier, int8_t* codes) {
  for (int64_t c = 0; c < channels; ++c) {
    const float* row = first + c * plane;
    for (int64_t ix = 0; ix < width; ++ix) {
      codes[ix * channels + c] = quantize_int8(row[ix] * multiplier);
    }
  }
}

#if defined(__x86_64__)
OASR_AVX2_TARGET void quantize_row_channels_last_avx2(const float* first, int64_t plane,
                                                      int64_t channels, int64_t width,
                                                      float multiplier, int8_t* codes) {
  const __m256 m = _mm256_set1_ps(multiplier);
  const int64_t full = width - width % 8;
  for (int64_t c = 0; c < channels; ++c) {
    const float* row = first + c * plane;
    for (int64_t ix = 0; ix < full; ix += 8) {
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                         x86::quantize_int8_lanes(_mm256_mul_ps(_mm256_loadu_ps(row + ix), m)));
      for (int i = 0; i < 8; ++i) codes[(ix + i) * channels + c] = static_cast<int8_t>(lanes[i]);
    }
    for (int64_t ix = full; ix < width; ++ix) {
      codes[ix * channels + c] = quantize_int8(row[ix] * multiplier);
    }
  }
}
#endif

}  // namespace

void im2col_quantize_int8(const float* x, const Im2colGeometry& g, float multiplier,
                          int8_t* patches) {
  const int64_t rows = g.batch * g.out_h * g.out_w;
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  if (rows == 0 || patch == 0) return;
  const int64_t plane = g.height * g.width;
  const int64_t pixel_bytes = g.channels;  // one code per channel
  // Every code is written by pass 1: no zero fill first.
  const std::unique_ptr<int8_t[]> codes(
      new int8_t[static_cast<size_t>(g.batch * plane * g.channels)]);
#if defined(__x86_64__)
  const auto quantize_row =
      cpu_has(CpuIsa::kAvx2) ? quantize_row_channels_last_avx2 : quantize_row_channels_last_scalar;
#else
  const auto quantize_row = quantize_row_channels_last_scalar;
#endif
  // Pass 1: one task per few input rows (b, iy).
  ops::for_row_chunks(g.batch * g.height, g.width * g.channels, 4, /*parallel=*/true,
                      [&](int64_t begin, int64_t count) {
                        for (int64_t r = begin; r < begin + count; ++r) {
                          const int64_t b = r / g.height, iy = r % g.height;
                          quantize_row(x + (b * g.channels * g.height + iy) * g.width, plane,
                                       g.channels, g.width, multiplier,
                                       codes.get() + r * g.width * g.channels);
                        }
                      });
  // Pass 2: each patch row copies kernel_h * kernel_w channel runs.
  ops::for_row_chunks(rows, patch, 16, /*parallel=*/true, [&](int64_t begin, int64_t count) {
    for (int64_t row = begin; row < begin + count; ++row) {
      const int64_t b = row / (g.out_h * g.out_w);
      const int64_t oy = row / g.out_w % g.out_h, ox = row % g.out_w;
      int8_t* dst = patches + row * patch;
      for (int64_t r = 0; r < g.kernel_h; ++r) {
        const int64_t iy = oy * g.stride_h - g.pad_h + r;
        for (int64_t s = 0; s < g.kernel_w; ++s) {
          const int64_t ix = ox * g.stride_w - g.pad_w + s;
          int8_t* run = dst + (r * g.kernel_w + s) * pixel_bytes;
          if (iy < 0 || iy >= g.height || ix < 0 || ix >= g.width) {
            std::memset(run, 0, static_cast<size_t>(pixel_bytes));
          } else {
            std::memcpy(run, codes.get() + ((b * g.height + iy) * g.width + ix) * pixel_bytes,
                        static_cast<size_t>(pixel_bytes));
          }
        }
      }
    }
  });
}

}  // namespace oasr::quant::cpu
