// CPU bodies of ops/elementwise.h on contiguous float32 arrays. a and out
// hold n elements; b holds b_n elements and repeats along a (b_n divides n),
// i.e. element i of a meets b[i % b_n]. Each result is one float32 rounding
// per written operation (no fma).
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

void add_f32(const float* a, const float* b, float* out, int64_t n, int64_t b_n);
void mul_f32(const float* a, const float* b, float* out, int64_t n, int64_t b_n);
// out = a + (alpha * b): the product is rounded before the sum.
void add_scaled_f32(const float* a, const float* b, float alpha, float* out, int64_t n,
                    int64_t b_n);
void scale_f32(const float* x, float factor, float* out, int64_t n);

}  // namespace oasr::ops::cpu
