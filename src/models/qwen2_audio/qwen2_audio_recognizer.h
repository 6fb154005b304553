// Qwen2-Audio's recognizer (asr/recognizer.h): speech recognition with the
// base model's ASR prompt ("<|audio_bos|><|AUDIO|><|audio_eos|>Detect the
// language and recognize the speech: <|en|>", from its model card), the
// audio's placeholder expanded to one per audio token as the processor does,
// then greedy search until an eos id of generation_config.json or
// max_new_tokens. The text is the new tokens decoded without special tokens.
//
// One utterance is one 30 s window (the tower's fixed 3000 mel frames): the
// audio tower runs over up to max_batch_size utterances at once; the LM
// decodes up to max_batch_size utterances together with iteration-level
// batching over a paged KV cache (models/qwen2_audio/
// qwen2_audio_generation.h): an utterance joins the running batch when a
// place frees and leaves it the step it ends, and its result never depends
// on its neighbours. The pool holds max_batch_size sequences of the longest
// prompt plus max_new_tokens. transcribe() and start_continuous() (the
// server's continuous batching across requests) run the same decoder.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "asr/engine_config.h"
#include "asr/recognizer.h"
#include "audio/whisper_mel.h"
#include "decode/byte_bpe_tokenizer.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"
#include "models/qwen2_audio/qwen2_audio_model.h"

namespace oasr::engine {

inline constexpr const char* kQwen2AudioAsrPrompt =
    "<|audio_bos|><|AUDIO|><|audio_eos|>Detect the language and recognize the speech: <|en|>";

// The decode options Qwen2-Audio's recognizer reads.
std::vector<DecodeOptionSpec> qwen2_audio_decode_options();

class Qwen2AudioRecognizer final : public Recognizer {
 public:
  Qwen2AudioRecognizer(models::Qwen2AudioSource source,
                       const quant::QuantizationConfig& quantization,
                       const MaterializeOptions& options);

  int sample_rate() const override { return audio::WhisperLogMel::kSampleRate; }
  AudioLimit audio_limit(const DecodeOptions& options) const override;
  DecodeOptions resolve_decode(const DecodeOverrides& overrides) const override;
  std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                     const DecodeOptions& options,
                                     int64_t max_batch_size) const override;
  bool decodes_continuously() const override { return true; }
  std::unique_ptr<ContinuousDecoder> start_continuous(const DecodeOptions& defaults,
                                                      int64_t max_batch_size) const override;
  std::string detokenize(std::span<const int64_t> tokens) const override;
  Module& module() override { return *model_; }
  const quant::QuantizationSpec& quantization_spec() const override { return spec_; }

 private:
  class Continuous;  // the ContinuousDecoder both calls run

  // The prompt with its <|AUDIO|> expanded to `audio_tokens` placeholders.
  std::vector<int64_t> prompt_ids(int64_t audio_tokens) const;
  // The mel frames the processor gives `samples` (its feature_attention_mask).
  static int64_t mel_frames(size_t samples);

  models::Qwen2AudioSource source_;
  audio::WhisperLogMel mel_;
  decode::ByteLevelBpeTokenizer tokenizer_;
  std::vector<int64_t> prompt_;  // the ASR prompt, one <|AUDIO|> not yet expanded
  std::unique_ptr<models::Qwen2AudioModel> model_;
  quant::QuantizationSpec spec_;
};

RecognizerFactory qwen2_audio_recognizer_factory();

}  // namespace oasr::engine
