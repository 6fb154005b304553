// The blocks of Hugging Face's Qwen2 language model (modeling_qwen2.py) at
// inference, with its state-dict names, as Qwen2-Audio's LM uses them:
//
//   Qwen2Attention      q_proj / k_proj / v_proj with a bias, o_proj without;
//                       num_key_value_heads key/value heads shared by groups
//                       of query heads (GQA); RoPE on queries and keys;
//                       softmax((q k^T) / sqrt(head_dim)) v, causal.
//   Qwen2Mlp            down_proj(silu(gate_proj(x)) * up_proj(x)), no biases;
//                       gate and up are two GEMMs (the seed's rule for a
//                       quantized gated MLP), silu in gate's epilogue.
//   Qwen2DecoderLayer   x + attn(input_layernorm(x)), then
//                       + mlp(post_attention_layernorm(.)), RMSNorm both.
//
// Keys and values live in a layers::PagedKvCache of num_key_value_heads
// heads: a forward appends the new tokens' keys and values (after RoPE) to
// each sequence's blocks, and the attention (ops::cached_attention) reads
// every sequence's own tokens in place, so the sequences of one forward may
// have any lengths and each row's result is its own (batch invariance).
#pragma once

#include <memory>

#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "layers/paged_kv_cache.h"
#include "models/qwen2_audio/qwen2_audio_config.h"

namespace oasr::models {

// Where a forward's n new tokens of every row sit, made once per forward and
// read by every layer.
struct Qwen2Places {
  Tensor positions;  // int64 [R, n]: each token's place in its sequence
  Tensor inv_freq;   // float32 [head_dim / 2], RoPE's frequencies
};

class Qwen2Attention : public Module {
 public:
  explicit Qwen2Attention(const Qwen2TextConfig& config);

  // x [R, n, hidden] at `where` (its tensors on x's device), row r the
  // cache step's sequence r. The n new keys / values go into `layer` after
  // the sequence's tokens; query i attends every key of its sequence up to
  // its own place. Returns [R, n, hidden].
  Tensor forward(const Tensor& x, const Qwen2Places& where, layers::PagedKvCache& cache,
                 int64_t layer) const;

 private:
  int64_t heads_;
  int64_t kv_heads_;
  int64_t head_dim_;
  float score_scale_;
  std::shared_ptr<layers::Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

class Qwen2Mlp : public Module {
 public:
  explicit Qwen2Mlp(const Qwen2TextConfig& config);
  Tensor forward(const Tensor& x) const;

 private:
  std::shared_ptr<layers::LinearActivation> gate_proj_;
  std::shared_ptr<layers::Linear> up_proj_, down_proj_;
};

class Qwen2DecoderLayer : public Module {
 public:
  explicit Qwen2DecoderLayer(const Qwen2TextConfig& config);
  Tensor forward(const Tensor& x, const Qwen2Places& where, layers::PagedKvCache& cache,
                 int64_t layer) const;

 private:
  std::shared_ptr<layers::RmsNorm> input_layernorm_;
  std::shared_ptr<Qwen2Attention> self_attn_;
  std::shared_ptr<layers::RmsNorm> post_attention_layernorm_;
  std::shared_ptr<Qwen2Mlp> mlp_;
};

}  // namespace oasr::models
