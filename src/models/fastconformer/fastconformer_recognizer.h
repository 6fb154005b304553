// The recognizer of NeMo FastConformer checkpoints (asr/recognizer.h):
// NeMo's mel front end from the checkpoint's own window and filterbank, the
// encoder over length-bucketed batches, then NeMo's greedy_batch for the
// head: CTC (argmax per frame, repeats merged, blank dropped) or RNN-T / TDT
// (label-looping, decode/transducer_greedy.h, with token times from the
// frames), and SentencePiece detokenization.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "asr/decode_options.h"
#include "asr/recognizer.h"
#include "audio/nemo_mel.h"
#include "models/fastconformer/fastconformer_model.h"
#include "models/fastconformer/nemo_source.h"

namespace oasr::engine {

std::vector<DecodeOptionSpec> fastconformer_decode_options();
RecognizerFactory fastconformer_recognizer_factory();

class FastConformerRecognizer final : public Recognizer {
 public:
  explicit FastConformerRecognizer(const EngineConfig& config);
  ~FastConformerRecognizer() override;

  int sample_rate() const override;
  AudioLimit audio_limit(const DecodeOptions& options) const override;
  DecodeOptions resolve_decode(const DecodeOverrides& overrides) const override;
  std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                     const DecodeOptions& options,
                                     int64_t max_batch_size) const override;
  std::string detokenize(std::span<const int64_t> tokens) const override;
  Module& module() override { return *model_; }
  const quant::QuantizationSpec& quantization_spec() const override { return spec_; }

  // NeMo's features of one utterance, [frames, features] float32.
  Tensor features(Waveform samples) const;

 private:
  // use_ctc: the CTC head's greedy search (CTC models, and hybrids asked
  // for ctc_greedy_search), else the transducer's.
  std::vector<Transcript> transcribe_batch(const std::vector<Tensor>& feats, bool use_ctc) const;
  // A head's greedy search over one encoded batch.
  std::vector<Transcript> ctc_transcripts(
      const models::FastConformerEncoder::Output& encoded) const;
  std::vector<Transcript> transducer_transcripts(
      const models::FastConformerEncoder::Output& encoded) const;
  // One encoder frame in seconds: window stride x subsampling factor.
  double encoder_frame_seconds() const;

  models::NemoSource source_;
  std::unique_ptr<audio::NemoMelSpectrogram> mel_;
  std::unique_ptr<models::FastConformerModel> model_;
  quant::QuantizationSpec spec_;
};

}  // namespace oasr::engine
