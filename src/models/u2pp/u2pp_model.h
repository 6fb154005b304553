// U2ppModel: WeNet's ASRModel for the U2++ family (Conformer encoder, CTC
// head, Transformer or bidirectional Transformer decoder) as a Module tree
// whose parameter paths are exactly WeNet's state-dict keys, so a WeNet
// final.pt / avg_N.pt loads strictly:
//
//   auto model = load_u2pp_model(load_checkpoint_dir(dir));  // WeNet or native dir
//   // (or: U2ppModel model(config); model.load(tensor_source);)
//   U2ppEncodeOptions options;                     // WeNet's decode options
//   options.decoding_chunk_size = 16;
//   options.simulate_streaming = true;
//   auto enc = model->encode(fbank, lengths, options);  // [B, T', D], lengths [B]
//   Tensor ctc = model->ctc_log_probs(enc.out);         // [B, T', V]
//   // rescoring, per utterance b (its first enc.lengths[b] frames):
//   auto dec = model->forward_attention_decoder(enc_b, hyps, hyps_lens, r_hyps, 0.5);
//
// CPU float32, or on a CUDA device in float32/float16/bfloat16 after
// model.to(dtype) and model.to(device) (materialize_u2pp_model does both):
// inputs (fbank, token ids) arrive on the host and are moved; lengths stay
// host int64; encoder outputs are in the served dtype on the device; CTC and
// decoder log-probs are float32 on the device. Streaming sessions use U2ppStreamingEncoder
// (u2pp_streaming.h), or encoder().forward_chunk with WeNet's caches.
#pragma once

#include <cstdint>
#include <memory>

#include "layers/linear.h"
#include "layers/module.h"
#include "models/u2pp/model_source.h"
#include "models/u2pp/u2pp_config.h"
#include "models/u2pp/u2pp_decoder.h"
#include "models/u2pp/u2pp_encoder.h"

namespace oasr::models {

// WeNet's CTC module at inference: log_softmax(ctc_lo(x)).
class CtcHead : public Module {
 public:
  CtcHead(int64_t dim, int64_t vocab_size);
  Tensor log_softmax(const Tensor& x) const;  // [..., D] -> [..., V]

 private:
  std::shared_ptr<layers::Linear> ctc_lo_;
};

// How the encoder runs (WeNet's decode options of the same names).
struct U2ppEncodeOptions {
  // < 0: full attention; > 0: chunks of this many encoder frames; 0 refused.
  int64_t decoding_chunk_size = -1;
  // < 0: all earlier chunks are visible; >= 0: that many.
  int64_t num_decoding_left_chunks = -1;
  // With decoding_chunk_size > 0: run WeNet's forward_chunk_by_chunk (the
  // streaming computation with caches) instead of one pass with a chunk mask.
  bool simulate_streaming = false;
};

class U2ppModel : public Module {
 public:
  // Validates the config (kInvalidArgument naming the field).
  explicit U2ppModel(const U2ppConfig& config);

  // Strict load: every parameter present with its shape, nothing unexpected
  // (the optional sinusoid tables "...pe" and BatchNorm's
  // num_batches_tracked may be absent, as in older WeNet checkpoints).
  void load(const TensorSource& source);

  const U2ppConfig& config() const { return config_; }
  const ConformerEncoder& encoder() const { return *encoder_; }
  const CtcHead& ctc() const { return *ctc_; }

  // WeNet's ASRModel._forward_encoder. feats float32 [B, T, F] fbank (before
  // CMVN, rows padded after lengths[b]); lengths int32/int64 [B]. Returns
  // [B, T', D] and the valid frames per row. simulate_streaming runs each
  // row alone through forward_chunk_by_chunk (WeNet decodes one utterance at
  // a time there) and pads the rows' outputs with zeros to the longest.
  ConformerEncoder::Output encode(const Tensor& feats, const Tensor& lengths,
                                  const U2ppEncodeOptions& options = {}) const;

  // CTC log-probabilities [B, T', V] of an encoder output [B, T', D]:
  // float32 (log_softmax over the served-dtype logits) on the model's device.
  Tensor ctc_log_probs(const Tensor& encoder_out) const;

  // WeNet's forward_attention_decoder for one utterance: encoder_out
  // [1, T, D] (its valid frames only), hyps int64 [N, L] (<sos> + tokens,
  // padded with <eos>), hyps_lens [N] counting <sos>, r_hyps int64 [N, L]
  // (<sos> + reversed tokens, padded with <eos>; may be undefined when
  // reverse_weight is 0). The right decoder runs only when reverse_weight > 0
  // and the model has one, as in WeNet.
  AttentionDecoderLogProbs forward_attention_decoder(const Tensor& encoder_out, const Tensor& hyps,
                                                     const Tensor& hyps_lens, const Tensor& r_hyps,
                                                     double reverse_weight) const;

  bool has_right_decoder() const { return bidirectional_ != nullptr; }

 private:
  U2ppConfig config_;
  std::shared_ptr<ConformerEncoder> encoder_;
  std::shared_ptr<CtcHead> ctc_;
  std::shared_ptr<TransformerDecoder> unidirectional_;   // decoder: transformer
  std::shared_ptr<BiTransformerDecoder> bidirectional_;  // decoder: bitransformer
};

// Builds the model a checkpoint directory describes (source.config.model)
// and loads its weights strictly.
std::unique_ptr<U2ppModel> load_u2pp_model(const ModelSource& source);

}  // namespace oasr::models
