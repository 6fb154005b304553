#include "ops/cpu/embedding.h"

#include <algorithm>

namespace oasr::ops::cpu {

void embedding_f32(const int64_t* ids, int64_t count, const float* table, int64_t features,
                   float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float* row = table + ids[i] * features;
    std::copy(row, row + features, out + i * features);
  }
}

}  // namespace oasr::ops::cpu
