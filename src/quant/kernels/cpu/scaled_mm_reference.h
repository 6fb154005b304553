// The cpu_reference lane's raw-pointer bodies: plain loops over numerics.h,
// obviously correct, the bits every other lane is tested against (DESIGN.md
// §3). Row-major, contiguous; fp32 output (the caller rounds once to the
// served dtype). The AVX2 lane (scaled_mm_int8_avx2.h) has the same
// signatures with the suffix _avx2.
#pragma once

#include <cstdint>

#include "core/activations.h"

namespace oasr::quant {

// out[m, n] = int8_epilogue(sum_k a[m, k] * w[n, k], a_scale[m], w_scale[n], bias[n], act),
// the sum an exact int32 (|acc| <= k * 127 * 127, so k < 133143 cannot overflow;
// longer k is refused by the caller). a [M, K], w [N, K], bias [N] or null.
void scaled_mm_int8_reference(const int8_t* a, const float* a_scale, const int8_t* w,
                              const float* w_scale, const float* bias, Activation act, int64_t m,
                              int64_t n, int64_t k, float* out);

// The same with float8_e4m3fn operands (bits) and an fp32 accumulator summed
// in K order (k = 0, 1, ...), then fp8_epilogue.
void scaled_mm_e4m3_reference(const uint8_t* a, const float* a_scale, const uint8_t* w,
                              const float* w_scale, const float* bias, Activation act, int64_t m,
                              int64_t n, int64_t k, float* out);

// Per-token dynamic quantization of x [M, K] (smooth_inv [K] or null):
// q [M, K], scale [M].
void quantize_per_token_int8_reference(const float* x, const float* smooth_inv, int64_t m,
                                       int64_t k, int8_t* q, float* scale);
void quantize_per_token_e4m3_reference(const float* x, const float* smooth_inv, int64_t m,
                                       int64_t k, uint8_t* q, float* scale);

// Static quantization of x [M, K] with the per-channel multiplier [K]
// (static_multiplier(input_scale, smooth_inv_j)).
void quantize_static_int8_reference(const float* x, const float* multiplier, int64_t m, int64_t k,
                                    int8_t* q);
void quantize_static_e4m3_reference(const float* x, const float* multiplier, int64_t m, int64_t k,
                                    uint8_t* q);

// The largest K whose int32 accumulator cannot overflow: K * 127 * 127 <= 2^31 - 1.
inline constexpr int64_t kInt8MaxExactK = 2147483647LL / (127 * 127);

}  // namespace oasr::quant
