// WeNet's attention decoders with its state-dict names: TransformerDecoder
// (embed.0 token embedding, embed.1 PositionalEncoding, decoders.N,
// after_norm, output_layer) and BiTransformerDecoder (left_decoder,
// right_decoder). Teacher-forced scoring of whole hypotheses, which is all
// attention rescoring needs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/u2pp/u2pp_blocks.h"
#include "models/u2pp/u2pp_config.h"

namespace oasr::models {

// WeNet's DecoderLayer: self-attention (causal + padding mask), cross
// attention over the encoder output, feed-forward; norm1/2/3 before
// (normalize_before) or after each residual.
class DecoderLayer : public Module {
 public:
  DecoderLayer(int64_t dim, const U2ppDecoderConfig& config);
  // x [N, L, D]; self_mask uint8 [N, 1, L, L]; memory [N or 1, T, D] with
  // memory_mask uint8 broadcastable to [N, 1, 1, T] (or undefined).
  Tensor forward(const Tensor& x, const Tensor& self_mask, const Tensor& memory,
                 const Tensor& memory_mask) const;

 private:
  bool normalize_before_;
  std::shared_ptr<layers::MultiHeadAttention> self_attn_;
  std::shared_ptr<layers::MultiHeadAttention> src_attn_;
  std::shared_ptr<PositionwiseFeedForward> feed_forward_;
  std::shared_ptr<layers::LayerNorm> norm1_;
  std::shared_ptr<layers::LayerNorm> norm2_;
  std::shared_ptr<layers::LayerNorm> norm3_;
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(int64_t vocab_size, int64_t dim, int64_t num_blocks,
                     const U2ppDecoderConfig& config);
  // WeNet's TransformerDecoder.forward: memory [N or 1, T, D] (1: shared by
  // all N rows), memory_mask uint8 [N or 1, 1, T] (WeNet's layout) or
  // undefined (every frame valid); tokens int64 [N, L] (<sos> first), lengths
  // int32/int64 [N] counting <sos>. Returns the logits [N, L, V] (before
  // log-softmax).
  Tensor forward(const Tensor& memory, const Tensor& memory_mask, const Tensor& tokens,
                 const Tensor& lengths) const;

 private:
  std::shared_ptr<layers::Embedding> embedding_;
  std::shared_ptr<SinusoidalPositions> positions_;
  std::vector<std::shared_ptr<DecoderLayer>> decoders_;
  std::shared_ptr<layers::LayerNorm> after_norm_;
  std::shared_ptr<layers::Linear> output_layer_;
  float xscale_;
  bool normalize_before_;
};

// The decoder outputs attention rescoring consumes: log-softmax over the
// vocabulary, float32 [N, L, V]. `right` is undefined when the right-to-left
// decoder did not run (reverse_weight 0 or a unidirectional decoder).
struct AttentionDecoderLogProbs {
  Tensor left;
  Tensor right;
};

// WeNet's BiTransformerDecoder: left_decoder reads <sos> + hypothesis,
// right_decoder <sos> + reversed hypothesis.
class BiTransformerDecoder : public Module {
 public:
  BiTransformerDecoder(int64_t vocab_size, int64_t dim, const U2ppDecoderConfig& config);
  const TransformerDecoder& left_decoder() const { return *left_; }
  const TransformerDecoder& right_decoder() const { return *right_; }

 private:
  std::shared_ptr<TransformerDecoder> left_;
  std::shared_ptr<TransformerDecoder> right_;
};

}  // namespace oasr::models
