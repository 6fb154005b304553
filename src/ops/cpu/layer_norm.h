// CPU bodies of ops/layer_norm.h: contiguous float32 rows of `features`
// values; weight/bias may be null (then 1 and 0).
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// Rows are independent: `parallel` splits them over the worker pool (a
// caller already inside a pool task passes false); the bits do not change.
void layer_norm_f32(const float* x, const float* weight, const float* bias, float* out,
                    int64_t rows, int64_t features, float eps, bool parallel = true);

// sum = residual + alpha * x (each product and sum rounded to float32), then
// normalized = layer_norm(sum) exactly as layer_norm_f32 computes it.
void add_scaled_layer_norm_f32(const float* x, const float* residual, float alpha,
                               const float* weight, const float* bias, float* sum,
                               float* normalized, int64_t rows, int64_t features, float eps,
                               bool parallel = true);

}  // namespace oasr::ops::cpu
