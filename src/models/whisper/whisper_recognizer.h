// WhisperRecognizer: the Recognizer of Whisper checkpoints (models/whisper/whisper_dir.h:
// Hugging Face or CTranslate2 layout converted at load). 16 kHz audio in,
// text out; decode methods greedy_search (the default, HF's num_beams 1) and
// beam_search (5 beams unless beam_size says otherwise). Whisper does not
// stream.
//
// Audio up to 30 s is one window: WhisperFeatureExtractor's log-mel (zero
// padded to 30 s), decoded by decode/whisper_search (HF generate's short-form
// path: forced prompt, suppress processors, greedy or beam search,
// max_length; timestamp tokens when asked). Its text is what HF's
// tokenizer.batch_decode(generate(...), skip_special_tokens=True) returns,
// leading space included.
//
// Audio over 30 s (decode option long_form):
//  - "sequential" (the default): HF's long-form algorithm for one utterance
//    (decode/whisper_long_form.h): the whole utterance's log-mel, windows that
//    start where the previous one's last complete segment ended, decoded with
//    timestamp tokens. Tokens are the kept segments' tokens in order
//    (timestamps included), the text is their decode (HF's batch_decode of
//    generate's sequences), segments (with timestamps=true) are generate's
//    segments except that those without text are left out and a window
//    without a timestamp pair ends at its end (HF: twice its duration); the
//    score is the sum of the windows' scores. Memory: the whole log-mel of
//    each utterance being decoded (about 115 MB an hour at 80 mels), up to
//    max_batch_size at once. Not done:
//    conditioning on the previous text (HF's condition_on_prev_tokens, off by
//    default there; on in openai-whisper).
//  - "windows": consecutive, independent 30 s windows: window i covers
//    samples [480000 i, 480000 (i + 1)), each transcribed with the short-form
//    rules above; the transcript is the windows' texts, each stripped of
//    surrounding whitespace, the non-empty ones joined with one space; tokens
//    the windows' tokens in order; the score the sum of theirs. A word cut by
//    a window boundary may be lost or split.
// Utterances are independent of one another (batch invariance): a batch
// holds windows of several utterances, and each row's result is its own.
//
// Temperature fallback (decode options temperatures and the thresholds,
// greedy_search only): every window, short or long-form, is judged and
// decoded again at the next temperature as decode/whisper_long_form.h says;
// sampling draws from a generator seeded by the window (its position, its
// utterance's length and first samples) and the temperature's position, so a
// transcript is reproducible and independent of its batch.
//
// Multilingual checkpoints are decoded as English transcription: the
// prompt is <|startoftranscript|><|en|><|transcribe|><|notimestamps|> (HF with
// language="en", task="transcribe"); HF's default would detect the language.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "asr/materialize_options.h"
#include "asr/recognizer.h"
#include "audio/whisper_mel.h"
#include "decode/byte_bpe_tokenizer.h"
#include "decode/whisper_search.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_model.h"
#include "quant/spec.h"

namespace oasr::engine {

// The decode options Whisper declares (whisper_decode_options()), typed.
struct WhisperDecode {
  std::string method;
  int64_t beam_size = 1;
  // Beam search: finished hypotheses score sum_logprobs / generated_len ^
  // length_penalty (HF's BeamSearchScorer).
  double length_penalty = 1.0;
  // Decode with timestamp tokens (segments with start / end times) instead
  // of <|notimestamps|>.
  bool timestamps = false;
  std::string long_form = "sequential";  // audio over 30 s: sequential or windows
  // {0} decodes once; more values fall back to the next one while a
  // threshold rejects the decode (decode/whisper_long_form.h).
  std::vector<double> temperatures = {0.0};
  std::optional<double> compression_ratio_threshold;
  std::optional<double> logprob_threshold;
  std::optional<double> no_speech_threshold;

  static WhisperDecode from(const DecodeOptions& options);
  DecodeOptions values() const;  // the thresholds only where set
};

// Whisper's decode keys (models/whisper/whisper_architecture.cc declares them).
std::vector<DecodeOptionSpec> whisper_decode_options();

class WhisperRecognizer final : public Recognizer {
 public:
  // Loads and materializes the model (quantized online when asked).
  WhisperRecognizer(models::WhisperSource source, const quant::QuantizationConfig& quantization,
                    const engine::MaterializeOptions& options);
  ~WhisperRecognizer() override;

  static constexpr const char* kMethods = "greedy_search or beam_search";

  static constexpr int kSampleRate = audio::WhisperLogMel::kSampleRate;
  static constexpr int64_t kWindowSamples = audio::WhisperLogMel::kChunkSamples;

  int sample_rate() const override { return kSampleRate; }
  DecodeOptions resolve_decode(const DecodeOverrides& overrides) const override;
  // Mono samples at 16 kHz, any length; results in input order; windows
  // are encoded and searched max_batch_size at a time.
  std::vector<Transcript> transcribe(std::span<const Waveform> utterances,
                                     const DecodeOptions& options,
                                     int64_t max_batch_size) const override;
  // HF's tokenizer.decode(ids, skip_special_tokens=True).
  std::string detokenize(std::span<const int64_t> tokens) const override;
  Module& module() override { return *model_; }
  const quant::QuantizationSpec& quantization_spec() const override { return spec_; }

  // The forced decoder prompt (without timestamps) and the search settings
  // for `options` (with timestamps the prompt drops <|notimestamps|>).
  const std::vector<int64_t>& prompt() const { return prompt_; }
  decode::WhisperSearchOptions search_options(const WhisperDecode& options) const;

  // log-mel [n_mels, 3000] of one window (at most 30 s of samples).
  Tensor log_mel(std::span<const float> window) const { return mel_.compute(window); }
  // Where decoding time goes, summed over every transcribe() since the last
  // reset (oasr bench whisper): windows encoded, decoder steps (one decoder
  // call for all of a search's rows) and the wall time of each part. A
  // step's time includes its host work (the search reads every step's
  // candidates on the host, which waits for the device).
  struct DecodeStats {
    int64_t windows = 0;
    int64_t encoder_calls = 0;
    double encoder_seconds = 0.0;  // log-mel, encoder and cross K/V
    int64_t decode_steps = 0;
    double search_seconds = 0.0;
    // Of the decoder steps on CUDA: those served by a graph replay, and the
    // graphs recorded (models/whisper/whisper_model_step.h).
    int64_t graph_replays = 0;
    int64_t graph_recordings = 0;
  };
  DecodeStats decode_stats() const;
  void reset_decode_stats() const;
  const models::WhisperSource& source() const { return source_; }
  const models::WhisperModel& model() const { return *model_; }

 private:
  // One 30 s window to decode: its log-mel [n_mels, 3000] and where it sits.
  struct Window {
    size_t utterance = 0;
    std::span<const float> samples;  // a fixed window's samples (its mel is made when decoded)
    Tensor mel;                      // a sequential window's slice of the whole log-mel
    double start_seconds = 0.0;      // where the window starts in its utterance
    int64_t frames = 0;              // mel frames of audio in it (<= 3000)
    bool sequential = false;         // long-form sequential: decoded with timestamps
    uint64_t seed = 0;               // the sampling generator's seed (fallback): window_seed
  };
  struct WindowResult {
    decode::WhisperHypothesis hypothesis;
    bool skip = false;  // the fallback judged it silence
  };
  // Decodes the windows (up to max_batch_size) with one encoder call; the
  // fallback re-decodes rejected ones.
  std::vector<WindowResult> decode_windows(std::span<const Window> windows,
                                           const WhisperDecode& options) const;
  // Decodes rows `rows` of `cross` (one hypothesis each) at temperature
  // `temperature` with `search` (seeds from `windows` where it samples).
  std::vector<decode::WhisperHypothesis> search_rows(const models::WhisperModel::CrossKv& cross,
                                                     std::span<const int64_t> rows,
                                                     decode::WhisperSearchOptions search,
                                                     std::span<const Window> windows,
                                                     size_t temperature_index,
                                                     double temperature) const;
  // softmax(logits after <|startoftranscript|> alone)[<|nospeech|>] per row.
  std::vector<double> no_speech_probs(const models::WhisperModel::CrossKv& cross,
                                      std::span<const int64_t> rows) const;
  // The text of tokens with the timestamp tokens left out.
  std::string text_without_timestamps(std::span<const int64_t> tokens) const;

  models::WhisperSource source_;
  std::unique_ptr<models::WhisperModel> model_;
  quant::QuantizationSpec spec_;
  audio::WhisperLogMel mel_;
  decode::ByteLevelBpeTokenizer tokenizer_;
  std::vector<int64_t> prompt_;
  mutable std::mutex stats_mutex_;
  mutable DecodeStats stats_;
};

// Whisper's decode options: greedy_search unless told; beam_search with 5
// beams unless beam_size says otherwise; the U2++ knobs refused by name.
// Needs no model, so the factory refuses bad flags before loading one.
WhisperDecode resolve_whisper_decode(const DecodeOverrides& overrides);

// The forced prompt of English transcription without timestamps for
// `generation`: <|startoftranscript|> [<|en|> <|transcribe|>] <|notimestamps|>.
std::vector<int64_t> whisper_english_prompt(const models::WhisperGeneration& generation);

// The segments of one window's hypothesis (decode::timestamp_segments), in
// seconds from the utterance's start; `text_of` detokenizes a slice with the
// timestamp tokens left out.
std::vector<Segment> whisper_window_segments(
    std::span<const int64_t> tokens, int64_t timestamp_begin, double window_start_seconds,
    const std::function<std::string(std::span<const int64_t>)>& text_of);

// Joins window texts as described above: one window's text unchanged;
// several: stripped, the non-empty ones joined with one space.
std::string join_window_texts(const std::vector<std::string>& texts);

// What the Whisper descriptor (models/whisper/whisper_architecture.cc) builds.
RecognizerFactory whisper_recognizer_factory();

}  // namespace oasr::engine
