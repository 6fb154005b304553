#include "ops/cpu/rms_norm.h"

#include <cmath>

#include "ops/cpu_threads.h"

namespace oasr::ops::cpu {

void rms_norm_f32(const float* x, const float* weight, float* out, int64_t rows, int64_t features,
                  float eps, bool parallel) {
  constexpr int64_t kRowsPerTask = 16;
  for_row_chunks(rows, features, kRowsPerTask, parallel, [&](int64_t begin, int64_t count) {
    for (int64_t r = begin; r < begin + count; ++r) {
      const float* row = x + r * features;
      float* y = out + r * features;
      double squares = 0.0;
      for (int64_t d = 0; d < features; ++d) {
        const double v = row[d];
        squares += v * v;
      }
      const double mean_square = features > 0 ? squares / static_cast<double>(features) : 0.0;
      const double rstd = 1.0 / std::sqrt(mean_square + static_cast<double>(eps));
      for (int64_t d = 0; d < features; ++d) {
        double v = static_cast<double>(row[d]) * rstd;
        if (weight != nullptr) v *= static_cast<double>(weight[d]);
        y[d] = static_cast<float>(v);
      }
    }
  });
}

}  // namespace oasr::ops::cpu
