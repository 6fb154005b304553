#include "ops/cpu/sequence_mask.h"

#include <algorithm>

namespace oasr::ops::cpu {

void zero_tail_frames_f32(const float* x, const int64_t* valid, float* out, int64_t batch,
                          int64_t frames, int64_t channels) {
  const int64_t row_span = frames * channels;
  for (int64_t b = 0; b < batch; ++b) {
    const float* src = x + b * row_span;
    float* dst = out + b * row_span;
    const int64_t kept = valid[b] * channels;
    std::copy(src, src + kept, dst);
    std::fill(dst + kept, dst + row_span, 0.0f);
  }
}

}  // namespace oasr::ops::cpu
