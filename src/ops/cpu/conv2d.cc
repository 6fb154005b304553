// The sums are ops/cpu/gemm.h's GEMM over the im2col matrix: each output's
// terms in increasing (ci, i, j), one fma each, so its bits depend on its own
// receptive field alone, not on how many rows or bands the image has (batch
// invariance). Other bodies are compared with this one under a tolerance.
// The bias is added afterwards, one float32 addition per output, as in
// ops/cpu/gemm.cc.
#include "ops/cpu/conv2d.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu_threads.h"

namespace oasr::ops::cpu {
namespace {

// The im2col buffer is filled for a band of output rows at a time so that
// its size stays bounded (16 MiB) whatever the input length.
constexpr int64_t kColumnBufferFloats = int64_t{4} << 20;

// The im2col matrix of output rows [row_begin, row_end), written straight
// into gemm_f32's packed-b layout (ops/cpu/gemm.h): column p of the band is
// output pixel (row_begin + p / out_w, p % out_w), row kk = (ci * KH + i) *
// KW + j its tap (i, j) of channel ci; panel `panel` holds columns [panel *
// 16, panel * 16 + 16), zeros past the band.
void im2col_panel(const float* image, const Conv2dShape& s, int64_t row_begin, int64_t band,
                  int64_t panel, float* packed) {
  constexpr int64_t kCols = kGemmPanelColumns;
  const int64_t k = s.in_channels * s.kernel_h * s.kernel_w;
  float* dst = packed + panel * k * kCols;
  const int64_t p0 = panel * kCols;
  const int64_t cols = std::min(kCols, band - p0);
  int64_t top[kCols];   // the input row of tap i = 0 per column
  int64_t left[kCols];  // the input column of tap j = 0 per column
  for (int64_t q = 0; q < cols; ++q) {
    top[q] = (row_begin + (p0 + q) / s.out_w) * s.stride_h - s.pad_h;
    left[q] = ((p0 + q) % s.out_w) * s.stride_w - s.pad_w;
  }
  // Without padding every tap lies inside the image: no bounds test.
  const bool unpadded = s.pad_h == 0 && s.pad_w == 0;
  for (int64_t ci = 0; ci < s.in_channels; ++ci) {
    const float* channel = image + ci * s.in_h * s.in_w;
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        float* row = dst + ((ci * s.kernel_h + i) * s.kernel_w + j) * kCols;
        if (unpadded) {
          for (int64_t q = 0; q < cols; ++q) row[q] = channel[(top[q] + i) * s.in_w + left[q] + j];
        } else {
          for (int64_t q = 0; q < cols; ++q) {
            const int64_t iy = top[q] + i;
            const int64_t ix = left[q] + j;
            const bool inside = iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w;
            row[q] = inside ? channel[iy * s.in_w + ix] : 0.0f;
          }
        }
        for (int64_t q = cols; q < kCols; ++q) row[q] = 0.0f;
      }
    }
  }
}

}  // namespace

void conv2d_f32(const float* x, const float* weight, const float* bias, float* out,
                const Conv2dShape& s) {
  // The unpadded im2col reads without bounds tests: the output extent must
  // be the one the input gives (ops/conv2d.cc computes it so).
  OASR_CHECK(s.stride_h > 0 && s.stride_w > 0 &&
                 s.out_h == (s.in_h + 2 * s.pad_h - s.kernel_h) / s.stride_h + 1 &&
                 s.out_w == (s.in_w + 2 * s.pad_w - s.kernel_w) / s.stride_w + 1,
             kInternal, "conv2d_f32: output ", s.out_h, " x ", s.out_w,
             " does not follow from the input ", s.in_h, " x ", s.in_w);
  const int64_t pixels = s.out_h * s.out_w;
  if (s.batch == 0 || s.out_channels == 0 || pixels == 0) return;
  const int64_t k = s.in_channels * s.kernel_h * s.kernel_w;
  // A 1x1 kernel with stride 1 and no padding reads the image as it is.
  const bool image_is_columns = s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 &&
                                s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
  const int64_t rows_per_band =
      std::clamp<int64_t>(kColumnBufferFloats / std::max<int64_t>(k * s.out_w, 1), 1, s.out_h);
  std::vector<float> packed(image_is_columns ? 0
                                             : gemm_packed_b_floats(rows_per_band * s.out_w, k));

  for (int64_t n = 0; n < s.batch; ++n) {
    const float* image = x + n * s.in_channels * s.in_h * s.in_w;
    float* result = out + n * s.out_channels * pixels;
    if (image_is_columns) {
      gemm_f32(weight, k, image, pixels, /*transpose_b=*/false, result, pixels, s.out_channels,
               pixels, k);
    } else {
      for (int64_t row_begin = 0; row_begin < s.out_h; row_begin += rows_per_band) {
        const int64_t row_end = std::min(row_begin + rows_per_band, s.out_h);
        const int64_t band = (row_end - row_begin) * s.out_w;
        parallel_for((band + kGemmPanelColumns - 1) / kGemmPanelColumns, [&](int64_t panel) {
          im2col_panel(image, s, row_begin, band, panel, packed.data());
        });
        // result[:, band] = weight [Cout, K] x columns [K, band]; the output
        // rows stride over the whole plane.
        gemm_f32_packed_b(weight, k, packed.data(), result + row_begin * s.out_w, pixels,
                          s.out_channels, band, k);
      }
    }
    if (bias == nullptr) continue;
    for (int64_t co = 0; co < s.out_channels; ++co) {
      float* plane = result + co * pixels;
      for (int64_t p = 0; p < pixels; ++p) plane[p] = plane[p] + bias[co];
    }
  }
}

}  // namespace oasr::ops::cpu
