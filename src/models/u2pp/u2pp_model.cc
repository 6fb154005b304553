#include "models/u2pp/u2pp_model.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "ops/log_softmax.h"

namespace oasr::models {

CtcHead::CtcHead(int64_t dim, int64_t vocab_size) : Module("CTC") {
  ctc_lo_ = register_module("ctc_lo", std::make_shared<layers::Linear>(dim, vocab_size));
}

Tensor CtcHead::log_softmax(const Tensor& x) const {
  // The logits come in the served dtype; the normalisation runs in float32
  // (a no-op conversion for a float32 model) so that 16-bit serving hands
  // the searches log-probs rounded once, not a 16-bit log_softmax.
  return ops::log_softmax(ctc_lo_->forward(x).to(DType::kF32), -1);
}

namespace {

const U2ppConfig& validated(const U2ppConfig& config) {
  config.validate();
  return config;
}

}  // namespace

U2ppModel::U2ppModel(const U2ppConfig& config) : Module("U2pp"), config_(validated(config)) {
  const int64_t dim = config.encoder.output_size;
  encoder_ = register_module("encoder", std::make_shared<ConformerEncoder>(config.encoder));
  if (config.decoder.type == U2ppDecoderType::kBiTransformer) {
    bidirectional_ = register_module(
        "decoder", std::make_shared<BiTransformerDecoder>(config.vocab_size, dim, config.decoder));
  } else {
    unidirectional_ = register_module(
        "decoder", std::make_shared<TransformerDecoder>(config.vocab_size, dim,
                                                        config.decoder.num_blocks, config.decoder));
  }
  ctc_ = register_module("ctc", std::make_shared<CtcHead>(dim, config.vocab_size));
}

void U2ppModel::load(const TensorSource& source) {
  LoadOptions options;
  options.strict = true;
  load_state_dict(source, options);
}

ConformerEncoder::Output U2ppModel::encode(const Tensor& feats, const Tensor& lengths,
                                           const U2ppEncodeOptions& options) const {
  if (!(options.simulate_streaming && options.decoding_chunk_size > 0)) {
    return encoder_->forward(feats, lengths, options.decoding_chunk_size,
                             options.num_decoding_left_chunks);
  }
  const std::vector<int64_t> lens = u2pp_detail::lengths_vector(lengths, "U2++ lengths");
  OASR_CHECK(feats.dim() == 3 && static_cast<int64_t>(lens.size()) == feats.size(0),
             kInvalidArgument, "U2++ encode: lengths has ", lens.size(), " entries for features ",
             shape_str(feats.shape()));
  std::vector<Tensor> rows;
  std::vector<int64_t> out_lengths;
  int64_t longest = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    OASR_CHECK(lens[b] >= 0 && lens[b] <= feats.size(1), kInvalidArgument, "U2++ encode: length ",
               lens[b], " outside [0, ", feats.size(1), "]");
    const Tensor one = feats.narrow(0, static_cast<int64_t>(b), 1).narrow(1, 0, lens[b]);
    rows.push_back(encoder_->forward_chunk_by_chunk(one, options.decoding_chunk_size,
                                                    options.num_decoding_left_chunks));
    out_lengths.push_back(rows.back().size(1));
    longest = std::max(longest, out_lengths.back());
  }
  if (rows.size() == 1) {
    return {rows.front(), Tensor::from_vector<int64_t>(out_lengths, {1})};
  }
  const int64_t batch = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::zeros({batch, longest, config_.encoder.output_size}, rows.front().dtype(),
                             rows.front().device());
  for (int64_t b = 0; b < batch; ++b) {
    const Tensor& row = rows[static_cast<size_t>(b)];
    if (row.size(1) > 0) out.narrow(0, b, 1).narrow(1, 0, row.size(1)).copy_(row);
  }
  return {out, Tensor::from_vector<int64_t>(out_lengths, {batch})};
}

Tensor U2ppModel::ctc_log_probs(const Tensor& encoder_out) const {
  return ctc_->log_softmax(encoder_out);
}

AttentionDecoderLogProbs U2ppModel::forward_attention_decoder(const Tensor& encoder_out,
                                                              const Tensor& hyps,
                                                              const Tensor& hyps_lens,
                                                              const Tensor& r_hyps,
                                                              double reverse_weight) const {
  OASR_CHECK(encoder_out.dim() == 3 && encoder_out.size(0) == 1, kInvalidArgument,
             "U2++ forward_attention_decoder: encoder_out must be one utterance [1, T, D], got ",
             shape_str(encoder_out.shape()));
  // One memory shared by all hypotheses, every frame valid (WeNet repeats it
  // N times with an all-ones mask; the shared form computes the same).
  AttentionDecoderLogProbs out;
  const TransformerDecoder& left =
      bidirectional_ ? bidirectional_->left_decoder() : *unidirectional_;
  // Logits in the served dtype, log_softmax in float32 on the device (as the
  // CTC head does); the caller brings the scores to the host.
  out.left =
      ops::log_softmax(left.forward(encoder_out, Tensor(), hyps, hyps_lens).to(DType::kF32), -1);
  if (reverse_weight > 0.0 && bidirectional_) {
    OASR_CHECK(r_hyps.defined() && r_hyps.shape() == hyps.shape(), kInvalidArgument,
               "U2++ forward_attention_decoder: reverse_weight > 0 needs r_hyps shaped like hyps ",
               shape_str(hyps.shape()));
    out.right = ops::log_softmax(bidirectional_->right_decoder()
                                     .forward(encoder_out, Tensor(), r_hyps, hyps_lens)
                                     .to(DType::kF32),
                                 -1);
  }
  return out;
}

std::unique_ptr<U2ppModel> load_u2pp_model(const ModelSource& source) {
  OASR_CHECK(source.weights != nullptr, kInvalidArgument, "load_u2pp_model: the source from ",
             source.dir.string(), " holds no weights");
  auto model = std::make_unique<U2ppModel>(source.config.model);
  model->load(*source.weights);
  return model;
}

}  // namespace oasr::models
