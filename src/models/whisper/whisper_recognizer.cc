#include "models/whisper/whisper_recognizer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/cancellation.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/progress.h"
#include "models/whisper/whisper_dir.h"
#include "models/whisper/whisper_materialize.h"
#include "models/whisper/whisper_model_step.h"

namespace oasr::engine {

namespace {

decode::ByteLevelBpeTokenizer load_tokenizer(const models::WhisperSource& source) {
  if (!source.tokenizer_json.empty()) {
    return decode::ByteLevelBpeTokenizer::from_tokenizer_json(source.tokenizer_json);
  }
  return decode::ByteLevelBpeTokenizer::from_vocab_merges(source.vocab_json, source.merges_txt,
                                                          source.added_tokens_json);
}

constexpr const char* kGreedy = "greedy_search";
constexpr const char* kBeam = "beam_search";
// HF's num_beams for beam search when beam_size is not given.
constexpr int64_t kDefaultBeams = 5;

std::string strip(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t\n\r");
  return text.substr(first, last - first + 1);
}

}  // namespace

std::vector<int64_t> whisper_english_prompt(const models::WhisperGeneration& generation) {
  std::vector<int64_t> prompt = {generation.decoder_start_token_id};
  if (generation.is_multilingual) {
    const auto english = generation.lang_to_id.find("<|en|>");
    OASR_CHECK(english != generation.lang_to_id.end(), kUnsupported,
               "this multilingual Whisper checkpoint has no <|en|> language token in its "
               "generation config (lang_to_id); English transcription needs it");
    OASR_CHECK(generation.transcribe_token_id.has_value(), kUnsupported,
               "this multilingual Whisper checkpoint has no <|transcribe|> token id "
               "(generation config task_to_id); transcription needs it");
    prompt.push_back(english->second);
    prompt.push_back(*generation.transcribe_token_id);
  }
  prompt.push_back(generation.no_timestamps_token_id);
  return prompt;
}

std::vector<Segment> whisper_window_segments(
    std::span<const int64_t> tokens, int64_t timestamp_begin, double window_start_seconds,
    const std::function<std::string(std::span<const int64_t>)>& text_of) {
  // Whisper's timestamp tokens step by 20 ms (HF's time_precision 0.02).
  constexpr double kTimestampSeconds = 0.02;
  std::vector<Segment> out;
  for (const decode::TimestampSegment& s : decode::timestamp_segments(tokens, timestamp_begin)) {
    const std::span<const int64_t> slice = tokens.subspan(s.first, s.last - s.first);
    out.push_back(
        Segment{window_start_seconds + static_cast<double>(s.start_index) * kTimestampSeconds,
                window_start_seconds + static_cast<double>(s.end_index) * kTimestampSeconds,
                text_of(slice), std::vector<int64_t>(slice.begin(), slice.end())});
  }
  return out;
}

std::string join_window_texts(const std::vector<std::string>& texts) {
  if (texts.size() == 1) return texts.front();
  std::string joined;
  for (const std::string& text : texts) {
    const std::string piece = strip(text);
    if (piece.empty()) continue;
    if (!joined.empty()) joined += ' ';
    joined += piece;
  }
  return joined;
}

WhisperRecognizer::WhisperRecognizer(models::WhisperSource source,
                                     const quant::QuantizationConfig& quantization,
                                     const models::MaterializeOptions& options)
    : source_(std::move(source)),
      mel_(source_.config.num_mel_bins),
      tokenizer_(load_tokenizer(source_)),
      prompt_(whisper_english_prompt(source_.generation)) {
  models::MaterializedWhisper loaded =
      models::materialize_whisper_model(source_, quantization, options);
  model_ = std::move(loaded.model);
  spec_ = std::move(loaded.spec);
}

WhisperRecognizer::~WhisperRecognizer() = default;

RecognizerFactory whisper_recognizer_factory() {
  return [](const EngineConfig& config) {
    // The decode flags are refused before the model is read.
    resolve_whisper_decode(config.decode);
    models::WhisperSource source = models::load_whisper_dir(config.ckpt_dir);
    if (config.weights) source.weights = config.weights;
    return std::make_unique<WhisperRecognizer>(std::move(source), config.quantization,
                                               config.materialize_options());
  };
}

DecodeOptions WhisperRecognizer::resolve_decode(const DecodeOverrides& o) const {
  return resolve_whisper_decode(o);
}

// greedy_search unless told; beam_search with 5 beams unless beam_size says
// otherwise. The U2++ knobs are refused.
DecodeOptions resolve_whisper_decode(const DecodeOverrides& o) {
  const auto refuse_u2pp_knob = [](bool given, const char* name) {
    OASR_CHECK(!given, kInvalidArgument, name,
               " applies to U2++ checkpoints; a Whisper checkpoint takes --decode-method ",
               "greedy_search|beam_search, --beam-size, --length-penalty and --timestamps");
  };
  refuse_u2pp_knob(o.ctc_weight.has_value(), "ctc_weight (--ctc-weight)");
  refuse_u2pp_knob(o.reverse_weight.has_value(), "reverse_weight (--reverse-weight)");
  refuse_u2pp_knob(o.chunk_size.has_value(), "chunk_size (--chunk-size)");
  refuse_u2pp_knob(o.left_chunks.has_value(), "left_chunks (--left-chunks)");
  DecodeOptions d;
  d.method = o.method.value_or(kGreedy);
  if (d.method != kGreedy && d.method != kBeam) {
    const std::string owners = architectures_taking(d.method);
    OASR_THROW(kInvalidArgument, "decode method '", d.method, "' is not a Whisper method",
               owners.empty() ? std::string() : " (" + owners + " checkpoints take it)",
               "; this Whisper checkpoint takes ", WhisperRecognizer::kMethods);
  }
  if (d.method == kGreedy) {
    OASR_CHECK(!o.beam_size || *o.beam_size == 1, kInvalidArgument,
               "greedy_search keeps one hypothesis; drop --beam-size ", o.beam_size.value_or(1),
               " or use --decode-method beam_search");
    OASR_CHECK(!o.length_penalty, kInvalidArgument,
               "--length-penalty scores the finished hypotheses of beam_search; greedy_search "
               "has none: drop it or use --decode-method beam_search");
    d.beam_size = 1;
  } else {
    d.beam_size = o.beam_size.value_or(kDefaultBeams);
  }
  d.length_penalty = o.length_penalty.value_or(1.0);
  d.timestamps = o.timestamps.value_or(false);
  d.validate();
  return d;
}

decode::WhisperSearchOptions WhisperRecognizer::search_options(const DecodeOptions& options) const {
  const models::WhisperGeneration& g = source_.generation;
  decode::WhisperSearchOptions s;
  s.prompt = prompt_;
  s.eos_token_id = g.eos_token_id;
  s.pad_token_id = g.pad_token_id;
  s.suppress_tokens = g.suppress_tokens;
  s.begin_suppress_tokens = g.begin_suppress_tokens;
  // HF stops at generation_config.max_length; the learned decoder positions
  // end at max_target_positions, which no released checkpoint exceeds.
  s.max_length = std::min(g.max_length, source_.config.max_target_positions);
  s.num_beams = options.method == kBeam ? options.beam_size : 1;
  s.length_penalty = options.length_penalty;
  if (options.timestamps) {
    // HF's prompt with return_timestamps=True: the same without <|notimestamps|>.
    s.prompt.pop_back();
    s.timestamps = decode::WhisperTimestampRules{
        g.no_timestamps_token_id, g.no_timestamps_token_id + 1, g.max_initial_timestamp_index};
  }
  s.validate();
  return s;
}

std::string WhisperRecognizer::detokenize(std::span<const int64_t> tokens) const {
  return tokenizer_.decode(tokens, /*skip_special_tokens=*/true);
}

std::vector<decode::WhisperHypothesis> WhisperRecognizer::decode_windows(
    std::span<const Window> windows, const DecodeOptions& options) const {
  const auto batch = static_cast<int64_t>(windows.size());
  const int64_t mels = source_.config.num_mel_bins;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Tensor mel = Tensor::empty({batch, mels, audio::WhisperLogMel::kFrames}, DType::kF32);
  for (int64_t b = 0; b < batch; ++b) mel.select(0, b).copy_(log_mel(windows[b].samples));
  const Tensor encoded = model_->encode(mel);
  const auto encoded_at = Clock::now();
  const models::WhisperModel::CrossKv cross = model_->cross_kv(encoded);
  const decode::WhisperSearchOptions search = search_options(options);
  decode::WhisperModelStep step(*model_, cross, decode::whisper_cross_rows(batch, search.num_beams),
                                search.max_length);
  auto hypotheses = decode::whisper_search(step, batch, search);
  // Where a window's time goes (OASR_LOG_LEVEL=debug), for profiling runs.
  const auto ms = [](auto from, auto to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  log::debug("whisper: {} window(s): log-mel + encoder {:.1f} ms, cross K/V + search {:.1f} ms",
             batch, ms(start, encoded_at), ms(encoded_at, Clock::now()));
  return hypotheses;
}

std::vector<Transcript> WhisperRecognizer::transcribe(std::span<const Waveform> utterances,
                                                      const DecodeOptions& options,
                                                      int64_t max_batch_size) const {
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument, "max_batch_size must be >= 1, got ",
             max_batch_size);
  search_options(options);  // refuses bad options before any work
  // Every window is 30 s (the last one zero-padded), so batches need no
  // length bucketing; windows of one utterance are independent.
  std::vector<Window> windows;
  for (size_t u = 0; u < utterances.size(); ++u) {
    const std::span<const float> samples(utterances[u]);
    size_t start = 0;
    do {
      const size_t length = std::min<size_t>(kWindowSamples, samples.size() - start);
      windows.push_back(
          Window{u, samples.subspan(start, length), static_cast<double>(start) / kSampleRate});
      start += length;
    } while (start < samples.size());
  }
  std::vector<decode::WhisperHypothesis> hyps;
  hyps.reserve(windows.size());
  const auto batch = static_cast<size_t>(max_batch_size);
  // Long-form audio takes minutes on the CPU: windows done, on a terminal.
  std::optional<ProgressBar> progress;
  if (windows.size() > batch) progress.emplace(static_cast<int64_t>(windows.size()), "whisper");
  for (size_t start = 0; start < windows.size(); start += batch) {
    throw_if_cancelled();
    const size_t count = std::min(batch, windows.size() - start);
    auto decoded = decode_windows(std::span<const Window>(windows).subspan(start, count), options);
    for (auto& h : decoded) hyps.push_back(std::move(h));
    if (progress) progress->advance(static_cast<int64_t>(count));
  }
  if (progress) progress->finish();

  std::vector<Transcript> out(utterances.size());
  std::vector<std::vector<std::string>> texts(utterances.size());
  const int64_t timestamp_begin = source_.generation.no_timestamps_token_id + 1;
  // Timestamp tokens have no text (HF's decode filters them out).
  const auto text_of = [&](std::span<const int64_t> tokens) {
    std::vector<int64_t> words;
    for (const int64_t id : tokens) {
      if (id < timestamp_begin) words.push_back(id);
    }
    return detokenize(words);
  };
  for (size_t w = 0; w < windows.size(); ++w) {
    Transcript& t = out[windows[w].utterance];
    t.tokens.insert(t.tokens.end(), hyps[w].tokens.begin(), hyps[w].tokens.end());
    t.score += hyps[w].score;
    texts[windows[w].utterance].push_back(text_of(hyps[w].tokens));
    if (options.timestamps) {
      for (Segment& segment : whisper_window_segments(hyps[w].tokens, timestamp_begin,
                                                      windows[w].start_seconds, text_of)) {
        t.segments.push_back(std::move(segment));
      }
    }
  }
  for (size_t u = 0; u < out.size(); ++u) out[u].text = join_window_texts(texts[u]);
  return out;
}

}  // namespace oasr::engine
