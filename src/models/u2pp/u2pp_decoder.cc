#include "models/u2pp/u2pp_decoder.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/elementwise.h"

namespace oasr::models {

// ---- DecoderLayer -------------------------------------------------------------------

DecoderLayer::DecoderLayer(int64_t dim, const U2ppDecoderConfig& c)
    : Module("DecoderLayer"), normalize_before_(c.normalize_before) {
  self_attn_ = register_module("self_attn", make_wenet_attention(c.attention_heads, dim));
  src_attn_ = register_module("src_attn", make_wenet_attention(c.attention_heads, dim));
  feed_forward_ = register_module("feed_forward", std::make_shared<PositionwiseFeedForward>(
                                                      dim, c.linear_units, c.activation, true));
  norm1_ = register_module("norm1", std::make_shared<layers::LayerNorm>(dim, c.norm_eps));
  norm2_ = register_module("norm2", std::make_shared<layers::LayerNorm>(dim, c.norm_eps));
  norm3_ = register_module("norm3", std::make_shared<layers::LayerNorm>(dim, c.norm_eps));
  norm2_->set_adds_residual(true);  // the kernel a linked norm runs (pre-norm)
  norm3_->set_adds_residual(true);
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& self_mask, const Tensor& memory,
                             const Tensor& memory_mask) const {
  if (normalize_before_) {
    // norm1/2/3 feed only GEMMs: armed by link_quantization they emit their
    // 8-bit output (norm1's shared by linear_q / linear_k / linear_v).
    const layers::GemmInput h = norm1_->forward_to_gemm(x);
    auto after_self = norm2_->add_forward_to_gemm(self_attn_->forward(h, h, self_mask), x);
    auto after_src = norm3_->add_forward_to_gemm(
        src_attn_->forward(after_self.normalized, memory, memory_mask), after_self.sum);
    return ops::add(after_src.sum, feed_forward_->forward(after_src.normalized));
  }
  Tensor y = norm1_->add_forward(self_attn_->forward(x, x, self_mask), x).normalized;
  y = norm2_->add_forward(src_attn_->forward(y, memory, memory_mask), y).normalized;
  return norm3_->add_forward(feed_forward_->forward(y), y).normalized;
}

// ---- TransformerDecoder -----------------------------------------------------------

TransformerDecoder::TransformerDecoder(int64_t vocab_size, int64_t dim, int64_t num_blocks,
                                       const U2ppDecoderConfig& config)
    : Module("TransformerDecoder") {
  // embed = nn.Sequential(nn.Embedding, PositionalEncoding)
  auto embed = register_module("embed", std::make_shared<SequentialContainer>());
  embedding_ = embed->register_module("0", std::make_shared<layers::Embedding>(vocab_size, dim));
  positions_ =
      embed->register_module("1", std::make_shared<SinusoidalPositions>(dim, config.pos_table_len));
  auto decoders = register_module("decoders", std::make_shared<SequentialContainer>());
  for (int64_t i = 0; i < num_blocks; ++i) {
    decoders_.push_back(
        decoders->register_module(std::to_string(i), std::make_shared<DecoderLayer>(dim, config)));
  }
  // WeNet creates after_norm either way; it applies it only with normalize_before.
  after_norm_ =
      register_module("after_norm", std::make_shared<layers::LayerNorm>(dim, config.norm_eps));
  normalize_before_ = config.normalize_before;
  output_layer_ =
      register_module("output_layer", std::make_shared<layers::Linear>(dim, vocab_size));
  xscale_ = static_cast<float>(std::sqrt(static_cast<double>(dim)));
}

Tensor TransformerDecoder::forward(const Tensor& memory, const Tensor& memory_mask,
                                   const Tensor& tokens, const Tensor& lengths) const {
  OASR_CHECK(tokens.dim() == 2, kInvalidArgument, path(), ": tokens must be [N, L], got ",
             shape_str(tokens.shape()));
  const int64_t rows = tokens.size(0);
  const int64_t steps = tokens.size(1);
  const std::vector<int64_t> lens = u2pp_detail::lengths_vector(lengths, "decoder lengths");
  OASR_CHECK(static_cast<int64_t>(lens.size()) == rows, kInvalidArgument, path(), ": ", lens.size(),
             " lengths for ", rows, " token rows");
  OASR_CHECK(memory.dim() == 3 && (memory.size(0) == rows || memory.size(0) == 1), kInvalidArgument,
             path(), ": memory must be [", rows, " or 1, T, D], got ", shape_str(memory.shape()));

  // WeNet: ~make_pad_mask(lengths) & subsequent_mask, as [N, 1, L, L],
  // built on the host and moved to the memory's device once.
  Tensor host_self_mask = Tensor::empty({rows, 1, steps, steps}, DType::kU8);
  uint8_t* m = host_self_mask.data<uint8_t>();
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t i = 0; i < steps; ++i) {
      for (int64_t j = 0; j < steps; ++j) {
        m[(n * steps + i) * steps + j] = (j <= i && j < lens[static_cast<size_t>(n)]) ? 1 : 0;
      }
    }
  }
  Tensor memory_mask_4d;
  if (memory_mask.defined()) {
    OASR_CHECK(memory_mask.dtype() == DType::kU8 && memory_mask.dim() == 3 &&
                   memory_mask.size(0) == memory.size(0) && memory_mask.size(1) == 1 &&
                   memory_mask.size(2) == memory.size(1),
               kInvalidArgument, path(), ": memory_mask must be uint8 [", memory.size(0), ", 1, ",
               memory.size(1), "], got ", shape_str(memory_mask.shape()));
    memory_mask_4d = memory_mask.unsqueeze(1).to(memory.device());
  }
  const Tensor self_mask = host_self_mask.to(memory.device());

  // x * sqrt(d) + pe (WeNet's PositionalEncoding; two float32 roundings).
  // Token ids live on the host (the searches build them); the embedding
  // gathers on the memory's device.
  const Tensor embedded = embedding_->forward(tokens.to(memory.device()));
  Tensor x = ops::add(ops::scale(embedded, xscale_),
                      positions_->rows(0, steps, embedded.dtype(), embedded.device()));
  for (const auto& layer : decoders_) x = layer->forward(x, self_mask, memory, memory_mask_4d);
  if (normalize_before_) x = after_norm_->forward(x);
  return output_layer_->forward(x);
}

// ---- BiTransformerDecoder ---------------------------------------------------------

BiTransformerDecoder::BiTransformerDecoder(int64_t vocab_size, int64_t dim,
                                           const U2ppDecoderConfig& config)
    : Module("BiTransformerDecoder") {
  left_ = register_module("left_decoder", std::make_shared<TransformerDecoder>(
                                              vocab_size, dim, config.num_blocks, config));
  right_ = register_module("right_decoder", std::make_shared<TransformerDecoder>(
                                                vocab_size, dim, config.r_num_blocks, config));
}

}  // namespace oasr::models
