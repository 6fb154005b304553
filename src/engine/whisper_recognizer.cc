#include "engine/whisper_recognizer.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/logging.h"
#include "decode/whisper_model_step.h"
#include "models/whisper_materialize.h"

namespace oasr::engine {

namespace {

decode::ByteLevelBpeTokenizer load_tokenizer(const models::WhisperSource& source) {
  if (!source.tokenizer_json.empty()) {
    return decode::ByteLevelBpeTokenizer::from_tokenizer_json(source.tokenizer_json);
  }
  return decode::ByteLevelBpeTokenizer::from_vocab_merges(source.vocab_json, source.merges_txt,
                                                          source.added_tokens_json);
}

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

decode::WhisperSearchOptions WhisperRecognizer::search_options(
    const WhisperDecodeOptions& options) const {
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
  s.num_beams = options.num_beams;
  s.length_penalty = options.length_penalty;
  s.validate();
  return s;
}

std::string WhisperRecognizer::detokenize(std::span<const int64_t> tokens) const {
  return tokenizer_.decode(tokens, /*skip_special_tokens=*/true);
}

std::vector<decode::WhisperHypothesis> WhisperRecognizer::decode_windows(
    std::span<const Window> windows, const WhisperDecodeOptions& options) const {
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

std::vector<WhisperTranscript> WhisperRecognizer::transcribe(
    const std::vector<std::vector<float>>& utterances, const WhisperDecodeOptions& options) const {
  OASR_CHECK(options.max_batch_size >= 1, kInvalidArgument, "max_batch_size must be >= 1, got ",
             options.max_batch_size);
  search_options(options);  // refuses bad options before any work
  // Every window is 30 s (the last one zero-padded), so batches need no
  // length bucketing; windows of one utterance are independent.
  std::vector<Window> windows;
  for (size_t u = 0; u < utterances.size(); ++u) {
    const std::span<const float> samples(utterances[u]);
    size_t start = 0;
    do {
      const size_t length = std::min<size_t>(kWindowSamples, samples.size() - start);
      windows.push_back(Window{u, samples.subspan(start, length)});
      start += length;
    } while (start < samples.size());
  }
  std::vector<decode::WhisperHypothesis> hyps;
  hyps.reserve(windows.size());
  const auto batch = static_cast<size_t>(options.max_batch_size);
  for (size_t start = 0; start < windows.size(); start += batch) {
    const size_t count = std::min(batch, windows.size() - start);
    auto decoded = decode_windows(std::span<const Window>(windows).subspan(start, count), options);
    for (auto& h : decoded) hyps.push_back(std::move(h));
  }

  std::vector<WhisperTranscript> out(utterances.size());
  std::vector<std::vector<std::string>> texts(utterances.size());
  for (size_t w = 0; w < windows.size(); ++w) {
    WhisperTranscript& t = out[windows[w].utterance];
    t.tokens.insert(t.tokens.end(), hyps[w].tokens.begin(), hyps[w].tokens.end());
    t.score += hyps[w].score;
    texts[windows[w].utterance].push_back(detokenize(hyps[w].tokens));
  }
  for (size_t u = 0; u < out.size(); ++u) out[u].text = join_window_texts(texts[u]);
  return out;
}

}  // namespace oasr::engine
