// CUDA body of ops/softmax.h. x and out are contiguous with the logical shape
// [outer, length, inner], on one CUDA device, of one dtype (float32, float16
// or bfloat16); softmax runs along `length`.
//
// Per row, in float32: m = max over kept x (NaN propagates), e = exp(x - m)
// with core/activations.h's exp_f32 (the CPU body's function, so every e is
// bit-equal to the CPU's), s = sum of kept e (block reduction in float32 for
// inner == 1, a sequential float32 sum otherwise), p = e / s (correctly
// rounded), rounded once to the dtype; masked positions are exactly 0 and a
// row with nothing kept is all zeros. Rows along the last dimension reduce
// with one fixed block shape whatever their length, and masked positions
// take no part, so a row's bits are the same padded or not (batch invariance). Against the CPU body
// (double sum, double quotient), float32 differs only through s: within a few float32 ulps of p.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace oasr::ops::cuda {

// The most dimensions a broadcast mask may index through (x.dim()).
inline constexpr int kMaxMaskRank = 8;

// `mask` is undefined (plain softmax) or a contiguous uint8 tensor on x's
// device, read through `mask_strides`: per dimension of x, the mask's element
// step (0 where the mask is broadcast). `axis` is the softmax dimension of x.
void softmax(const Tensor& x, const Tensor& mask, const std::vector<int64_t>& mask_strides,
             int64_t axis, const Tensor& out);

}  // namespace oasr::ops::cuda
