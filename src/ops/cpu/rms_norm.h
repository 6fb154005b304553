// CPU body of ops/rms_norm.h: contiguous float32 rows of `features` values;
// weight may be null (then 1). Per row:
//   ms   = (sum_d x_d^2) / D           double, sequential d = 0..D-1
//   rstd = 1 / sqrt(ms + eps)          double
//   y_d  = float(x_d * rstd * w_d)     double, one rounding at the end
// (PyTorch rounds x_d * rstd to float32 before the weight; the difference
// is within a float32 ulp of y_d.)
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// Rows are independent: `parallel` splits them over the worker pool; the
// bits do not change.
void rms_norm_f32(const float* x, const float* weight, float* out, int64_t rows, int64_t features,
                  float eps, bool parallel = true);

}  // namespace oasr::ops::cpu
