#include "models/qwen2_audio/qwen2_blocks.h"

#include <cmath>

#include "core/error.h"
#include "ops/cached_attention.h"
#include "ops/elementwise.h"
#include "ops/rotary_embedding.h"

namespace oasr::models {

Qwen2Attention::Qwen2Attention(const Qwen2TextConfig& config)
    : Module("Qwen2Attention"),
      heads_(config.num_attention_heads),
      kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim()),
      // HF divides the scores by math.sqrt(head_dim); one float32 factor here.
      score_scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(config.head_dim())))) {
  const int64_t hidden = config.hidden_size;
  q_proj_ =
      register_module("q_proj", std::make_shared<layers::Linear>(hidden, heads_ * head_dim_, true));
  k_proj_ = register_module("k_proj",
                            std::make_shared<layers::Linear>(hidden, kv_heads_ * head_dim_, true));
  v_proj_ = register_module("v_proj",
                            std::make_shared<layers::Linear>(hidden, kv_heads_ * head_dim_, true));
  o_proj_ = register_module("o_proj",
                            std::make_shared<layers::Linear>(heads_ * head_dim_, hidden, false));
}

Tensor Qwen2Attention::forward(const Tensor& x, const Qwen2Places& where,
                               layers::PagedKvCache& cache, int64_t layer) const {
  const int64_t rows = x.size(0);
  const int64_t n = x.size(1);
  // HF scales the scores by 1 / sqrt(head_dim); the cached attention takes
  // the query scaled instead (one float32 product per element).
  const Tensor q =
      ops::scale(ops::rotary_embedding(q_proj_->forward(x).view({rows, n, heads_, head_dim_}),
                                       where.positions, where.inv_freq),
                 score_scale_);
  const Tensor k = ops::rotary_embedding(k_proj_->forward(x).view({rows, n, kv_heads_, head_dim_}),
                                         where.positions, where.inv_freq);
  const Tensor v = v_proj_->forward(x).view({rows, n, kv_heads_, head_dim_});
  cache.append(layer, k, v);
  // [R, n, H * d]: each row over its own sequence's keys, query head h
  // reading key head h / (H / KV) (HF's repeat_kv).
  return o_proj_->forward(ops::cached_attention(cache.attention_inputs(layer, q, /*causal=*/true)));
}

Qwen2Mlp::Qwen2Mlp(const Qwen2TextConfig& config) : Module("Qwen2MLP") {
  const int64_t hidden = config.hidden_size;
  const int64_t inner = config.intermediate_size;
  gate_proj_ = register_module(
      "gate_proj", std::make_shared<layers::LinearActivation>(hidden, inner, Activation::kSwish,
                                                              /*bias=*/false));
  up_proj_ = register_module("up_proj", std::make_shared<layers::Linear>(hidden, inner, false));
  down_proj_ = register_module("down_proj", std::make_shared<layers::Linear>(inner, hidden, false));
}

Tensor Qwen2Mlp::forward(const Tensor& x) const {
  return down_proj_->forward(ops::mul(gate_proj_->forward(x), up_proj_->forward(x)));
}

Qwen2DecoderLayer::Qwen2DecoderLayer(const Qwen2TextConfig& config) : Module("Qwen2DecoderLayer") {
  const auto eps = static_cast<float>(config.rms_norm_eps);
  self_attn_ = register_module("self_attn", std::make_shared<Qwen2Attention>(config));
  mlp_ = register_module("mlp", std::make_shared<Qwen2Mlp>(config));
  input_layernorm_ = register_module("input_layernorm",
                                     std::make_shared<layers::RmsNorm>(config.hidden_size, eps));
  post_attention_layernorm_ = register_module(
      "post_attention_layernorm", std::make_shared<layers::RmsNorm>(config.hidden_size, eps));
}

Tensor Qwen2DecoderLayer::forward(const Tensor& x, const Qwen2Places& where,
                                  layers::PagedKvCache& cache, int64_t layer) const {
  const Tensor attended =
      ops::add(x, self_attn_->forward(input_layernorm_->forward(x), where, cache, layer));
  return ops::add(attended, mlp_->forward(post_attention_layernorm_->forward(attended)));
}

}  // namespace oasr::models
