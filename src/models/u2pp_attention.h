// WeNet's attention layers with its state-dict names: MultiHeadedAttention
// (linear_q/k/v/out; the decoder's self- and cross-attention) and
// RelPositionMultiHeadedAttention (adds linear_pos, pos_bias_u, pos_bias_v;
// the Conformer encoder's self-attention, with its streaming KV cache).
//
// Masks are uint8 (nonzero = attend), broadcastable to the scores
// [B, H, Tq, Tk] with PyTorch's rule: WeNet's (B, 1|Tq, Tk) mask unsqueezed
// at dimension 1. Masked keys get probability exactly 0 and a query with no
// key left attends to nothing (a zero context), as in WeNet. An undefined
// mask attends everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/linear.h"
#include "layers/module.h"

namespace oasr::models {

class MultiHeadedAttention : public Module {
 public:
  // WeNet's bias flags: query_bias covers linear_q and linear_out.
  MultiHeadedAttention(int64_t heads, int64_t dim, bool query_bias = true, bool key_bias = true,
                       bool value_bias = true);

  // query [B, Tq, D] attends over memory [Bm, Tk, D] (keys and values are
  // both projected from memory). Bm is B, or 1 for one memory shared by all
  // B queries (attention rescoring: N hypotheses over one utterance); the
  // shared memory is projected once and the queries of all B rows go through
  // the same per-head product. With Bm = 1 the mask must have batch size 1.
  // query / memory: served-dtype tensors, or a pre-norm's 8-bit output for
  // the projections that read it (self-attention passes the same one twice).
  Tensor forward(const layers::GemmInput& query, const layers::GemmInput& memory,
                 const Tensor& mask) const;

  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return d_k_; }

 protected:
  MultiHeadedAttention(int64_t heads, int64_t dim, bool query_bias, bool key_bias, bool value_bias,
                       std::string type_name);
  // softmax(scores) (masked) times v [B, H, Tk, d_k], heads merged, linear_out.
  Tensor attend(const Tensor& scores, const Tensor& v, const Tensor& mask) const;
  float score_scale() const { return score_scale_; }

  int64_t heads_;
  int64_t d_k_;
  float score_scale_;  // 1 / sqrt(d_k) as float32
  std::shared_ptr<layers::Linear> linear_q_;
  std::shared_ptr<layers::Linear> linear_k_;
  std::shared_ptr<layers::Linear> linear_v_;
  std::shared_ptr<layers::Linear> linear_out_;
};

// Transformer-XL style attention as WeNet computes it (without rel_shift):
//   scores = ((q + pos_bias_u) k^T + (q + pos_bias_v) p^T) / sqrt(d_k),
// p = linear_pos(position rows of the keys). With a KV cache the keys and
// values are [cached frames, current frames].
class RelPositionMultiHeadedAttention : public MultiHeadedAttention {
 public:
  RelPositionMultiHeadedAttention(int64_t heads, int64_t dim, bool query_bias = true,
                                  bool key_bias = true, bool value_bias = true);

  struct Output {
    Tensor out;    // [B, T, D]
    Tensor cache;  // [B, H, Tk, 2 d_k]: keys then values (WeNet's layout); only on request
  };

  // x [B, T, D]; pos_emb [1, Tk, D] with Tk = cached frames + T; att_cache
  // undefined/empty or [B, H, cached, 2 d_k] (WeNet's per-layer cache slice:
  // the last dimension holds keys then values).
  // x: the served-dtype tensor or norm_mha's 8-bit output (shared by
  // linear_q / linear_k / linear_v).
  Output forward(const layers::GemmInput& x, const Tensor& mask, const Tensor& pos_emb,
                 const Tensor& att_cache, bool return_cache) const;

 private:
  std::shared_ptr<layers::Linear> linear_pos_;
};

}  // namespace oasr::models
