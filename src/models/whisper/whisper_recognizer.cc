#include "models/whisper/whisper_recognizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "core/cancellation.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/progress.h"
#include "decode/whisper_long_form.h"
#include "models/architecture.h"
#include "models/whisper/whisper_dir.h"
#include "models/whisper/whisper_materialize.h"
#include "models/whisper/whisper_model_step.h"
#include "ops/log_softmax.h"

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
                                     const engine::MaterializeOptions& options)
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

std::vector<DecodeOptionSpec> whisper_decode_options() {
  std::vector<DecodeOptionSpec> specs;
  DecodeOptionSpec method;
  method.key = kDecodeMethodKey;
  method.kind = DecodeValueKind::kText;
  method.help = "greedy search (HF generate's num_beams 1) or beam search";
  method.default_text = kGreedy;
  method.choices = {kGreedy, kBeam};
  method.aliases = {"decoding_method"};
  specs.push_back(method);
  specs.push_back({.key = "beam_size",
                   .kind = DecodeValueKind::kInteger,
                   .help = "beam_search: beams",
                   .default_text = "5",
                   .min = 1,
                   .max = static_cast<double>(kMaxBeamSize)});
  specs.push_back({.key = "length_penalty",
                   .kind = DecodeValueKind::kNumber,
                   .help = "beam_search: a finished hypothesis scores sum_logprobs / length ^ "
                           "length_penalty",
                   .default_text = "1.0"});
  specs.push_back({.key = "timestamps",
                   .kind = DecodeValueKind::kBool,
                   .help = "decode timestamp tokens and give segments with start / end times",
                   .default_text = "false"});
  specs.push_back({.key = "long_form",
                   .kind = DecodeValueKind::kText,
                   .help = "audio over 30 s: sequential (seek on the last timestamp, as "
                           "transformers' and openai-whisper's long-form transcription) or "
                           "windows (independent 30 s windows)",
                   .default_text = "sequential",
                   .choices = {"sequential", "windows"}});
  specs.push_back({.key = "temperatures",
                   .kind = DecodeValueKind::kNumberList,
                   .help = "temperature fallback: temperatures tried in order while a threshold "
                           "rejects the decode; openai-whisper's: 0,0.2,0.4,0.6,0.8,1.0",
                   .default_text = "0 (decode once)",
                   .min = 0.0,
                   .max = 10.0});
  specs.push_back({.key = "compression_ratio_threshold",
                   .kind = DecodeValueKind::kNumber,
                   .help = "fallback: reject a decode whose text's gzip compression ratio "
                           "exceeds this",
                   .default_text = "2.4 with fallback"});
  specs.push_back({.key = "logprob_threshold",
                   .kind = DecodeValueKind::kNumber,
                   .help = "fallback: reject a decode whose average token log-probability is "
                           "below this",
                   .default_text = "-1.0 with fallback"});
  specs.push_back({.key = "no_speech_threshold",
                   .kind = DecodeValueKind::kNumber,
                   .help = "fallback: a window whose <|nospeech|> probability exceeds this is "
                           "silence and skipped, unless its average log-probability is above "
                           "logprob_threshold",
                   .default_text = "0.6 with fallback",
                   .min = 0.0,
                   .max = 1.0});
  return specs;
}

WhisperDecode WhisperDecode::from(const DecodeOptions& options) {
  WhisperDecode d;
  d.method = options.get<std::string>(kDecodeMethodKey);
  d.beam_size = options.get<int64_t>("beam_size");
  d.length_penalty = options.get<double>("length_penalty");
  d.timestamps = options.get<bool>("timestamps");
  d.long_form = options.get<std::string>("long_form");
  d.temperatures = options.get<std::vector<double>>("temperatures");
  d.compression_ratio_threshold = options.find<double>("compression_ratio_threshold");
  d.logprob_threshold = options.find<double>("logprob_threshold");
  d.no_speech_threshold = options.find<double>("no_speech_threshold");
  return d;
}

DecodeOptions WhisperDecode::values() const {
  DecodeOptions out;
  out.set(kDecodeMethodKey, method);
  out.set("beam_size", beam_size);
  out.set("length_penalty", length_penalty);
  out.set("timestamps", timestamps);
  out.set("long_form", long_form);
  out.set("temperatures", temperatures);
  if (compression_ratio_threshold) {
    out.set("compression_ratio_threshold", *compression_ratio_threshold);
  }
  if (logprob_threshold) out.set("logprob_threshold", *logprob_threshold);
  if (no_speech_threshold) out.set("no_speech_threshold", *no_speech_threshold);
  return out;
}

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
  return resolve_whisper_decode(o).values();
}

// greedy_search unless told; beam_search with 5 beams unless beam_size says
// otherwise. Keys Whisper does not declare are refused before this
// (models::check_decode_values).
WhisperDecode resolve_whisper_decode(const DecodeOverrides& o) {
  WhisperDecode d;
  d.method = o.find<std::string>(kDecodeMethodKey).value_or(kGreedy);
  const std::optional<int64_t> beam_size = o.find<int64_t>("beam_size");
  if (d.method == kGreedy) {
    OASR_CHECK(!beam_size || *beam_size == 1, kInvalidArgument,
               "greedy_search keeps one hypothesis; drop --beam-size ", beam_size.value_or(1),
               " or use --decode-method beam_search");
    OASR_CHECK(!o.has("length_penalty"), kInvalidArgument,
               "--length-penalty scores the finished hypotheses of beam_search; greedy_search "
               "has none: drop it or use --decode-method beam_search");
    d.beam_size = 1;
  } else {
    d.beam_size = beam_size.value_or(kDefaultBeams);
  }
  d.length_penalty = o.find<double>("length_penalty").value_or(1.0);
  d.timestamps = o.find<bool>("timestamps").value_or(false);
  d.long_form = o.find<std::string>("long_form").value_or(d.long_form);
  d.temperatures = o.find<std::vector<double>>("temperatures").value_or(d.temperatures);
  d.compression_ratio_threshold = o.find<double>("compression_ratio_threshold");
  d.logprob_threshold = o.find<double>("logprob_threshold");
  d.no_speech_threshold = o.find<double>("no_speech_threshold");
  const std::vector<DecodeOptionSpec> specs = whisper_decode_options();
  const DecodeOptions resolved = d.values();
  for (const auto& [key, value] : resolved.items()) {
    check_decode_value(*find_decode_spec(specs, key), value);
  }
  std::string fallback_flags;
  const auto given = [&](bool set, const char* flag) {
    if (set) fallback_flags += (fallback_flags.empty() ? "" : ", ") + std::string(flag);
  };
  given(d.temperatures.size() > 1 || d.temperatures.front() != 0.0, "--temperatures");
  given(d.compression_ratio_threshold.has_value(), "--compression-ratio-threshold");
  given(d.logprob_threshold.has_value(), "--logprob-threshold");
  given(d.no_speech_threshold.has_value(), "--no-speech-threshold");
  OASR_CHECK(d.method == kGreedy || fallback_flags.empty(), kInvalidArgument, fallback_flags,
             ": the temperature fallback samples and judges greedy decodes (openai-whisper's "
             "default decode); beam_search takes none of it: drop ",
             fallback_flags, " or use --decode-method greedy_search");
  return d;
}

decode::WhisperSearchOptions WhisperRecognizer::search_options(const WhisperDecode& options) const {
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

std::string WhisperRecognizer::text_without_timestamps(std::span<const int64_t> tokens) const {
  // Timestamp tokens have no text (HF's decode filters them out).
  const int64_t timestamp_begin = source_.generation.no_timestamps_token_id + 1;
  std::vector<int64_t> words;
  for (const int64_t id : tokens) {
    if (id < timestamp_begin) words.push_back(id);
  }
  return detokenize(words);
}

std::vector<decode::WhisperHypothesis> WhisperRecognizer::search_rows(
    const models::WhisperModel::CrossKv& cross, std::span<const int64_t> rows,
    decode::WhisperSearchOptions search, std::span<const Window> windows, size_t temperature_index,
    double temperature) const {
  const auto count = static_cast<int64_t>(rows.size());
  search.temperature = temperature;
  if (temperature > 0.0) {
    search.num_beams = 1;  // openai-whisper samples greedily
    for (const int64_t r : rows) {
      // A window's own generator: its seed (see Window) and the
      // temperature's position through a 64-bit mixer, so no two windows'
      // or temperatures' streams are shifts of one another.
      search.sample_seeds.push_back(decode::mix64(windows[static_cast<size_t>(r)].seed ^
                                                  decode::mix64(temperature_index + 1)));
    }
  }
  std::vector<int64_t> cross_rows;
  for (const int64_t r : rows) {
    for (int64_t k = 0; k < search.num_beams; ++k) cross_rows.push_back(r);
  }
  decode::WhisperModelStep step(*model_, cross, std::move(cross_rows), search.max_length);
  const auto start = std::chrono::steady_clock::now();
  std::vector<decode::WhisperHypothesis> out = decode::whisper_search(step, count, search);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.decode_steps += step.calls();
  stats_.search_seconds += seconds;
  const DeviceGraphCache::Stats graphs = step.graph_stats();
  stats_.graph_replays += graphs.replayed;
  stats_.graph_recordings += graphs.recorded;
  return out;
}

WhisperRecognizer::DecodeStats WhisperRecognizer::decode_stats() const {
  const std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void WhisperRecognizer::reset_decode_stats() const {
  const std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_ = DecodeStats{};
}

std::vector<double> WhisperRecognizer::no_speech_probs(const models::WhisperModel::CrossKv& cross,
                                                       std::span<const int64_t> rows) const {
  const models::WhisperGeneration& g = source_.generation;
  const int64_t no_speech_token = g.no_timestamps_token_id - 1;  // HF's rule
  decode::WhisperModelStep probe(*model_, cross, std::vector<int64_t>(rows.begin(), rows.end()),
                                 /*capacity_tokens=*/2);
  const auto count = static_cast<int64_t>(rows.size());
  const Tensor sot = Tensor::from_vector(
      std::vector<int64_t>(static_cast<size_t>(count), g.decoder_start_token_id), {count, 1});
  const Tensor logits = probe.step(sot).to(Device::cpu()).to(DType::kF32).contiguous();
  const int64_t vocab = logits.size(1);
  OASR_CHECK(no_speech_token >= 0 && no_speech_token < vocab, kUnsupported,
             "this Whisper checkpoint has no <|nospeech|> token before <|notimestamps|> (",
             g.no_timestamps_token_id,
             "), which the fallback's silence rule reads; pass --no-speech-threshold 1 to "
             "turn that rule off");
  const Tensor log_probs = ops::log_softmax(logits).contiguous();
  std::vector<double> out;
  for (int64_t r = 0; r < count; ++r) {
    out.push_back(
        std::exp(static_cast<double>(log_probs.data<float>()[r * vocab + no_speech_token])));
  }
  return out;
}

std::vector<WhisperRecognizer::WindowResult> WhisperRecognizer::decode_windows(
    std::span<const Window> windows, const WhisperDecode& options) const {
  const auto batch = static_cast<int64_t>(windows.size());
  const int64_t mels = source_.config.num_mel_bins;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Tensor mel = Tensor::empty({batch, mels, audio::WhisperLogMel::kFrames}, DType::kF32);
  for (int64_t b = 0; b < batch; ++b) {
    const Window& w = windows[b];
    mel.select(0, b).copy_(w.mel.defined() ? w.mel : log_mel(w.samples));
  }
  const Tensor encoded = model_->encode(mel);
  const auto encoded_at = Clock::now();
  const models::WhisperModel::CrossKv cross = model_->cross_kv(encoded);
  // The encoder's share ends when its device work does (one wait per round).
  synchronize(encoded.device());
  {
    const std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.windows += batch;
    stats_.encoder_calls += 1;
    stats_.encoder_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  const decode::WhisperFallback fallback =
      decode::WhisperFallback::resolve(options.temperatures, options.compression_ratio_threshold,
                                       options.logprob_threshold, options.no_speech_threshold);

  std::vector<WindowResult> out(windows.size());
  // Sequential windows decode with timestamp tokens whatever the options
  // say; the others as the options say: one search per kind.
  for (const bool sequential : {false, true}) {
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batch; ++b) {
      if (windows[b].sequential == sequential) rows.push_back(b);
    }
    if (rows.empty()) continue;
    WhisperDecode kind = options;
    kind.timestamps = options.timestamps || sequential;
    decode::WhisperSearchOptions search = search_options(kind);
    search.filtered_log_probs = fallback.judges();
    std::vector<double> no_speech(rows.size(), 0.0);
    if (fallback.needs_no_speech_prob()) no_speech = no_speech_probs(cross, rows);
    // pending[i]: position in `rows` of a window still to judge.
    std::vector<size_t> pending(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) pending[i] = i;
    for (size_t t = 0; t < fallback.temperatures.size() && !pending.empty(); ++t) {
      std::vector<int64_t> these;
      for (const size_t i : pending) these.push_back(rows[i]);
      std::vector<decode::WhisperHypothesis> hyps =
          search_rows(cross, these, search, windows, t, fallback.temperatures[t]);
      std::vector<size_t> rejected;
      for (size_t j = 0; j < pending.size(); ++j) {
        const size_t i = pending[j];
        WindowResult& result = out[static_cast<size_t>(rows[i])];
        result.hypothesis = std::move(hyps[j]);
        if (!fallback.judges()) continue;
        const decode::WhisperHypothesis& h = result.hypothesis;
        const double ratio =
            decode::whisper_compression_ratio(strip(text_without_timestamps(h.tokens)));
        const double avg_logprob = h.filtered_log_prob / static_cast<double>(h.tokens.size() + 1);
        const decode::FallbackVerdict verdict =
            decode::judge_decode(fallback, ratio, avg_logprob, no_speech[i]);
        result.skip = verdict.skip;
        if (verdict.rejected) rejected.push_back(i);
        log::debug(
            "whisper fallback: window at {:.2f} s, temperature {}: compression {:.2f}, "
            "avg logprob {:.3f}, no speech {:.3f}{}{}",
            windows[static_cast<size_t>(rows[i])].start_seconds, fallback.temperatures[t], ratio,
            avg_logprob, no_speech[i], verdict.rejected ? ", rejected" : "",
            verdict.skip ? ", silence" : "");
      }
      pending = std::move(rejected);
    }
  }
  // Where a window's time goes (OASR_LOG_LEVEL=debug), for profiling runs.
  const auto ms = [](auto from, auto to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  log::debug("whisper: {} window(s): log-mel + encoder {:.1f} ms, cross K/V + search {:.1f} ms",
             batch, ms(start, encoded_at), ms(encoded_at, Clock::now()));
  return out;
}

namespace {

// One utterance decoded in consecutive independent windows.
struct WindowedUtterance {
  std::vector<std::string> texts;
};

// One utterance decoded sequentially (HF's long-form loop).
struct SequentialUtterance {
  size_t utterance = 0;
  std::span<const float> samples;
  int64_t frames = 0;  // samples / 160 (WhisperLogMel::compute_whole)
  int64_t seek = 0;
  Tensor mel{};  // the whole utterance's log-mel while it is being decoded
};

// A window's sampling seed: its first sample's position and the
// utterance's length and samples around it, so equal positions in different
// utterances draw differently while a transcript stays reproducible and
// independent of its batch.
uint64_t window_seed(std::span<const float> samples, size_t start) {
  uint64_t seed = decode::mix64(static_cast<uint64_t>(start) + 1) ^ decode::mix64(samples.size());
  for (size_t i = start; i < std::min(samples.size(), start + 64); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &samples[i], sizeof(bits));
    seed = decode::mix64(seed ^ bits);
  }
  return seed;
}

// Frames [seek, seek + count) of a whole log-mel, zero-padded to 3000 (HF's
// _get_input_segment pads the feature slice with 0).
Tensor window_of(const Tensor& whole, int64_t seek, int64_t count) {
  const int64_t mels = whole.size(0);
  const int64_t frames = whole.size(1);
  Tensor out = Tensor::zeros({mels, audio::WhisperLogMel::kFrames}, DType::kF32);
  const float* from = whole.data<float>();
  float* to = out.data<float>();
  for (int64_t m = 0; m < mels; ++m) {
    std::copy(from + m * frames + seek, from + m * frames + seek + count,
              to + m * audio::WhisperLogMel::kFrames);
  }
  return out;
}

}  // namespace

std::vector<Transcript> WhisperRecognizer::transcribe(std::span<const Waveform> utterances,
                                                      const DecodeOptions& resolved,
                                                      int64_t max_batch_size) const {
  const WhisperDecode options = WhisperDecode::from(resolved);
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument, "max_batch_size must be >= 1, got ",
             max_batch_size);
  search_options(options);  // refuses bad options before any work
  const int64_t window_frames = audio::WhisperLogMel::kFrames;
  const int64_t timestamp_begin = source_.generation.no_timestamps_token_id + 1;
  const auto text_of = [&](std::span<const int64_t> tokens) {
    return text_without_timestamps(tokens);
  };
  std::vector<Transcript> out(utterances.size());

  // Work: fixed windows (every utterance up to 30 s, and longer ones under
  // long_form=windows), known up front; and sequential utterances, one
  // window at a time. Each round decodes up to max_batch_size windows.
  std::vector<Window> fixed;
  std::vector<SequentialUtterance> sequential;
  std::vector<WindowedUtterance> windowed(utterances.size());
  int64_t total_frames = 0;
  for (size_t u = 0; u < utterances.size(); ++u) {
    const std::span<const float> samples(utterances[u]);
    // HF's long-form path takes input of more than 3000 whole-signal frames.
    const auto whole_frames =
        static_cast<int64_t>(samples.size()) / audio::WhisperLogMel::kHopLength;
    if (whole_frames > window_frames && options.long_form == "sequential") {
      SequentialUtterance s{
          u, samples, static_cast<int64_t>(samples.size()) / audio::WhisperLogMel::kHopLength};
      total_frames += s.frames;
      sequential.push_back(std::move(s));
      continue;
    }
    size_t start = 0;
    do {
      const size_t length = std::min<size_t>(kWindowSamples, samples.size() - start);
      fixed.push_back(Window{u, samples.subspan(start, length), Tensor(),
                             static_cast<double>(start) / kSampleRate, window_frames, false,
                             window_seed(samples, start)});
      total_frames += window_frames;
      start += length;
    } while (start < samples.size());
  }
  // Long-form audio takes minutes on the CPU: mel frames done, on a terminal.
  std::optional<ProgressBar> progress;
  if (fixed.size() + sequential.size() > static_cast<size_t>(max_batch_size) ||
      !sequential.empty()) {
    progress.emplace(total_frames, "whisper");
    progress->set_unit("frames");
  }

  const auto batch = static_cast<size_t>(max_batch_size);
  size_t next_fixed = 0;
  while (true) {
    throw_if_cancelled();
    std::vector<Window> round;
    std::vector<size_t> owners;  // round[i] of sequential[owners[i]], or npos
    for (size_t s = 0; s < sequential.size() && round.size() < batch; ++s) {
      SequentialUtterance& su = sequential[s];
      if (su.seek >= su.frames) continue;
      if (!su.mel.defined()) su.mel = mel_.compute_whole(su.samples);
      const int64_t count = std::min(window_frames, su.frames - su.seek);
      round.push_back(Window{su.utterance,
                             {},
                             window_of(su.mel, su.seek, count),
                             static_cast<double>(su.seek) / 100.0,
                             count,
                             true,
                             window_seed(su.samples, static_cast<size_t>(su.seek) *
                                                         audio::WhisperLogMel::kHopLength)});
      owners.push_back(s);
    }
    while (round.size() < batch && next_fixed < fixed.size()) {
      round.push_back(fixed[next_fixed++]);
      owners.push_back(std::string::npos);
    }
    if (round.empty()) break;
    std::vector<WindowResult> results = decode_windows(round, options);
    for (size_t i = 0; i < round.size(); ++i) {
      const Window& w = round[i];
      const decode::WhisperHypothesis& h = results[i].hypothesis;
      Transcript& t = out[w.utterance];
      if (!results[i].skip) t.score += h.score;  // a skipped window contributes nothing
      int64_t advance = w.frames;
      if (owners[i] == std::string::npos) {
        if (results[i].skip) {
          windowed[w.utterance].texts.emplace_back();
        } else {
          t.tokens.insert(t.tokens.end(), h.tokens.begin(), h.tokens.end());
          windowed[w.utterance].texts.push_back(text_of(h.tokens));
          if (options.timestamps) {
            for (Segment& segment :
                 whisper_window_segments(h.tokens, timestamp_begin, w.start_seconds, text_of)) {
              t.segments.push_back(std::move(segment));
            }
          }
        }
      } else if (!results[i].skip) {
        const decode::WindowSeek seek =
            decode::seek_window_segments(h.tokens, timestamp_begin, w.frames);
        for (const decode::WindowSegment& piece : seek.segments) {
          const std::span<const int64_t> slice =
              std::span<const int64_t>(h.tokens).subspan(piece.first, piece.last - piece.first);
          t.tokens.insert(t.tokens.end(), slice.begin(), slice.end());
          std::string text = text_of(slice);
          if (options.timestamps && !text.empty()) {
            t.segments.push_back(Segment{w.start_seconds + piece.start, w.start_seconds + piece.end,
                                         std::move(text),
                                         std::vector<int64_t>(slice.begin(), slice.end())});
          }
        }
        // A window whose last complete segment ends at its start would be
        // decoded again forever (as HF would): move on by the whole window.
        advance = seek.advance_frames > 0 ? seek.advance_frames : w.frames;
      }
      int64_t done_frames = window_frames;
      if (owners[i] != std::string::npos) {
        SequentialUtterance& su = sequential[owners[i]];
        done_frames = std::min(advance, su.frames - su.seek);  // seek may pass the end
        su.seek += advance;
        if (su.seek >= su.frames) su.mel = Tensor();  // done: free its log-mel
      }
      if (progress) progress->advance(done_frames);
    }
  }
  if (progress) progress->finish();

  for (size_t u = 0; u < out.size(); ++u) {
    out[u].text =
        windowed[u].texts.empty() ? text_of(out[u].tokens) : join_window_texts(windowed[u].texts);
  }
  return out;
}

}  // namespace oasr::engine
