#include "models/whisper/whisper_blocks.h"

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

namespace {

layers::FeedForwardSpec whisper_ffn(int64_t dim, int64_t ffn_dim) {
  return {dim, ffn_dim, Activation::kGeluErf, /*bias=*/true, "fc1", "fc2"};
}

}  // namespace

WhisperEncoderLayer::WhisperEncoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperEncoderLayer") {
  self_attn_ = register_module("self_attn", make_whisper_attention(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  ffn_ = layers::FeedForward(*this, whisper_ffn(dim, ffn_dim));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  final_layer_norm_->set_adds_residual(true);  // the kernel a linked norm runs
}

// The norms hand their GEMMs a GemmInput: the served-dtype tensor, or, when
// linked (a quantized model's pre-norm), the 8-bit input itself.
Tensor WhisperEncoderLayer::forward(const Tensor& x) const {
  const layers::GemmInput normalized = self_attn_layer_norm_->forward_to_gemm(x);
  const Tensor attended = self_attn_->forward(normalized, normalized, Tensor());
  const layers::LayerNorm::AddResult mid = final_layer_norm_->add_forward_to_gemm(attended, x);
  return ops::add(mid.sum, ffn_.forward(mid.normalized));
}

WhisperDecoderLayer::WhisperDecoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperDecoderLayer") {
  self_attn_ = register_module("self_attn", make_whisper_attention(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  encoder_attn_ = register_module("encoder_attn", make_whisper_attention(dim, heads));
  encoder_attn_layer_norm_ =
      register_module("encoder_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  ffn_ = layers::FeedForward(*this, whisper_ffn(dim, ffn_dim));
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
