#include "models/qwen2_audio/qwen2_audio_recognizer.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "core/cancellation.h"
#include "core/error.h"
#include "models/qwen2_audio/qwen2_audio_beam.h"
#include "models/qwen2_audio/qwen2_audio_generation.h"
#include "models/qwen2_audio/qwen2_audio_materialize.h"
#include "ops/concat.h"

namespace oasr::engine {
namespace {

constexpr const char* kGreedy = "greedy_search";
constexpr const char* kBeam = "beam_search";
constexpr int64_t kDefaultBeams = 5;
// Each beam is a sequence of the LM; past this a request costs more than a
// batch of greedy ones.
constexpr int64_t kMaxBeams = 16;
// The longest generation a request may ask for: the LM's positions bound it
// anyway; this keeps a typo from decoding for minutes.
constexpr int64_t kMaxNewTokens = 4096;

}  // namespace

std::vector<DecodeOptionSpec> qwen2_audio_decode_options() {
  std::vector<DecodeOptionSpec> specs;
  DecodeOptionSpec method;
  method.key = kDecodeMethodKey;
  method.kind = DecodeValueKind::kText;
  method.help = "greedy search (HF generate's num_beams 1) or beam search (its num_beams > 1)";
  method.default_text = kGreedy;
  method.choices = {kGreedy, kBeam};
  method.aliases = {"decoding_method"};
  specs.push_back(method);
  specs.push_back({.key = "max_new_tokens",
                   .kind = DecodeValueKind::kInteger,
                   .help = "the most tokens generated per utterance",
                   .default_text = "generation_config.json's max_new_tokens",
                   .min = 1,
                   .max = static_cast<double>(kMaxNewTokens)});
  specs.push_back({.key = "beam_size",
                   .kind = DecodeValueKind::kInteger,
                   .help = "beam_search: beams (HF's num_beams)",
                   .default_text = std::to_string(kDefaultBeams),
                   .min = 1,
                   .max = static_cast<double>(kMaxBeams)});
  specs.push_back({.key = "length_penalty",
                   .kind = DecodeValueKind::kNumber,
                   .help = "beam_search: a finished hypothesis scores sum_logprobs / length ^ "
                           "length_penalty",
                   .default_text = "1.0"});
  return specs;
}

Qwen2AudioRecognizer::Qwen2AudioRecognizer(models::Qwen2AudioSource source,
                                           const quant::QuantizationConfig& quantization,
                                           const MaterializeOptions& options)
    : source_(std::move(source)),
      mel_(source_.config.audio.num_mel_bins),
      tokenizer_(decode::ByteLevelBpeTokenizer::from_tokenizer_json(source_.tokenizer_path)) {
  const int64_t audio_token = source_.config.audio_token_index;
  prompt_ = tokenizer_.encode(kQwen2AudioAsrPrompt);
  OASR_CHECK(std::count(prompt_.begin(), prompt_.end(), audio_token) == 1, kCorruptFile,
             source_.tokenizer_path.string(),
             ": the ASR prompt does not tokenize to one <|AUDIO|> token of id ", audio_token,
             " (config.json audio_token_index); the tokenizer and the model config disagree");
  models::MaterializedQwen2Audio loaded =
      models::materialize_qwen2_audio_model(source_, quantization, options);
  model_ = std::move(loaded.model);
  spec_ = std::move(loaded.spec);
}

Recognizer::AudioLimit Qwen2AudioRecognizer::audio_limit(const DecodeOptions& options) const {
  (void)options;
  return {static_cast<double>(audio::WhisperLogMel::kChunkSamples) / sample_rate(),
          "Qwen2-Audio's audio tower reads one 30 s window (its 3000 mel frames)"};
}

// greedy_search unless told; beam_search with 5 beams unless beam_size says
// otherwise (Whisper's rules and messages).
DecodeOptions Qwen2AudioRecognizer::resolve_decode(const DecodeOverrides& overrides) const {
  DecodeOptions resolved;
  const std::string method = overrides.find<std::string>(kDecodeMethodKey).value_or(kGreedy);
  const std::optional<int64_t> beam_size = overrides.find<int64_t>("beam_size");
  if (method == kGreedy) {
    OASR_CHECK(!beam_size || *beam_size == 1, kInvalidArgument,
               "greedy_search keeps one hypothesis; drop --beam-size ", beam_size.value_or(1),
               " or use --decode-method beam_search");
    OASR_CHECK(!overrides.has("length_penalty"), kInvalidArgument,
               "--length-penalty scores the finished hypotheses of beam_search; greedy_search "
               "has none: drop it or use --decode-method beam_search");
  } else {
    OASR_CHECK(!beam_size || *beam_size >= 2, kInvalidArgument,
               "beam_search needs --beam-size 2 or more; 1 is greedy_search");
  }
  resolved.set(kDecodeMethodKey, method);
  resolved.set(
      "max_new_tokens",
      overrides.find<int64_t>("max_new_tokens").value_or(source_.generation.max_new_tokens));
  resolved.set("beam_size", method == kGreedy ? int64_t{1} : beam_size.value_or(kDefaultBeams));
  resolved.set("length_penalty", overrides.find<double>("length_penalty").value_or(1.0));
  const std::vector<DecodeOptionSpec> specs = qwen2_audio_decode_options();
  for (const auto& [key, value] : resolved.items()) {
    check_decode_value(*find_decode_spec(specs, key), value);
  }
  return resolved;
}

std::vector<int64_t> Qwen2AudioRecognizer::prompt_ids(int64_t audio_tokens) const {
  const int64_t audio_token = source_.config.audio_token_index;
  std::vector<int64_t> ids;
  for (const int64_t id : prompt_) {
    if (id == audio_token) {
      ids.insert(ids.end(), static_cast<size_t>(audio_tokens), audio_token);
    } else {
      ids.push_back(id);
    }
  }
  return ids;
}

int64_t Qwen2AudioRecognizer::mel_frames(size_t samples) {
  // One frame per started hop, at least one (an empty utterance still has
  // the window's first frame).
  constexpr auto kHop = static_cast<size_t>(audio::WhisperLogMel::kHopLength);
  return std::max<int64_t>(1, static_cast<int64_t>((samples + kHop - 1) / kHop));
}

// Utterances wait as samples; the audio tower encodes up to `batch` of them
// at a time, when the generation has fewer than `batch` waiting, so audio
// tokens never pile up; the generation runs one iteration per step(). A
// beam-search request runs its whole search alone, in one step (the greedy
// sequences wait for it; its beams have a cache of their own).
class Qwen2AudioRecognizer::Continuous final : public ContinuousDecoder {
 public:
  Continuous(const Qwen2AudioRecognizer& recognizer, const DecodeOptions& defaults, int64_t batch)
      : recognizer_(recognizer),
        batch_(std::max<int64_t>(1, batch)),
        default_max_new_tokens_(defaults.get<int64_t>("max_new_tokens")),
        run_(*recognizer.model_, recognizer.source_.generation.eos_token_ids,
             limits(recognizer, defaults, batch_)) {}

  int64_t submit(Waveform samples, const DecodeOptions& options) override {
    Unencoded next{next_ticket_,
                   {},
                   options.get<int64_t>("max_new_tokens"),
                   options.get<int64_t>("beam_size"),
                   options.get<double>("length_penalty")};
    const int64_t audio_tokens =
        models::Qwen2AudioEncoder::output_length(mel_frames(samples.size()));
    const auto prompt = static_cast<int64_t>(recognizer_.prompt_ids(audio_tokens).size());
    if (next.beams > 1) {
      const int64_t positions = recognizer_.source_.config.text.max_position_embeddings;
      OASR_CHECK(prompt < positions, kInvalidArgument, "Qwen2-Audio: a ", prompt,
                 "-token prompt does not leave room in the LM's ", positions, " positions");
    } else {
      try {
        run_.check_fits(prompt, next.max_new_tokens);
      } catch (const Error& e) {
        throw Error(e.code(), std::string(e.what()) + " (the pool holds " + std::to_string(batch_) +
                                  " sequences of a full 30 s prompt and the default "
                                  "max_new_tokens " +
                                  std::to_string(default_max_new_tokens_) +
                                  ": --max-batch-size and --max-new-tokens size it)");
      }
    }
    next.samples.assign(samples.begin(), samples.end());
    (next.beams > 1 ? beam_waiting_ : unencoded_).push_back(std::move(next));
    return next_ticket_++;
  }

  std::vector<std::pair<int64_t, Transcript>> step() override {
    std::vector<std::pair<int64_t, Transcript>> out;
    if (!beam_waiting_.empty()) {
      out.emplace_back(beam_waiting_.front().ticket, beam_search(beam_waiting_.front()));
      beam_waiting_.pop_front();
    }
    if (!unencoded_.empty() && run_.waiting() < batch_) encode_next();
    for (models::Qwen2AudioContinuousBatch::Finished& done : run_.iterate()) {
      Transcript t;
      t.tokens = std::move(done.tokens);
      t.text = recognizer_.detokenize(t.tokens);
      out.emplace_back(ticket_of_run_.at(done.ticket), std::move(t));
      ticket_of_run_.erase(done.ticket);
    }
    return out;
  }

  int64_t pending() const override {
    return static_cast<int64_t>(beam_waiting_.size() + unencoded_.size() + ticket_of_run_.size());
  }

 private:
  struct Unencoded {
    int64_t ticket;
    std::vector<float> samples;
    int64_t max_new_tokens;
    int64_t beams;  // 1: greedy
    double length_penalty;
  };

  Transcript beam_search(const Unencoded& waiting) const {
    const Tensor mel = recognizer_.mel_.compute(waiting.samples).unsqueeze(0);
    const int64_t frames = mel_frames(waiting.samples.size());
    models::Qwen2AudioRequest request;
    request.audio = std::move(recognizer_.model_->encode_audio(mel, std::span(&frames, 1))[0]);
    request.ids = recognizer_.prompt_ids(request.audio.size(0));
    request.max_new_tokens = waiting.max_new_tokens;
    const models::Qwen2AudioBeamResult best = models::qwen2_audio_beam_search(
        *recognizer_.model_, request,
        {waiting.beams, waiting.length_penalty, recognizer_.source_.generation.eos_token_ids});
    Transcript t;
    t.tokens = best.tokens;
    t.text = recognizer_.detokenize(t.tokens);
    t.score = best.score;
    return t;
  }

  // The pool: `batch` sequences of the longest prompt (a full 30 s window's
  // audio tokens) and the default max_new_tokens each, within the LM's
  // positions. A request asking for more tokens fits while others leave room
  // (the batch preempts the newest when the pool runs short).
  static models::Qwen2AudioBatchLimits limits(const Qwen2AudioRecognizer& recognizer,
                                              const DecodeOptions& defaults, int64_t batch) {
    const models::Qwen2AudioConfig& config = recognizer.source_.config;
    const int64_t longest_audio =
        models::Qwen2AudioEncoder::output_length(2 * config.audio.max_source_positions);
    const int64_t longest =
        std::min<int64_t>(static_cast<int64_t>(recognizer.prompt_ids(longest_audio).size()) +
                              defaults.get<int64_t>("max_new_tokens"),
                          config.text.max_position_embeddings);
    models::Qwen2AudioBatchLimits limits;
    limits.max_running = batch;
    limits.blocks = batch * ((longest + limits.block_size - 1) / limits.block_size);
    return limits;
  }

  void encode_next() {
    const size_t count = std::min(static_cast<size_t>(batch_), unencoded_.size());
    std::vector<Tensor> mels;
    std::vector<int64_t> frames;
    for (size_t i = 0; i < count; ++i) {
      throw_if_cancelled();
      const std::vector<float>& samples = unencoded_[i].samples;
      mels.push_back(recognizer_.mel_.compute(samples).unsqueeze(0));
      frames.push_back(mel_frames(samples.size()));
    }
    const Tensor mel = mels.size() == 1 ? mels[0] : ops::concat(mels, 0);
    std::vector<Tensor> audio = recognizer_.model_->encode_audio(mel, frames);
    for (size_t i = 0; i < count; ++i) {
      models::Qwen2AudioRequest request;
      request.ids = recognizer_.prompt_ids(audio[i].size(0));
      request.audio = std::move(audio[i]);
      request.max_new_tokens = unencoded_.front().max_new_tokens;
      ticket_of_run_[run_.submit(std::move(request))] = unencoded_.front().ticket;
      unencoded_.pop_front();
    }
  }

  const Qwen2AudioRecognizer& recognizer_;
  int64_t batch_;
  int64_t default_max_new_tokens_;
  models::Qwen2AudioContinuousBatch run_;
  std::deque<Unencoded> unencoded_;                     // greedy requests
  std::deque<Unencoded> beam_waiting_;                  // beam-search requests, one a step
  std::unordered_map<int64_t, int64_t> ticket_of_run_;  // the generation's ticket -> ours
  int64_t next_ticket_ = 0;
};

std::unique_ptr<ContinuousDecoder> Qwen2AudioRecognizer::start_continuous(
    const DecodeOptions& defaults, int64_t max_batch_size) const {
  return std::make_unique<Continuous>(*this, defaults, max_batch_size);
}

std::vector<Transcript> Qwen2AudioRecognizer::transcribe(std::span<const Waveform> utterances,
                                                         const DecodeOptions& options,
                                                         int64_t max_batch_size) const {
  Continuous decoder(*this, options, max_batch_size);
  for (const Waveform& samples : utterances) decoder.submit(samples, options);
  std::vector<Transcript> out(utterances.size());
  while (decoder.pending() > 0) {
    throw_if_cancelled();
    for (auto& [ticket, transcript] : decoder.step()) {
      out[static_cast<size_t>(ticket)] = std::move(transcript);
    }
  }
  return out;
}

std::string Qwen2AudioRecognizer::detokenize(std::span<const int64_t> tokens) const {
  // The LM's vocabulary is padded past the tokenizer's (Qwen2-Audio-7B:
  // 156032 embedding rows, 151646 tokens); an id the tokenizer does not know
  // decodes to nothing, as tokenizers' decode skips it.
  std::vector<int64_t> known;
  for (const int64_t id : tokens) {
    if (tokenizer_.knows(id)) known.push_back(id);
  }
  return tokenizer_.decode(known, /*skip_special_tokens=*/true);
}

RecognizerFactory qwen2_audio_recognizer_factory() {
  return [](const EngineConfig& config) {
    models::Qwen2AudioSource source = models::load_qwen2_audio_dir(config.ckpt_dir);
    if (config.weights) source.weights = config.weights;
    return std::make_unique<Qwen2AudioRecognizer>(std::move(source), config.quantization,
                                                  config.materialize_options());
  };
}

}  // namespace oasr::engine
