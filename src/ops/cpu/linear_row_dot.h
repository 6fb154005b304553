// The row-dot float32 linear: out[r, n] = dot(x[r, :], weight[n, :]) + bias[n],
// every output a fixed-order dot product of its own row and weight row, so
// a row's bits never depend on how many rows are multiplied with it (the
// decode step's batch of beams and utterances) nor on the thread count.
//
// Order (the definition every body follows; tests/unit/test_linear_row_dot.cc
// checks the AVX2 body against the scalar one bit for bit): K is padded with
// zeros to a multiple of 8; partial sum j (j = 0..7) starts at +0 and takes
// s_j = fma(x[k], w[k], s_j) for k = j, j + 8, j + 16, ... ascending (the
// padding adds fma(0, 0, s_j)); then
//   dot = ((s_0 + s_4) + (s_2 + s_6)) + ((s_1 + s_5) + (s_3 + s_7))
// and y = dot + bias[n] (one float32 addition, as linear_f32 adds its bias).
//
// For few rows against a large weight (a decoder step, an LM head) it reads
// each weight row once per block of rows and never repacks the weight, which
// OpenBLAS's GEMM does on every call (80 MB per decode step for Whisper's
// tied head). The weights are split over the worker pool by output blocks.
#pragma once

#include <cstdint>

namespace oasr::ops::cpu {

void linear_row_dot_f32(const float* x, const float* weight, const float* bias, float* out,
                        int64_t rows, int64_t out_features, int64_t in_features);

// The same with the weight stored as float16 bits. Each weight is widened
// exactly before its fma, so the result has the bits of linear_row_dot_f32
// on a float32 weight holding the same values, from half the bytes; a
// layer uses it when every weight of a float32 tensor is exactly a float16
// (as checkpoints stored in float16 are; ops::prepare_row_dot_weight).
void linear_row_dot_f16w(const float* x, const uint16_t* weight, const float* bias, float* out,
                         int64_t rows, int64_t out_features, int64_t in_features);

}  // namespace oasr::ops::cpu
