#include "models/qwen2_audio/qwen2_blocks.h"

#include <cmath>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/rotary_embedding.h"
#include "ops/softmax.h"

namespace oasr::models {

Tensor qwen2_causal_mask(int64_t queries, int64_t past, Device device) {
  const int64_t keys = past + queries;
  std::vector<uint8_t> keep(static_cast<size_t>(queries * keys), 0);
  for (int64_t i = 0; i < queries; ++i) {
    for (int64_t t = 0; t <= past + i; ++t) keep[static_cast<size_t>(i * keys + t)] = 1;
  }
  return Tensor::from_vector(keep, {queries, keys}).to(device);
}

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

Tensor Qwen2Attention::forward(const Tensor& x, const Qwen2Places& where, layers::KvCache& cache,
                               int64_t layer) const {
  const int64_t rows = x.size(0);
  const int64_t n = x.size(1);
  const int64_t group = heads_ / kv_heads_;
  const Tensor q = ops::rotary_embedding(q_proj_->forward(x).view({rows, n, heads_, head_dim_}),
                                         where.positions, where.inv_freq);
  const Tensor k = ops::rotary_embedding(k_proj_->forward(x).view({rows, n, kv_heads_, head_dim_}),
                                         where.positions, where.inv_freq);
  const Tensor v = v_proj_->forward(x).view({rows, n, kv_heads_, head_dim_});
  cache.append(layer, k, v);
  const layers::KvCache::View kv = cache.read(layer);  // [R, KV, T, d]
  const int64_t keys = kv.keys.size(2);
  // The query heads of one key/value head are adjacent (HF's repeat_kv:
  // head h reads kv head h / group), so [R, H, n, d] is [R, KV, group * n, d]
  // and each kv head serves its group in one product.
  const Tensor grouped_q =
      q.transpose(1, 2).contiguous().view({rows, kv_heads_, group * n, head_dim_});
  const Tensor scores =
      ops::scale(ops::matmul(grouped_q, kv.keys, /*transpose_b=*/true), score_scale_)
          .view({rows, heads_, n, keys});
  const Tensor probs = where.causal_mask.defined()
                           ? ops::masked_softmax(scores, where.causal_mask, -1)
                           : ops::softmax(scores, -1);
  const Tensor context =
      ops::matmul(probs.view({rows, kv_heads_, group * n, keys}), kv.values)  // [R, KV, g n, d]
          .view({rows, heads_, n, head_dim_})
          .transpose(1, 2)
          .contiguous()
          .view({rows, n, heads_ * head_dim_});
  return o_proj_->forward(context);
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

Tensor Qwen2DecoderLayer::forward(const Tensor& x, const Qwen2Places& where, layers::KvCache& cache,
                                  int64_t layer) const {
  const Tensor attended =
      ops::add(x, self_attn_->forward(input_layernorm_->forward(x), where, cache, layer));
  return ops::add(attended, mlp_->forward(post_attention_layernorm_->forward(attended)));
}

}  // namespace oasr::models
