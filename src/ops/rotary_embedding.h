// Rotary position embedding as the Qwen2 / Llama language models apply it
// (transformers' Qwen2RotaryEmbedding + apply_rotary_pos_emb, rope_type
// "default", the whole head rotated): for each row (b, t), head h and
// i < D / 2, with the pair (x_i, x_{i + D/2}):
//   angle = float32(positions[b, t]) * inv_freq[i]     one float32 product
//   c, s  = cos(angle), sin(angle) rounded to float32, then to x's dtype T
//   y_i         = T(T(x_i * c) - T(x_{i+D/2} * s))
//   y_{i + D/2} = T(T(x_{i+D/2} * c) + T(x_i * s))
// (PyTorch's q * cos + rotate_half(q) * sin, each operation rounded to T).
// inv_freq comes from the model (rotary_inv_freq below), so a checkpoint's
// own frequencies can be served as they are.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

// x [B, T, H, D] (D even, float32 on the CPU; float32 / float16 / bfloat16 on
// CUDA); positions int64 [B, T] on x's device; inv_freq float32 [D / 2] on
// x's device. Returns a new tensor of x's shape and dtype.
Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq);

// transformers' default inv_freq for a head of `head_dim` and rope_theta
// `theta`: 1 / theta ** (float(2i) / head_dim) in float32 with the C
// library's powf. PyTorch's float32 pow differs from it by one ulp on a few
// entries (8 of 1700 checked; one of them in a Qwen2 head at theta 1e6), so
// this equals transformers' buffer to within one float32 ulp, not bitwise.
// A CPU tensor [head_dim / 2].
Tensor rotary_inv_freq(int64_t head_dim, float theta);

}  // namespace oasr::ops
