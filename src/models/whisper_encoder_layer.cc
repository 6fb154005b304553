#include "models/whisper_encoder_layer.h"

#include <cmath>
#include <string>

#include "core/error.h"

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

WhisperEncoderTrunk::WhisperEncoderTrunk(Module& owner, const WhisperEncoderTrunkSpec& spec)
    : spec_(spec) {
  const int64_t d = spec.d_model;
  conv1_ = owner.register_module("conv1", std::make_shared<layers::Conv1d>(
                                              spec.num_mel_bins, d, 3, /*stride=*/1,
                                              /*padding=*/1, /*bias=*/true, Activation::kGeluErf));
  conv2_ = owner.register_module(
      "conv2", std::make_shared<layers::Conv1d>(d, d, 3, /*stride=*/2, /*padding=*/1,
                                                /*bias=*/true, Activation::kGeluErf));
  embed_positions_ = owner.register_module(
      "embed_positions", std::make_shared<layers::Embedding>(spec.max_source_positions, d));
  auto list = owner.register_module("layers", std::make_shared<Module>("ModuleList"));
  for (int64_t i = 0; i < spec.layers; ++i) {
    layers_.push_back(list->register_module(
        std::to_string(i), std::make_shared<WhisperEncoderLayer>(d, spec.heads, spec.ffn_dim)));
  }
}

const Tensor& WhisperEncoderTrunk::position_table() const {
  return embed_positions_->param("weight");
}

void WhisperEncoderTrunk::check_input(const Tensor& mel, const char* what) const {
  const int64_t frames = 2 * spec_.max_source_positions;
  OASR_CHECK(
      mel.defined() && mel.dim() == 3 && mel.size(1) == spec_.num_mel_bins && mel.size(2) == frames,
      kInvalidArgument, what, ": the log-mel input must be float32 [B, ", spec_.num_mel_bins, ", ",
      frames, "] (one 30 s window, padded as ", "WhisperFeatureExtractor pads it), got ",
      mel.defined() ? mel.str() : std::string("undefined"));
}

Tensor WhisperEncoderTrunk::forward(const Tensor& mel, const Tensor& key_mask,
                                    const char* what) const {
  check_input(mel, what);
  // The host's float32 log-mel in the served dtype, on the served device
  // (converted on the host: half the bytes cross for a 16-bit model). The
  // position table says which: conv1's weight is int8 under --module-types conv1d.
  const Tensor& served = position_table();
  const Tensor input = mel.to(DType::kF32).to(served.dtype()).to(served.device());
  const Tensor x = conv2_->forward(conv1_->forward(input));  // [B, d, T]
  // [B, d, T] -> [B, T, d], plus the position table (one row per frame).
  Tensor hidden = ops::add(x.transpose(1, 2).contiguous(), served);
  for (const auto& layer : layers_) hidden = layer->forward(hidden, key_mask);
  return hidden;
}

}  // namespace oasr::models
