// CPU body of ops/rotary_embedding.h (float32): x and out hold `rows` rows of
// `heads` heads of `head_dim` values; positions one int64 per row.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

void rotary_embedding_f32(const float* x, const int64_t* positions, const float* inv_freq,
                          float* out, int64_t rows, int64_t heads, int64_t head_dim);

// cos and sin of a float32 angle, each computed in double and rounded once to
// float32 (the CUDA body computes the same in double with CUDA's cos / sin).
void rotary_cos_sin(float angle, float* cos_out, float* sin_out);

}  // namespace oasr::ops::cpu
