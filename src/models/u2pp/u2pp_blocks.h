// Small building blocks the U2++ encoder and decoder share: the sinusoid
// position table, global CMVN, WeNet's attention and feed-forward modules as
// the shared layers compute them (layers/attention.h, layers/feed_forward.h),
// and the tensor plumbing (padded-frame zeroing, masks, lengths) that the
// blocks need between layer calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/activations.h"
#include "layers/attention.h"
#include "layers/feed_forward.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace oasr::models {

// WeNet's PositionalEncoding table: row p, channel 2i is sin(p * w_i) and
// channel 2i + 1 is cos(p * w_i), w_i = exp(2i * -(ln 10000 / d)), with the
// float32 roundings of WeNet's construction. WeNet checkpoints written since
// early 2024 store the table as a buffer "pe" [1, max_len, d]; it is an
// optional slot here, used when loaded and computed otherwise.
class SinusoidalPositions : public Module {
 public:
  SinusoidalPositions(int64_t dim, int64_t max_len);
  // Rows [offset, offset + count) as [1, count, d] in `dtype` on `device`.
  // A loaded table is sliced where it lives (the model's dtype and device);
  // otherwise the rows are computed on the host in float32, then converted
  // once and moved. Refuses rows past max_len, as WeNet does (an utterance
  // longer than the table).
  Tensor rows(int64_t offset, int64_t count, DType dtype = DType::kF32,
              Device device = Device::cpu()) const;
  int64_t dim() const { return dim_; }
  int64_t max_len() const { return max_len_; }

 private:
  int64_t dim_;
  int64_t max_len_;
  std::vector<float> frequencies_;  // w_i, float32 as WeNet rounds them
};

// (x - mean) * istd over the last dimension (WeNet's GlobalCMVN, norm_var).
class GlobalCmvn : public Module {
 public:
  explicit GlobalCmvn(int64_t dim);
  Tensor forward(const Tensor& x) const;
};

// WeNet's MultiHeadedAttention (the decoder's self- and cross-attention):
// linear_q / linear_k / linear_v / linear_out, query_bias covering linear_q
// and linear_out, scores (q k^T) / sqrt(d_k).
std::shared_ptr<layers::MultiHeadAttention> make_wenet_attention(int64_t heads, int64_t dim);

// WeNet's RelPositionMultiHeadedAttention (the Conformer encoder's
// self-attention): the same projections plus linear_pos, pos_bias_u and
// pos_bias_v.
std::shared_ptr<layers::RelPositionMultiHeadAttention> make_wenet_rel_position_attention(
    int64_t heads, int64_t dim, bool query_bias, bool key_bias, bool value_bias);

// w_2(act(w_1(x))) (WeNet's PositionwiseFeedForward at inference).
class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(int64_t dim, int64_t hidden, Activation activation, bool bias);
  // x: the served-dtype tensor or its pre-norm's 8-bit output.
  Tensor forward(const layers::GemmInput& x) const { return ffn_.forward(x); }

 private:
  layers::FeedForward ffn_;
};

// A container named like torch.nn.Sequential so checkpoint paths such as
// "embed.out.0.weight" resolve; it only holds children.
class SequentialContainer : public Module {
 public:
  SequentialContainer() : Module("Sequential") {}
};

namespace u2pp_detail {

// True when some lengths[b] < frames.
bool has_padding(std::span<const int64_t> lengths, int64_t frames);

// `x` converted to `like`'s dtype and moved to its device (x itself when
// both already match): the model's float input and host-built tables enter
// the device path here.
Tensor to_like(const Tensor& x, const Tensor& like);

// Lengths as int64 values from an int32/int64 CPU tensor of shape [B].
std::vector<int64_t> lengths_vector(const Tensor& lengths, const char* what);

}  // namespace u2pp_detail
}  // namespace oasr::models
