#include "models/whisper_encoder_layer.h"

#include <cmath>

#include "ops/elementwise.h"

namespace oasr::models {

std::shared_ptr<layers::MultiHeadAttention> make_whisper_attention(int64_t dim, int64_t heads) {
  using layers::AttentionProjection;
  layers::AttentionSpec spec;
  spec.type_name = "WhisperAttention";
  spec.dim = dim;
  spec.heads = heads;
  spec.projections = {{AttentionProjection::kKey, "k_proj", /*bias=*/false},
                      {AttentionProjection::kValue, "v_proj", true},
                      {AttentionProjection::kQuery, "q_proj", true},
                      {AttentionProjection::kOut, "out_proj", true}};
  spec.scaling = layers::ScoreScaling::kQuery;
  // HF: head_dim ** -0.5 in double, applied to a float32 tensor as float32.
  if (heads > 0 && dim % heads == 0) {
    spec.score_scale = static_cast<float>(std::pow(static_cast<double>(dim / heads), -0.5));
  }
  return std::make_shared<layers::MultiHeadAttention>(spec);
}

layers::FeedForwardSpec whisper_feed_forward(int64_t dim, int64_t ffn_dim) {
  return {dim, ffn_dim, Activation::kGeluErf, /*bias=*/true, "fc1", "fc2"};
}

WhisperEncoderLayer::WhisperEncoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperEncoderLayer") {
  self_attn_ = register_module("self_attn", make_whisper_attention(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  ffn_ = layers::FeedForward(*this, whisper_feed_forward(dim, ffn_dim));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  final_layer_norm_->set_adds_residual(true);  // the kernel a linked norm runs
}

// The norms hand their GEMMs a GemmInput: the served-dtype tensor, or, when
// linked (a quantized model's pre-norm), the 8-bit input itself.
Tensor WhisperEncoderLayer::forward(const Tensor& x, const Tensor& key_mask) const {
  const layers::GemmInput normalized = self_attn_layer_norm_->forward_to_gemm(x);
  const Tensor attended = self_attn_->forward(normalized, normalized, key_mask);
  const layers::LayerNorm::AddResult mid = final_layer_norm_->add_forward_to_gemm(attended, x);
  return ops::add(mid.sum, ffn_.forward(mid.normalized));
}

}  // namespace oasr::models
