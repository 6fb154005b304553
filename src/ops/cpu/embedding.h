// CPU body of ops/embedding.h.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

// out[i, :] = table[ids[i], :] for i < count; the ids were range-checked by
// the front. table is contiguous [V, features]; out is [count, features].
void embedding_f32(const int64_t* ids, int64_t count, const float* table, int64_t features,
                   float* out);

}  // namespace oasr::ops::cpu
