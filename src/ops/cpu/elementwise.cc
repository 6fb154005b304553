#include "ops/cpu/elementwise.h"

namespace oasr::ops::cpu {
namespace {

// Applies fn(a_i, b_{i mod b_n}) block by block, so no division per element.
template <typename Fn>
void broadcast_binary(const float* a, const float* b, float* out, int64_t n, int64_t b_n, Fn&& fn) {
  if (b_n <= 0) return;  // then n is 0 too: b's shape is a suffix of a's
  for (int64_t start = 0; start < n; start += b_n) {
    for (int64_t j = 0; j < b_n; ++j) out[start + j] = fn(a[start + j], b[j]);
  }
}

}  // namespace

void add_f32(const float* a, const float* b, float* out, int64_t n, int64_t b_n) {
  broadcast_binary(a, b, out, n, b_n, [](float x, float y) { return x + y; });
}

void mul_f32(const float* a, const float* b, float* out, int64_t n, int64_t b_n) {
  broadcast_binary(a, b, out, n, b_n, [](float x, float y) { return x * y; });
}

void add_scaled_f32(const float* a, const float* b, float alpha, float* out, int64_t n,
                    int64_t b_n) {
  broadcast_binary(a, b, out, n, b_n, [alpha](float x, float y) {
    const float scaled = alpha * y;
    return x + scaled;
  });
}

void scale_f32(const float* x, float factor, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}

}  // namespace oasr::ops::cpu
