// The sums are ops/cpu/gemm.h's GEMM over the im2col matrix: each output's
// terms in increasing (ci, i, j), one fma each, so its bits depend on its own
// receptive field alone, not on how many rows or bands the image has (batch
// invariance). Other bodies are compared with this one under a tolerance.
// The bias is added afterwards, one float32 addition per output, as in
// ops/cpu/gemm.cc.
#include "ops/cpu/conv2d.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/gemm.h"

namespace oasr::ops::cpu {
namespace {

// The im2col buffer is filled for a band of output rows at a time so that
// its size stays bounded (16 MiB) whatever the input length.
constexpr int64_t kColumnBufferFloats = int64_t{4} << 20;

// columns[k, (oy - row_begin) * out_w + ox] for k = (ci * KH + i) * KW + j:
// the input element that kernel tap (i, j) of channel ci sees at (oy, ox).
void im2col_rows(const float* image, const Conv2dShape& s, int64_t row_begin, int64_t row_end,
                 float* columns) {
  const int64_t band = (row_end - row_begin) * s.out_w;
  for (int64_t ci = 0; ci < s.in_channels; ++ci) {
    const float* channel = image + ci * s.in_h * s.in_w;
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        float* dst = columns + ((ci * s.kernel_h + i) * s.kernel_w + j) * band;
        for (int64_t oy = row_begin; oy < row_end; ++oy) {
          const int64_t iy = oy * s.stride_h - s.pad_h + i;
          float* dst_row = dst + (oy - row_begin) * s.out_w;
          if (iy < 0 || iy >= s.in_h) {
            std::fill(dst_row, dst_row + s.out_w, 0.0f);
            continue;
          }
          const float* src_row = channel + iy * s.in_w;
          for (int64_t ox = 0; ox < s.out_w; ++ox) {
            const int64_t ix = ox * s.stride_w - s.pad_w + j;
            dst_row[ox] = (ix >= 0 && ix < s.in_w) ? src_row[ix] : 0.0f;
          }
        }
      }
    }
  }
}

}  // namespace

void conv2d_f32(const float* x, const float* weight, const float* bias, float* out,
                const Conv2dShape& s) {
  const int64_t pixels = s.out_h * s.out_w;
  if (s.batch == 0 || s.out_channels == 0 || pixels == 0) return;
  const int64_t k = s.in_channels * s.kernel_h * s.kernel_w;
  // A 1x1 kernel with stride 1 and no padding reads the image as it is.
  const bool image_is_columns = s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 &&
                                s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
  const int64_t rows_per_band =
      std::clamp<int64_t>(kColumnBufferFloats / std::max<int64_t>(k * s.out_w, 1), 1, s.out_h);
  std::vector<float> columns(image_is_columns ? 0 : k * rows_per_band * s.out_w);

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
        im2col_rows(image, s, row_begin, row_end, columns.data());
        // result[:, band] = weight [Cout, K] x columns [K, band]; the output
        // rows stride over the whole plane.
        gemm_f32(weight, k, columns.data(), band, /*transpose_b=*/false,
                 result + row_begin * s.out_w, pixels, s.out_channels, band, k);
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
