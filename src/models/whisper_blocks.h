// The blocks of Hugging Face's WhisperForConditionalGeneration, with its
// state-dict names: WhisperAttention (q_proj and v_proj and out_proj with a
// bias, k_proj without) and the pre-LN encoder and decoder layers. Every GEMM is a
// layers::Linear / LinearActivation, so quantization reaches all of them.
//
// Attention as HF computes it: q = q_proj(x) * head_dim^-0.5, softmax(q k^T)
// v per head, out_proj. Head tensors are [batch, heads, tokens, head_dim] and
// each product is one batched ops::matmul over (batch, head).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/kv_cache.h"

namespace oasr::models {

class WhisperAttention : public Module {
 public:
  WhisperAttention(int64_t dim, int64_t heads);

  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }

  // Encoder self-attention without a mask: x [B, T, D] -> [B, T, D].
  Tensor forward(const Tensor& x) const;

  // Decoder self-attention over the KV cache: x [R, n, D] holds n new
  // positions per row; their keys and values are appended to `layer` of the
  // cache, and query i attends the keys up to its own position (causal).
  Tensor forward_cached(const Tensor& x, KvCache& cache, int64_t layer) const;

  // Cross-attention memory: keys and values [B, heads, T, head_dim] of an
  // encoder output [B, T, D].
  std::pair<Tensor, Tensor> project_memory(const Tensor& memory) const;

  // Cross-attention: x [R, n, D]; row r attends memory row cross_rows[r] of
  // keys / values [B, heads, T, head_dim]. Rows reading the same memory row
  // go through one product per head, so R beams over one utterance never
  // copy its keys.
  Tensor forward_cross(const Tensor& x, const Tensor& keys, const Tensor& values,
                       std::span<const int64_t> cross_rows) const;

  // Decoder attention: the projections that see only a step's new tokens
  // run the CPU row-dot linear (ops/gemm.h), so a step's bits do not depend
  // on how many beams or utterances share it; `memory_too` adds k/v (self-
  // attention), which cross-attention leaves on BLAS for its 1500 frames.
  void use_row_dot_projections(bool memory_too);

 private:
  Tensor scaled_query(const Tensor& x) const;  // q_proj(x) * head_dim^-0.5, [B, T, D]

  int64_t dim_;
  int64_t heads_;
  int64_t head_dim_;
  float scaling_;
  std::shared_ptr<layers::Linear> k_proj_;
  std::shared_ptr<layers::Linear> v_proj_;
  std::shared_ptr<layers::Linear> q_proj_;
  std::shared_ptr<layers::Linear> out_proj_;
};

// x + attn(ln(x)), then + fc2(gelu(fc1(ln(.)))).
class WhisperEncoderLayer : public Module {
 public:
  WhisperEncoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim);
  Tensor forward(const Tensor& x) const;  // [B, T, D]

 private:
  std::shared_ptr<WhisperAttention> self_attn_;
  std::shared_ptr<layers::LayerNorm> self_attn_layer_norm_;
  std::shared_ptr<layers::LinearActivation> fc1_;
  std::shared_ptr<layers::Linear> fc2_;
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

// Causal self-attention (cached), cross-attention, feed-forward; each
// pre-LN with a residual.
class WhisperDecoderLayer : public Module {
 public:
  WhisperDecoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim);

  // x [R, n, D]; `layer` is this layer's index in the cache; cross_keys /
  // cross_values [B, heads, T, head_dim] with row r reading cross_rows[r].
  Tensor forward(const Tensor& x, KvCache& cache, int64_t layer, const Tensor& cross_keys,
                 const Tensor& cross_values, std::span<const int64_t> cross_rows) const;

  const WhisperAttention& encoder_attn() const { return *encoder_attn_; }

 private:
  std::shared_ptr<WhisperAttention> self_attn_;
  std::shared_ptr<layers::LayerNorm> self_attn_layer_norm_;
  std::shared_ptr<WhisperAttention> encoder_attn_;
  std::shared_ptr<layers::LayerNorm> encoder_attn_layer_norm_;
  std::shared_ptr<layers::LinearActivation> fc1_;
  std::shared_ptr<layers::Linear> fc2_;
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

}  // namespace oasr::models
