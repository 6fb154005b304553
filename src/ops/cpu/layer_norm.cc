// Reference arithmetic, per row of D values (the future CUDA body is tested
// against this under a tolerance):
//   mean = (sum_d x_d) / D                  double, sequential d = 0..D-1
//   var  = (sum_d (x_d - mean)^2) / D       double, same order; biased like PyTorch
//   rstd = 1 / sqrt(var + eps)              double
//   y_d  = float((x_d - mean) * rstd * w_d + b_d)   double, one rounding at the end
// Double accumulation keeps the two-pass mean exact enough that rows with a
// large common offset (|mean| >> std) lose nothing to cancellation.
#include "ops/cpu/layer_norm.h"

#include <cmath>

namespace oasr::ops::cpu {
namespace {

void normalize_row(const float* x, const float* weight, const float* bias, float* out,
                   int64_t features, float eps) {
  if (features == 0) return;
  double sum = 0.0;
  for (int64_t d = 0; d < features; ++d) sum += static_cast<double>(x[d]);
  const double mean = sum / static_cast<double>(features);
  double squares = 0.0;
  for (int64_t d = 0; d < features; ++d) {
    const double centered = static_cast<double>(x[d]) - mean;
    squares += centered * centered;
  }
  const double variance = squares / static_cast<double>(features);
  const double rstd = 1.0 / std::sqrt(variance + static_cast<double>(eps));
  for (int64_t d = 0; d < features; ++d) {
    double y = (static_cast<double>(x[d]) - mean) * rstd;
    if (weight != nullptr) y = y * static_cast<double>(weight[d]);
    if (bias != nullptr) y = y + static_cast<double>(bias[d]);
    out[d] = static_cast<float>(y);
  }
}

}  // namespace

void layer_norm_f32(const float* x, const float* weight, const float* bias, float* out,
                    int64_t rows, int64_t features, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    normalize_row(x + r * features, weight, bias, out + r * features, features, eps);
  }
}

void add_scaled_layer_norm_f32(const float* x, const float* residual, float alpha,
                               const float* weight, const float* bias, float* sum,
                               float* normalized, int64_t rows, int64_t features, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = r * features;
    for (int64_t d = 0; d < features; ++d) {
      const float scaled = alpha * x[offset + d];
      sum[offset + d] = residual[offset + d] + scaled;
    }
    normalize_row(sum + offset, weight, bias, normalized + offset, features, eps);
  }
}

}  // namespace oasr::ops::cpu
