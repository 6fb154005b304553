// The blocks of Hugging Face's WhisperForConditionalGeneration, with its
// state-dict names: WhisperAttention (q_proj and v_proj and out_proj with a
// bias, k_proj without) and the pre-LN encoder and decoder layers, built from
// the shared layers (layers/attention.h, layers/feed_forward.h). Every GEMM
// is a layers::Linear / LinearActivation, so quantization reaches all of them.
//
// Attention as HF computes it: q = q_proj(x) * head_dim^-0.5, softmax(q k^T)
// v per head, out_proj.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "layers/attention.h"
#include "layers/feed_forward.h"
#include "layers/kv_cache.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/whisper_encoder_layer.h"

namespace oasr::models {

// What a decoder step's kernels read on the device instead of taking the
// host's values when they are launched, so that a recorded device graph
// replays later steps with these tensors refreshed (core/device_graph.h,
// models/whisper/whisper_model_step.h). Both undefined: the host's values.
struct WhisperDeviceStep {
  Tensor past_tokens;  // int32 [1]: the KV cache's length() (ops/step_tokens.h)
  Tensor cross_rows;   // int64 [R]: the cross_rows of the step
};

// Causal self-attention (cached), cross-attention, feed-forward; each
// pre-LN with a residual.
class WhisperDecoderLayer : public Module {
 public:
  WhisperDecoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim);

  // x [R, n, D]; `layer` is this layer's index in the cache; `cross` is
  // this layer's cross-attention memory (layers::AttentionMemory), row r
  // reading cross_rows[r].
  Tensor forward(const Tensor& x, layers::KvCache& cache, int64_t layer,
                 const layers::AttentionMemory& cross, std::span<const int64_t> cross_rows,
                 const WhisperDeviceStep& device = {}) const;

  const layers::MultiHeadAttention& encoder_attn() const { return *encoder_attn_; }

 private:
  std::shared_ptr<layers::MultiHeadAttention> self_attn_;
  std::shared_ptr<layers::LayerNorm> self_attn_layer_norm_;
  std::shared_ptr<layers::MultiHeadAttention> encoder_attn_;
  std::shared_ptr<layers::LayerNorm> encoder_attn_layer_norm_;
  layers::FeedForward ffn_;  // fc1, fc2
  std::shared_ptr<layers::LayerNorm> final_layer_norm_;
};

}  // namespace oasr::models
