// The pre-LN transformer encoder layer of Hugging Face's Whisper, which
// Qwen2-Audio's audio tower repeats module for module
// (Qwen2AudioEncoderLayer: the same state-dict names), shared here at the top
// of models/ because two architectures build it. Attention as HF's
// WhisperAttention computes it: k_proj without a bias, q = q_proj(x) *
// head_dim^-0.5, softmax(q k^T) v per head, out_proj.
#pragma once

#include <cstdint>
#include <memory>

#include "layers/attention.h"
#include "layers/feed_forward.h"
#include "layers/module.h"
#include "layers/norm.h"

namespace oasr::models {

// HF's WhisperAttention as the shared layer computes it: k_proj (no bias),
// v_proj, q_proj, out_proj (HF's registration order), the query scaled by
// head_dim^-0.5 before the product.
std::shared_ptr<layers::MultiHeadAttention> make_whisper_attention(int64_t dim, int64_t heads);

// fc1 (exact GELU), fc2, both with a bias: Whisper's feed-forward.
layers::FeedForwardSpec whisper_feed_forward(int64_t dim, int64_t ffn_dim);

// x + attn(ln(x)), then + fc2(gelu(fc1(ln(.)))). Also Qwen2-Audio's
// audio-tower layer (Qwen2AudioEncoderLayer: the same module and names).
class WhisperEncoderLayer : public Module {
 public:
  WhisperEncoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim);
  // x [B, T, D]; key_mask (optional): uint8 [B, 1, 1, T], nonzero = a key
  // the queries attend (Qwen2-Audio masks the frames past an utterance's end).
  Tensor forward(const Tensor& x, const Tensor& key_mask = Tensor()) const;

 private:
  std::shared_ptr<layers::MultiHeadAttention> self_attn_;
  std::shared_ptr<layers::LayerNorm> self_attn_layer_norm_;
  layers::FeedForward ffn_;  // fc1, fc2
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

}  // namespace oasr::models
