#include "engine/asr_engine.h"

#include <cmath>

#include "audio/audio_file.h"
#include "audio/silence.h"
#include "core/env.h"
#include "core/logging.h"
#include "engine/continuous_batch.h"
#include "layers/quantizable.h"
#include "ops/cpu_threads.h"

namespace oasr::engine {

namespace {
std::vector<Waveform> views_of(const std::vector<std::vector<float>>& utterances) {
  return std::vector<Waveform>(utterances.begin(), utterances.end());
}
}  // namespace

ASREngine::ASREngine(const EngineConfig& config) : config_(config) {
  env::check_switches();  // a malformed switch is the start-up's error, not an utterance's
  // An architecture without a CUDA path is refused by name before the
  // device checks, so the message says what is missing even where no GPU is
  // present; the config's own checks precede the refusal of a path no
  // architecture takes.
  architecture_ = models::detect_architecture(config_.ckpt_dir);
  OASR_CHECK(
      architecture_ == nullptr || architecture_->serves_cuda || config_.served_device().is_cpu(),
      kUnsupported, "device '", config_.device, "': ", config_.ckpt_dir.string(), " is a ",
      architecture_->display_name, " model, and the ", architecture_->display_name,
      " path is not ported to CUDA yet; use --device cpu");
  config_.validate();
  architecture_ = &models::architecture_for(config_.ckpt_dir);
  // Keys the architecture does not declare, and values outside its ranges,
  // are refused before the model is read.
  models::check_decode_values(*architecture_, config_.decode);
  if (config_.threads > 0) ops::set_cpu_threads(config_.threads);
  recognizer_ = architecture_->make_recognizer(config_);
  decode_ = recognizer_->resolve_decode(config_.decode);
  quantization_info_ = recognizer_->quantization_info();
  audio_limit_ = recognizer_->audio_limit(decode_);
  log_quantization();
}

ASREngine::~ASREngine() = default;

void ASREngine::log_quantization() const {
  log::info("quantization: {}", quantization_info_.summary());
  for (const quant::LayerReport& layer : quantization_info_.layers) {
    log::debug("  {} {} lane {} kernel {} input {}", layer.path, layer.scheme, layer.lane,
               layer.kernel, layer.input_quantizer);
  }
}

DecodeOptions ASREngine::resolve_decode(const DecodeOverrides& overrides) const {
  if (overrides.empty()) return decode_;
  models::check_decode_values(*architecture_, overrides);
  return recognizer_->resolve_decode(config_.decode.overlaid(overrides));
}

void ASREngine::set_input_observer(quant::InputObserver* observer) {
  for (auto& [path, module] : recognizer_->module().named_modules()) {
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module); layer != nullptr) {
      layer->set_input_observer(observer);
    }
  }
}

void ASREngine::check_length(size_t samples, const std::string& label) const {
  const auto minimum = static_cast<size_t>(std::ceil(kMinUtteranceSeconds * sample_rate()));
  OASR_CHECK(samples >= minimum, kInvalidArgument, label, ": audio of ", samples, " samples (",
             static_cast<double>(samples) / sample_rate(), " s at ", sample_rate(),
             " Hz) is shorter than one ", kMinUtteranceSeconds * 1000,
             " ms analysis window; nothing to recognise");
  const Recognizer::AudioLimit& limit = audio_limit_;
  const double seconds = static_cast<double>(samples) / sample_rate();
  // Four decimals: audio one sample over the limit must not print as equal.
  const auto text = [](double value) {
    std::string out = std::to_string(std::round(value * 1e4) / 1e4);
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
    return out;
  };
  OASR_CHECK(seconds <= limit.seconds, kInvalidArgument, label, ": ", text(seconds),
             " s of audio is over the ", limit.seconds, " s this ", architecture_->display_name,
             " model takes at once (", limit.why, "); split it into pieces of at most ",
             limit.seconds, " s");
}

std::vector<float> ASREngine::load_utterance(const std::filesystem::path& path) const {
  std::vector<float> samples = audio::load_audio(path, sample_rate()).samples;
  check_length(samples.size(), path.string());
  return samples;
}

std::vector<Transcript> ASREngine::transcribe_files(const std::vector<std::filesystem::path>& paths,
                                                    const DecodeOverrides& overrides) const {
  const DecodeOptions options = resolve_decode(overrides);  // refuses before any decoding
  std::vector<std::vector<float>> utterances;
  utterances.reserve(paths.size());
  for (const auto& path : paths) utterances.push_back(load_utterance(path));
  return decode(views_of(utterances), options);
}

std::vector<Transcript> ASREngine::transcribe(const std::vector<std::vector<float>>& utterances,
                                              const DecodeOverrides& overrides) const {
  return transcribe(std::span<const Waveform>(views_of(utterances)), overrides);
}

std::vector<UtteranceResult> ASREngine::transcribe_each(
    const std::vector<std::vector<float>>& utterances, const std::vector<std::string>& labels,
    const DecodeOverrides& overrides) const {
  return transcribe_each(std::span<const Waveform>(views_of(utterances)), labels, overrides);
}

std::vector<Transcript> ASREngine::transcribe(std::span<const Waveform> utterances,
                                              const DecodeOverrides& overrides) const {
  const DecodeOptions options = resolve_decode(overrides);
  for (size_t i = 0; i < utterances.size(); ++i) {
    check_length(utterances[i].size(), "utterance " + std::to_string(i));
  }
  return decode(utterances, options);
}

std::vector<UtteranceResult> ASREngine::transcribe_each(std::span<const Waveform> utterances,
                                                        const std::vector<std::string>& labels,
                                                        const DecodeOverrides& overrides) const {
  OASR_CHECK(labels.size() == utterances.size(), kInvalidArgument,
             "transcribe_each: ", labels.size(), " labels for ", utterances.size(),
             " utterances; give one each");
  const DecodeOptions options = resolve_decode(overrides);
  std::vector<UtteranceResult> results(utterances.size());
  std::vector<size_t> decodable;
  for (size_t i = 0; i < utterances.size(); ++i) {
    try {
      check_length(utterances[i].size(), labels[i]);
      decodable.push_back(i);
    } catch (const Error& e) {
      results[i].error = e;
    }
  }
  transcribe_splitting(utterances, labels, std::move(decodable), options, results);
  return results;
}

void ASREngine::transcribe_splitting(std::span<const Waveform> utterances,
                                     const std::vector<std::string>& labels,
                                     std::vector<size_t> indices, const DecodeOptions& options,
                                     std::vector<UtteranceResult>& results) const {
  if (indices.empty()) return;
  // Views of the chosen utterances: a subset copies no samples.
  std::vector<Waveform> batch;
  batch.reserve(indices.size());
  for (size_t i : indices) batch.push_back(utterances[i]);
  try {
    std::vector<Transcript> decoded = decode(batch, options);
    for (size_t k = 0; k < indices.size(); ++k) {
      results[indices[k]].transcript = std::move(decoded[k]);
    }
    return;
  } catch (const Error& e) {
    // A stop request ends the whole call; it is nobody's utterance's fault.
    if (e.code() == ErrorCode::kCancelled) throw;
    if (indices.size() == 1) {
      results[indices[0]].error = Error(e.code(), labels[indices[0]] + ": " + e.what());
      return;
    }
  }
  batch.clear();
  const auto middle = indices.begin() + static_cast<std::ptrdiff_t>(indices.size() / 2);
  transcribe_splitting(utterances, labels, std::vector<size_t>(indices.begin(), middle), options,
                       results);
  transcribe_splitting(utterances, labels, std::vector<size_t>(middle, indices.end()), options,
                       results);
}

std::vector<Transcript> ASREngine::decode(std::span<const Waveform> utterances,
                                          const DecodeOptions& options) const {
  // Silence by the signal (audio/silence.h) is an empty transcript: both
  // models name a token on digital silence or DC ("A", " you").
  std::vector<Transcript> results(utterances.size());
  std::vector<Waveform> heard;
  std::vector<size_t> heard_at;
  for (size_t i = 0; i < utterances.size(); ++i) {
    const double dbfs = audio::deviation_rms_dbfs(utterances[i]);
    if (dbfs < audio::kSilenceDbfs) {  // audio::is_silent, the level kept for the log
      log::debug(
          "utterance {}: silence ({:.1f} dBFS RMS about its mean, under {} dBFS): empty "
          "transcript",
          i, dbfs, audio::kSilenceDbfs);
      continue;
    }
    heard.push_back(utterances[i]);
    heard_at.push_back(i);
  }
  if (heard.empty()) return results;
  std::vector<Transcript> decoded = recognizer_->transcribe(heard, options, config_.max_batch_size);
  for (size_t k = 0; k < heard.size(); ++k) results[heard_at[k]] = std::move(decoded[k]);
  return results;
}

std::unique_ptr<ContinuousBatch> ASREngine::start_continuous() const {
  OASR_CHECK(recognizer_->decodes_continuously(), kUnsupported, config_.ckpt_dir.string(), " is a ",
             architecture_->display_name, " model, and ", architecture_->display_name,
             " has no iteration-level (continuous) decoding: batch whole utterances with "
             "transcribe()");
  return std::make_unique<ContinuousBatch>(*this);
}

std::unique_ptr<StreamingSession> ASREngine::start_session(const DecodeOverrides& overrides) const {
  OASR_CHECK(recognizer_->streams(), kUnsupported, config_.ckpt_dir.string(), " is a ",
             architecture_->display_name, " model, and ", architecture_->display_name,
             " does not stream: transcribe whole utterances with transcribe()");
  return recognizer_->start_session(resolve_decode(overrides));
}

}  // namespace oasr::engine
