// The pre-LN transformer encoder layer of Hugging Face's Whisper and the
// trunk of its encoder (conv front-end, position table, layers), which
// Qwen2-Audio's audio tower repeats module for module (Qwen2AudioEncoder:
// the same state-dict names), shared here at the top of models/ because two
// architectures build them. Attention as HF's
// WhisperAttention computes it: k_proj without a bias, q = q_proj(x) *
// head_dim^-0.5, softmax(q k^T) v per head, out_proj.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/conv1d.h"
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

// conv1 and conv2 (kernel 3, the second with stride 2; exact GELU after
// each), embed_positions (one stored row per frame) and layers.0 .. N-1 of
// Whisper's encoder, registered on the encoder module that owns them in
// HF's order; the owner registers its final layer_norm after them.
struct WhisperEncoderTrunkSpec {
  int64_t num_mel_bins = 0;
  int64_t d_model = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t ffn_dim = 0;
  int64_t max_source_positions = 0;  // frames after conv2; the mel input is twice that
};

class WhisperEncoderTrunk {
 public:
  WhisperEncoderTrunk() = default;
  WhisperEncoderTrunk(Module& owner, const WhisperEncoderTrunkSpec& spec);

  // mel float32 [B, num_mel_bins, 2 * max_source_positions] (one 30 s
  // window, padded as WhisperFeatureExtractor pads it), converted to the
  // served dtype on the served device -> the last layer's output [B,
  // max_source_positions, d_model] (before the owner's norm). key_mask:
  // WhisperEncoderLayer's. `what` names the encoder in a refusal.
  Tensor forward(const Tensor& mel, const Tensor& key_mask, const char* what) const;
  // forward()'s refusal of a log-mel of another shape (kInvalidArgument),
  // for an owner that reads the batch size before calling it.
  void check_input(const Tensor& mel, const char* what) const;
  // The served device and dtype (the position table's).
  const Tensor& position_table() const;

 private:
  WhisperEncoderTrunkSpec spec_;
  std::shared_ptr<layers::Conv1d> conv1_;
  std::shared_ptr<layers::Conv1d> conv2_;
  std::shared_ptr<layers::Embedding> embed_positions_;
  std::vector<std::shared_ptr<WhisperEncoderLayer>> layers_;
};

}  // namespace oasr::models
