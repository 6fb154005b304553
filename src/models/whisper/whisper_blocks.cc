#include "models/whisper/whisper_blocks.h"

#include <cmath>

#include "ops/elementwise.h"

namespace oasr::models {

WhisperDecoderLayer::WhisperDecoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperDecoderLayer") {
  self_attn_ = register_module("self_attn", make_whisper_attention(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  encoder_attn_ = register_module("encoder_attn", make_whisper_attention(dim, heads));
  encoder_attn_layer_norm_ =
      register_module("encoder_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  ffn_ = layers::FeedForward(*this, whisper_feed_forward(dim, ffn_dim));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  // A decoder step has a few rows (beams x utterances x new tokens): the
  // row-dot linear reads each weight once and keeps rows independent.
  self_attn_->use_row_dot_projections(/*memory_too=*/true);
  encoder_attn_->use_row_dot_projections(/*memory_too=*/false);
  ffn_.set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  final_layer_norm_->set_adds_residual(true);
}

Tensor WhisperDecoderLayer::forward(const Tensor& x, layers::KvCache& cache, int64_t layer,
                                    const layers::AttentionMemory& cross,
                                    std::span<const int64_t> cross_rows,
                                    const WhisperDeviceStep& device) const {
  const Tensor attended = self_attn_->forward_cached(self_attn_layer_norm_->forward(x), cache,
                                                     layer, device.past_tokens);
  const ops::AddLayerNormResult after_self = encoder_attn_layer_norm_->add_forward(attended, x);
  const Tensor crossed =
      encoder_attn_->forward_cross(after_self.normalized, cross, cross_rows, device.cross_rows);
  const layers::LayerNorm::AddResult after_cross =
      final_layer_norm_->add_forward_to_gemm(crossed, after_self.sum);
  return ops::add(after_cross.sum, ffn_.forward(after_cross.normalized));
}

}  // namespace oasr::models
