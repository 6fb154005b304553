// ASREngine: audio in, text out, for one checkpoint directory of any
// registered architecture (native oasr, a WeNet experiment, a Whisper model
// in Hugging Face layout, ...). It owns the architecture's Recognizer
// (asr/recognizer.h) and the default decode options; the CLI, the server
// and the bindings all fill an EngineConfig and call it, so every surface
// behaves the same.
//
//   EngineConfig config;
//   config.ckpt_dir = "exp/u2pp";
//   config.decode.set("decode_method", std::string("ctc_prefix_beam_search"));
//   ASREngine engine(config);
//   auto results = engine.transcribe_files({"a.wav", "b.flac"});
//
// A request may override the engine's decode options (a server sets a beam
// size per request): transcribe(utterances, overrides) resolves the
// overrides over config.decode through the recognizer, with the same
// validation as at construction. An utterance gives the same transcript
// alone or in any batch.
//
// Architecture-specific members are reached through recognizer_as<T>(),
// which refuses, naming the architecture, when the engine serves another.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "asr/engine_config.h"
#include "asr/recognizer.h"
#include "core/error.h"
#include "models/architecture.h"
#include "quant/calibration/input_observer.h"
#include "quant/report.h"
#include "quant/spec.h"

namespace oasr::engine {

class ContinuousBatch;

// One utterance's outcome from ASREngine::transcribe_each: its transcript,
// or the error that utterance raises (its message starts with the label).
struct UtteranceResult {
  std::optional<Transcript> transcript;
  std::optional<Error> error;
  bool ok() const { return transcript.has_value(); }
};

class ASREngine {
 public:
  explicit ASREngine(const EngineConfig& config);
  ~ASREngine();

  const EngineConfig& config() const { return config_; }
  const models::Architecture& architecture() const { return *architecture_; }
  // The defaults every request starts from (config.decode resolved).
  const DecodeOptions& decode_options() const { return decode_; }
  // config.decode overlaid with `overrides`, resolved and validated.
  DecodeOptions resolve_decode(const DecodeOverrides& overrides) const;
  // The longest audio the model takes at once with these overrides over the
  // configured options (Recognizer::audio_limit).
  Recognizer::AudioLimit audio_limit(const DecodeOverrides& overrides) const {
    return recognizer_->audio_limit(resolve_decode(overrides));
  }
  // The longest utterance transcribe() takes (Recognizer::audio_limit).
  const Recognizer::AudioLimit& audio_limit() const { return audio_limit_; }
  // The rate transcribe() expects: the checkpoint's fbank rate, 16000 for Whisper.
  int sample_rate() const { return recognizer_->sample_rate(); }

  // Every utterance must hold one 25 ms analysis window (Kaldi fbank's and
  // Whisper's STFT window): shorter audio is refused by both architectures
  // with the same message, naming the file or the utterance's index.
  static constexpr double kMinUtteranceSeconds = 0.025;

  // One file's mono samples at sample_rate(), refused (naming the path)
  // when it cannot be read or is shorter than kMinUtteranceSeconds.
  std::vector<float> load_utterance(const std::filesystem::path& path) const;

  // Decodes each file (resampled to the model's rate); results in input order.
  std::vector<Transcript> transcribe_files(const std::vector<std::filesystem::path>& paths,
                                           const DecodeOverrides& overrides = {}) const;
  // Mono samples in [-1, 1) at sample_rate(), read in place (no copy).
  std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                     const DecodeOverrides& overrides = {}) const;
  std::vector<Transcript> transcribe(const std::vector<std::vector<float>>& utterances,
                                     const DecodeOverrides& overrides = {}) const;

  // transcribe(), but a failure belongs to the utterance that raises it and
  // does not discard the others' results: a batch that throws is split in
  // halves and each half decoded again, down to single utterances. By batch
  // invariance the others' transcripts equal those of the whole batch; the
  // happy path is one transcribe() call. `labels` (one per utterance: a path,
  // a manifest id, a request id) start each error's message. Decode options
  // are resolved first: a bad override still refuses the whole call.
  std::vector<UtteranceResult> transcribe_each(std::span<const Waveform> utterances,
                                               const std::vector<std::string>& labels,
                                               const DecodeOverrides& overrides = {}) const;
  std::vector<UtteranceResult> transcribe_each(const std::vector<std::vector<float>>& utterances,
                                               const std::vector<std::string>& labels,
                                               const DecodeOverrides& overrides = {}) const;

  // Token ids -> text, without special tokens.
  std::string detokenize(std::span<const int64_t> tokens) const {
    return recognizer_->detokenize(tokens);
  }

  // Refuses, naming `label`, an utterance of `samples` samples shorter than
  // kMinUtteranceSeconds or longer than audio_limit().
  void check_length(size_t samples, const std::string& label) const;

  // Whether start_continuous() serves (Recognizer::decodes_continuously).
  bool decodes_continuously() const { return recognizer_->decodes_continuously(); }
  // Iteration-level decoding across calls (engine/continuous_batch.h), up to
  // config.max_batch_size sequences at once; refused by the architecture's
  // name where it has none.
  std::unique_ptr<ContinuousBatch> start_continuous() const;

  // A streaming session (the architecture must stream; U2++ needs a chunk
  // size > 0). Refused by the architecture's name otherwise.
  std::unique_ptr<StreamingSession> start_session(const DecodeOverrides& overrides = {}) const;

  const Recognizer& recognizer() const { return *recognizer_; }
  // The recognizer as the architecture's own class, for its specific
  // members (U2ppRecognizer::model(), WhisperRecognizer::prompt(), ...).
  template <class R>
  const R& recognizer_as() const {
    const auto* typed = dynamic_cast<const R*>(recognizer_.get());
    OASR_CHECK(typed != nullptr, kUnsupported, config_.ckpt_dir.string(), " is a ",
               architecture_->display_name, " model; this call needs another architecture's ",
               "recognizer");
    return *typed;
  }

  // Calibration (oasr quantize): attaches `observer` to every quantizable
  // layer of the served model, so each later forward hands it the layer's
  // input; nullptr detaches.
  void set_input_observer(quant::InputObserver* observer);

  // What is served: schemes, quantized layer count, KV-cache format, and per
  // layer its scheme, kernel lane and input quantizer; skipped layers.
  const quant::QuantizationInfo& quantization_info() const { return quantization_info_; }
  const quant::QuantizationSpec& quantization_spec() const {
    return recognizer_->quantization_spec();
  }

 private:
  void log_quantization() const;
  // Decodes utterances[indices], splitting the set on failure (transcribe_each).
  // recognizer_->transcribe() of the utterances that are not silence by the
  // signal (audio/silence.h); a silent one's transcript is empty.
  std::vector<Transcript> decode(std::span<const Waveform> utterances,
                                 const DecodeOptions& options) const;
  void transcribe_splitting(std::span<const Waveform> utterances,
                            const std::vector<std::string>& labels, std::vector<size_t> indices,
                            const DecodeOptions& options,
                            std::vector<UtteranceResult>& results) const;

  EngineConfig config_;
  const models::Architecture* architecture_ = nullptr;
  std::unique_ptr<Recognizer> recognizer_;
  quant::QuantizationInfo quantization_info_;
  DecodeOptions decode_;
  Recognizer::AudioLimit audio_limit_;  // asked once: every utterance is checked against it
};

}  // namespace oasr::engine
