#include "models/u2pp_attention.h"

#include <cmath>

#include "core/env.h"
#include "core/error.h"
#include "models/u2pp_blocks.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/softmax.h"

namespace oasr::models {

using u2pp_detail::concat;
using u2pp_detail::merge_heads;
using u2pp_detail::split_heads;

MultiHeadedAttention::MultiHeadedAttention(int64_t heads, int64_t dim, bool query_bias,
                                           bool key_bias, bool value_bias)
    : MultiHeadedAttention(heads, dim, query_bias, key_bias, value_bias, "MultiHeadedAttention") {}

MultiHeadedAttention::MultiHeadedAttention(int64_t heads, int64_t dim, bool query_bias,
                                           bool key_bias, bool value_bias, std::string type_name)
    : Module(std::move(type_name)), heads_(heads), d_k_(heads > 0 ? dim / heads : 0) {
  OASR_CHECK(heads > 0 && dim % heads == 0, kInvalidArgument, "attention: width ", dim,
             " is not a multiple of the head count ", heads);
  score_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_k_)));
  linear_q_ = register_module("linear_q", std::make_shared<layers::Linear>(dim, dim, query_bias));
  linear_k_ = register_module("linear_k", std::make_shared<layers::Linear>(dim, dim, key_bias));
  linear_v_ = register_module("linear_v", std::make_shared<layers::Linear>(dim, dim, value_bias));
  linear_out_ =
      register_module("linear_out", std::make_shared<layers::Linear>(dim, dim, query_bias));
}

Tensor MultiHeadedAttention::attend(const Tensor& scores, const Tensor& v,
                                    const Tensor& mask) const {
  const Tensor probs = mask.defined() ? ops::masked_softmax(scores, mask) : ops::softmax(scores);
  return linear_out_->forward(merge_heads(ops::matmul(probs, v)));
}

Tensor MultiHeadedAttention::forward(const layers::GemmInput& query,
                                     const layers::GemmInput& memory, const Tensor& mask) const {
  OASR_CHECK(query.dim() == 3 && memory.dim() == 3, kInvalidArgument, path(),
             ": attention takes query [B, Tq, D] and memory [B, Tk, D], got ",
             shape_str(query.shape()), " and ", shape_str(memory.shape()));
  const int64_t batch = query.size(0);
  const int64_t steps = query.size(1);
  const int64_t memory_batch = memory.size(0);
  OASR_CHECK(memory_batch == batch || memory_batch == 1, kInvalidArgument, path(),
             ": memory batch ", memory_batch, " must equal the query batch ", batch, " or be 1");
  const Tensor k = split_heads(linear_k_->forward(memory), heads_);
  const Tensor v = split_heads(linear_v_->forward(memory), heads_);
  const Tensor q = linear_q_->forward(query);
  if (memory_batch == batch) {
    const Tensor scores =
        ops::scale(ops::matmul(split_heads(q, heads_), k, /*transpose_b=*/true), score_scale_);
    return attend(scores, v, mask);
  }
  // One memory for all B rows: fold the batch into the query steps,
  // [B, Tq, H, d_k] -> [1, H, B * Tq, d_k], so each head is one product.
  OASR_CHECK(!mask.defined() || mask.numel() == mask.size(-1), kInvalidArgument, path(),
             ": a memory shared by the batch takes a key mask [1, 1, 1, Tk], got ",
             shape_str(mask.shape()));
  const Tensor folded = q.view({batch, steps, heads_, d_k_})
                            .transpose(0, 2)  // [H, Tq, B, d_k]
                            .transpose(1, 2)  // [H, B, Tq, d_k]
                            .contiguous()
                            .view({1, heads_, batch * steps, d_k_});
  const Tensor scores = ops::scale(ops::matmul(folded, k, /*transpose_b=*/true), score_scale_);
  Tensor probs;
  if (mask.defined()) {
    // The mask varies over keys only when shared: keep its last dimension.
    probs = ops::masked_softmax(scores, mask.reshape({1, 1, 1, mask.size(-1)}));
  } else {
    probs = ops::softmax(scores);
  }
  const Tensor context = ops::matmul(probs, v)  // [1, H, B * Tq, d_k]
                             .view({heads_, batch, steps, d_k_})
                             .transpose(0, 1)  // [B, H, Tq, d_k]
                             .transpose(1, 2)  // [B, Tq, H, d_k]
                             .contiguous()
                             .view({batch, steps, heads_ * d_k_});
  return linear_out_->forward(context);
}

RelPositionMultiHeadedAttention::RelPositionMultiHeadedAttention(int64_t heads, int64_t dim,
                                                                 bool query_bias, bool key_bias,
                                                                 bool value_bias)
    : MultiHeadedAttention(heads, dim, query_bias, key_bias, value_bias,
                           "RelPositionMultiHeadedAttention") {
  linear_pos_ = register_module("linear_pos", std::make_shared<layers::Linear>(dim, dim, false));
  register_parameter("pos_bias_u", {heads, d_k_});
  register_parameter("pos_bias_v", {heads, d_k_});
}

RelPositionMultiHeadedAttention::Output RelPositionMultiHeadedAttention::forward(
    const layers::GemmInput& x, const Tensor& mask, const Tensor& pos_emb, const Tensor& att_cache,
    bool return_cache) const {
  OASR_CHECK(x.dim() == 3, kInvalidArgument, path(), ": x must be [B, T, D], got ",
             shape_str(x.shape()));
  const int64_t batch = x.size(0);
  // The projections by head, [B, T, H, d_k], still in their [B, T, H * d_k]
  // storage: the fused kernel reads each head in place.
  const auto by_head = [&](const Tensor& t) {
    return t.view({t.size(0), t.size(1), heads_, d_k_});
  };
  Tensor q = by_head(linear_q_->forward(x));
  Tensor k = by_head(linear_k_->forward(x));
  Tensor v = by_head(linear_v_->forward(x));
  if (att_cache.defined() && att_cache.numel() > 0) {
    OASR_CHECK(att_cache.dim() == 4 && att_cache.size(0) == batch && att_cache.size(1) == heads_ &&
                   att_cache.size(3) == 2 * d_k_,
               kInvalidArgument, path(), ": att_cache must be [", batch, ", ", heads_,
               ", cached frames, ", 2 * d_k_, "], got ", shape_str(att_cache.shape()));
    // The cache is [B, H, cached, 2 * d_k]: keys, then values.
    k = concat({att_cache.narrow(3, 0, d_k_), k.transpose(1, 2)}, 2).transpose(1, 2);
    v = concat({att_cache.narrow(3, d_k_, d_k_), v.transpose(1, 2)}, 2).transpose(1, 2);
  }
  const int64_t keys = k.size(1);
  OASR_CHECK(pos_emb.dim() == 3 && pos_emb.size(0) == 1 && pos_emb.size(1) == keys,
             kInvalidArgument, path(), ": pos_emb must be [1, ", keys,
             ", D] (one row per key), got ", shape_str(pos_emb.shape()));
  const Tensor p = by_head(linear_pos_->forward(pos_emb));  // [1, Tk, H, d_k]

  Output output;
  if (return_cache) output.cache = concat({k.transpose(1, 2), v.transpose(1, 2)}, 3);
  if (q.device().is_cuda() && env::fused_attention_enabled()) {
    ops::RelPositionAttentionInputs in{
        q, k, v, p, param("pos_bias_u"), param("pos_bias_v"), mask, score_scale_};
    if (ops::rel_position_attention_fusable(in)) {
      output.out = linear_out_->forward(ops::rel_position_attention(in));
      return output;
    }
  }
  // Unfused: (q + pos_bias_u) and (q + pos_bias_v) as [B, H, T, d_k]; the
  // positions repeated per batch row.
  const Tensor q_u = ops::add(q, param("pos_bias_u")).transpose(1, 2).contiguous();
  const Tensor q_v = ops::add(q, param("pos_bias_v")).transpose(1, 2).contiguous();
  const Tensor k_heads = k.transpose(1, 2).contiguous();  // [B, H, Tk, d_k]
  const Tensor v_heads = v.transpose(1, 2).contiguous();
  Tensor p_heads = p.transpose(1, 2).contiguous();  // [1, H, Tk, d_k]
  if (batch > 1) p_heads = concat(std::vector<Tensor>(static_cast<size_t>(batch), p_heads), 0);

  const Tensor content = ops::matmul(q_u, k_heads, /*transpose_b=*/true);
  const Tensor position = ops::matmul(q_v, p_heads, /*transpose_b=*/true);
  const Tensor scores = ops::scale(ops::add(content, position), score_scale_);
  output.out = attend(scores, v_heads, mask);
  return output;
}

}  // namespace oasr::models
