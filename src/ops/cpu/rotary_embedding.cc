#include "ops/cpu/rotary_embedding.h"

#include <cmath>
#include <vector>

#include "ops/cpu_threads.h"

namespace oasr::ops::cpu {

void rotary_cos_sin(float angle, float* cos_out, float* sin_out) {
  *cos_out = static_cast<float>(std::cos(static_cast<double>(angle)));
  *sin_out = static_cast<float>(std::sin(static_cast<double>(angle)));
}

void rotary_embedding_f32(const float* x, const int64_t* positions, const float* inv_freq,
                          float* out, int64_t rows, int64_t heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for_row_chunks(rows, heads * head_dim, 8, true, [&](int64_t begin, int64_t count) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int64_t r = begin; r < begin + count; ++r) {
      const float position = static_cast<float>(positions[r]);
      for (int64_t i = 0; i < half; ++i) {
        rotary_cos_sin(position * inv_freq[i], &c[static_cast<size_t>(i)],
                       &s[static_cast<size_t>(i)]);
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float* in = x + (r * heads + h) * head_dim;
        float* y = out + (r * heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float ci = c[static_cast<size_t>(i)];
          const float si = s[static_cast<size_t>(i)];
          const float first = in[i];
          const float second = in[i + half];
          // Separate roundings (no contraction: the project builds with
          // -ffp-contract=off), as PyTorch's four elementwise ops.
          y[i] = first * ci - second * si;
          y[i + half] = second * ci + first * si;
        }
      }
    }
  });
}

}  // namespace oasr::ops::cpu
