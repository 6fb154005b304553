#include "models/qwen2_audio/qwen2_audio_recognizer.h"

#include <algorithm>

#include "core/cancellation.h"
#include "core/error.h"
#include "models/qwen2_audio/qwen2_audio_generation.h"
#include "models/qwen2_audio/qwen2_audio_materialize.h"
#include "ops/concat.h"

namespace oasr::engine {
namespace {

constexpr const char* kGreedy = "greedy_search";
// The longest generation a request may ask for: the LM's positions bound it
// anyway; this keeps a typo from decoding for minutes.
constexpr int64_t kMaxNewTokens = 4096;

}  // namespace

std::vector<DecodeOptionSpec> qwen2_audio_decode_options() {
  std::vector<DecodeOptionSpec> specs;
  DecodeOptionSpec method;
  method.key = kDecodeMethodKey;
  method.kind = DecodeValueKind::kText;
  method.help = "greedy search (HF generate's num_beams 1)";
  method.default_text = kGreedy;
  method.choices = {kGreedy};
  method.aliases = {"decoding_method"};
  specs.push_back(method);
  specs.push_back({.key = "max_new_tokens",
                   .kind = DecodeValueKind::kInteger,
                   .help = "the most tokens generated per utterance",
                   .default_text = "generation_config.json's max_new_tokens",
                   .min = 1,
                   .max = static_cast<double>(kMaxNewTokens)});
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

DecodeOptions Qwen2AudioRecognizer::resolve_decode(const DecodeOverrides& overrides) const {
  DecodeOptions resolved;
  resolved.set(kDecodeMethodKey, overrides.find<std::string>(kDecodeMethodKey).value_or(kGreedy));
  resolved.set(
      "max_new_tokens",
      overrides.find<int64_t>("max_new_tokens").value_or(source_.generation.max_new_tokens));
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

std::vector<Transcript> Qwen2AudioRecognizer::transcribe(std::span<const Waveform> utterances,
                                                         const DecodeOptions& options,
                                                         int64_t max_batch_size) const {
  const int64_t max_new_tokens = options.get<int64_t>("max_new_tokens");
  const int64_t batch = std::max<int64_t>(1, max_batch_size);
  // The pool: `batch` sequences of the longest prompt (a full 30 s window's
  // audio tokens) and max_new_tokens each, within the LM's positions.
  const int64_t longest_audio =
      models::Qwen2AudioEncoder::output_length(2 * source_.config.audio.max_source_positions);
  const int64_t longest =
      std::min<int64_t>(static_cast<int64_t>(prompt_ids(longest_audio).size()) + max_new_tokens,
                        source_.config.text.max_position_embeddings);
  models::Qwen2AudioBatchLimits limits;
  limits.max_running = batch;
  limits.blocks = batch * ((longest + limits.block_size - 1) / limits.block_size);
  models::Qwen2AudioContinuousBatch run(*model_, source_.generation.eos_token_ids, limits);

  std::vector<Transcript> out(utterances.size());
  size_t encoded = 0;
  // The audio tower runs `batch` utterances at a time, when the generation
  // has fewer than `batch` waiting, so audio tokens never pile up.
  const auto encode_next = [&] {
    const size_t count = std::min(static_cast<size_t>(batch), utterances.size() - encoded);
    std::vector<Tensor> mels;
    std::vector<int64_t> frames;
    for (size_t i = encoded; i < encoded + count; ++i) {
      throw_if_cancelled();
      const Waveform& samples = utterances[i];
      mels.push_back(mel_.compute(samples).unsqueeze(0));
      // The processor's feature_attention_mask: one frame per started hop,
      // at least one (an empty utterance still has the window's first frame).
      frames.push_back(std::max<int64_t>(
          1, (static_cast<int64_t>(samples.size()) + audio::WhisperLogMel::kHopLength - 1) /
                 audio::WhisperLogMel::kHopLength));
    }
    const Tensor mel = mels.size() == 1 ? mels[0] : ops::concat(mels, 0);
    for (Tensor& tokens : model_->encode_audio(mel, frames)) {
      models::Qwen2AudioRequest request;
      request.ids = prompt_ids(tokens.size(0));
      request.audio = std::move(tokens);
      request.max_new_tokens = max_new_tokens;
      run.submit(std::move(request));  // tickets follow the utterances' order
    }
    encoded += count;
  };
  while (encoded < utterances.size() || !run.idle()) {
    throw_if_cancelled();
    if (encoded < utterances.size() && run.waiting() < batch) encode_next();
    for (models::Qwen2AudioContinuousBatch::Finished& done : run.iterate()) {
      Transcript& t = out[static_cast<size_t>(done.ticket)];
      t.tokens = std::move(done.tokens);
      t.text = detokenize(t.tokens);
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
