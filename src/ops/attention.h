// Fused relative-position self-attention (WeNet's
// RelPositionMultiHeadedAttention after its projections): one CUDA kernel
// that reads the projections in place and writes the merged heads, so
// neither the scores nor per-head copies reach memory. See
// ops/cuda/attention.h for the numerics and the batch-invariance rule.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace oasr::ops {

struct RelPositionAttentionInputs {
  Tensor q;           // [B, Tq, H, d_k] (any strides, d_k contiguous)
  Tensor k;           // [B, Tk, H, d_k]
  Tensor v;           // [B, Tk, H, d_k]
  Tensor p;           // [1, Tk, H, d_k]: the projected positions, shared by the batch
  Tensor pos_bias_u;  // [H, d_k]
  Tensor pos_bias_v;  // [H, d_k]
  Tensor mask;        // undefined, or uint8 [B, 1, 1, Tk] / [B, 1, Tq, Tk]: nonzero keeps
  float scale = 1.0f;
};

// Whether rel_position_attention serves these inputs: CUDA, float16 or
// bfloat16 on sm_80+, d_k = 64, 16-byte aligned rows, a mask of one of the two
// shapes above. The caller runs the unfused ops otherwise.
bool rel_position_attention_fusable(const RelPositionAttentionInputs& in);

// softmax(((q + u) k^T + (q + v) p^T) * scale, masked) v, as [B, Tq, H * d_k]
// (heads merged in order). Refuses inputs rel_position_attention_fusable
// rejects, naming the first reason.
Tensor rel_position_attention(const RelPositionAttentionInputs& in);

}  // namespace oasr::ops
