// Reference arithmetic, per row of D values (the future CUDA body is tested
// against this under a tolerance):
//   mean = (sum_d x_d) / D                  double, sequential d = 0..D-1
//   var  = (sum_d (x_d - mean)^2) / D       double, same order; biased like PyTorch
//   rstd = 1 / sqrt(var + eps)              double
//   y_d  = float((x_d - mean) * rstd * w_d + b_d)   double, one rounding at the end
// Double accumulation keeps the two-pass mean exact enough that rows with a
// large common offset (|mean| >> std) lose nothing to cancellation.
#include "ops/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "ops/cpu_threads.h"

namespace oasr::ops::cpu {
namespace {

// Rows per pool task, and the rows one pass interleaves: each row keeps its
// own sequential sums (the definition's order), the kRows chains only run
// side by side so the adds' latency overlaps.
constexpr int64_t kRowsPerTask = 16;
constexpr int kRows = 4;

// Rows [0, count) of x (count <= kRows), each normalized as defined above.
void normalize_rows(const float* x, const float* weight, const float* bias, float* out, int count,
                    int64_t features, float eps) {
  if (features == 0) return;
  double sum[kRows] = {};
  double mean[kRows] = {};
  double squares[kRows] = {};
  double rstd[kRows] = {};
  for (int64_t d = 0; d < features; ++d) {
    for (int r = 0; r < count; ++r) sum[r] += static_cast<double>(x[r * features + d]);
  }
  for (int r = 0; r < count; ++r) mean[r] = sum[r] / static_cast<double>(features);
  for (int64_t d = 0; d < features; ++d) {
    for (int r = 0; r < count; ++r) {
      const double centered = static_cast<double>(x[r * features + d]) - mean[r];
      squares[r] += centered * centered;
    }
  }
  for (int r = 0; r < count; ++r) {
    const double variance = squares[r] / static_cast<double>(features);
    rstd[r] = 1.0 / std::sqrt(variance + static_cast<double>(eps));
  }
  for (int r = 0; r < count; ++r) {
    const float* row = x + r * features;
    float* dst = out + r * features;
    for (int64_t d = 0; d < features; ++d) {
      double y = (static_cast<double>(row[d]) - mean[r]) * rstd[r];
      if (weight != nullptr) y = y * static_cast<double>(weight[d]);
      if (bias != nullptr) y = y + static_cast<double>(bias[d]);
      dst[d] = static_cast<float>(y);
    }
  }
}

// body(first_row, row_count) over [0, rows) in kRows groups, split over the
// pool in kRowsPerTask chunks when `parallel` and there is enough work.
template <typename Body>
void for_row_groups(int64_t rows, int64_t features, bool parallel, const Body& body) {
  const auto chunk = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r += kRows) {
      body(r, static_cast<int>(std::min<int64_t>(kRows, end - r)));
    }
  };
  if (!parallel || rows <= kRowsPerTask || rows * features < (int64_t{1} << 14)) {
    chunk(0, rows);
    return;
  }
  parallel_for((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
    chunk(task * kRowsPerTask, std::min(rows, (task + 1) * kRowsPerTask));
  });
}

}  // namespace

void layer_norm_f32(const float* x, const float* weight, const float* bias, float* out,
                    int64_t rows, int64_t features, float eps, bool parallel) {
  for_row_groups(rows, features, parallel, [&](int64_t r, int count) {
    normalize_rows(x + r * features, weight, bias, out + r * features, count, features, eps);
  });
}

void add_scaled_layer_norm_f32(const float* x, const float* residual, float alpha,
                               const float* weight, const float* bias, float* sum,
                               float* normalized, int64_t rows, int64_t features, float eps,
                               bool parallel) {
  for_row_groups(rows, features, parallel, [&](int64_t r, int count) {
    const int64_t offset = r * features;
    for (int64_t i = 0; i < count * features; ++i) {
      const float scaled = alpha * x[offset + i];
      sum[offset + i] = residual[offset + i] + scaled;
    }
    normalize_rows(sum + offset, weight, bias, normalized + offset, count, features, eps);
  });
}

}  // namespace oasr::ops::cpu
