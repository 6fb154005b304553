// The fp8 KV cache's number format (spec "FP8 KV cache"): every vector (one
// token's keys or values for one head) is stored as float8_e4m3fn codes
// with one power-of-two scale, computed as the vector is written:
//
//   amax  = max_j |x_j|
//   scale = 2^k, the smallest power of two with amax <= 448 * scale (1 when amax is 0)
//   q_j   = e4m3(x_j / scale)     (exact division, then round to nearest even; |x_j / scale| <=
//   448) x'_j  = e4m3_to_f32(q_j) * scale, rounded once to the served dtype
//
// Dividing by a power of two is exact and a code times a power of two is
// exact in float32, so x' is the only rounding after the e4m3 one: the
// dequantized cache is a pure function of the codes and scales, and the
// CPU and CUDA bodies (core/float_types.h's conversions on both) give the
// same bits (the scale is core/float_types.h's e4m3_pow2_scale).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

struct Pow2E4m3 {
  Tensor codes;   // uint8 [N, D]: float8_e4m3fn bit patterns
  Tensor scales;  // float32 [N]: powers of two
};

// x: [N, D] float32 (CPU) or float32 / float16 / bfloat16 (CUDA).
Pow2E4m3 quantize_pow2_e4m3(const Tensor& x);

// quantize_pow2_e4m3 written straight into a store's slots (the KV cache's
// append): x [R, n, H, D] (any strides) into codes, a uint8 view [R, n, H, D],
// and scales, a float32 view [R, n, H, 1], whose rows may be strided but
// each row's n * H vectors are contiguous. The same bits as
// quantize_pow2_e4m3 followed by two copies, in one kernel on CUDA.
void quantize_pow2_e4m3_into(const Tensor& x, Tensor codes, Tensor scales);

// The same into whole stores, codes uint8 [R, capacity, H, D] and scales
// float32 [R, capacity, H, 1], at tokens [p, p + n) with p = past_tokens[0],
// an int32 [1] on the stores' device read where the write runs: a recorded
// device graph replays each decoder step at its own position. The CPU body
// refuses a window outside the store; the CUDA body skips what falls outside
// (the KV cache refuses such a step on the host before it runs).
void quantize_pow2_e4m3_at(const Tensor& x, Tensor codes, Tensor scales, const Tensor& past_tokens);

// codes uint8 [N, D] and scales float32 [N] on one device -> [N, D] of `dtype`.
Tensor dequantize_pow2_e4m3(const Tensor& codes, const Tensor& scales, DType dtype);

}  // namespace oasr::ops
