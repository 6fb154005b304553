#include "models/fastconformer/fastconformer_recognizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "audio/nemo_mel.h"
#include "core/error.h"
#include "decode/ctc_search.h"
#include "decode/transducer_greedy.h"
#include "models/architecture.h"
#include "ops/cpu_threads.h"

namespace oasr::engine {

namespace {
constexpr const char* kCtcGreedy = "ctc_greedy_search";
constexpr const char* kTransducerGreedy = "transducer_greedy_search";

const char* head_name(const models::FastConformerConfig& config) {
  switch (config.head) {
    case models::FastConformerHead::kCtc:
      return "CTC";
    case models::FastConformerHead::kRnnt:
      return "RNN-T";
    case models::FastConformerHead::kTdt:
      return "TDT";
  }
  return "?";
}

}  // namespace

std::vector<DecodeOptionSpec> fastconformer_decode_options() {
  DecodeOptionSpec method;
  method.key = kDecodeMethodKey;
  method.kind = DecodeValueKind::kText;
  method.help =
      "the search, NeMo's greedy_batch for the checkpoint's head: ctc_greedy_search (CTC), "
      "transducer_greedy_search (RNN-T, TDT: label-looping, max_symbols from the checkpoint); "
      "a hybrid transducer / CTC checkpoint takes either";
  method.default_text = "the head's greedy search";
  method.choices = {kCtcGreedy, kTransducerGreedy};
  method.aliases = {"decoding_method"};
  return {method};
}

RecognizerFactory fastconformer_recognizer_factory() {
  return
      [](const EngineConfig& config) { return std::make_unique<FastConformerRecognizer>(config); };
}

FastConformerRecognizer::FastConformerRecognizer(const EngineConfig& config) {
  source_ = models::load_nemo_checkpoint(config.ckpt_dir);
  if (config.weights) source_.weights = config.weights;
  resolve_decode(config.decode);  // refuse bad flags before the weights load
  mel_ = std::make_unique<audio::NemoMelSpectrogram>(source_.config.preprocessor,
                                                     source_.mel_window, source_.mel_filterbank);
  models::MaterializedFastConformer loaded = models::materialize_fastconformer_model(
      source_, config.quantization, config.materialize_options());
  model_ = std::move(loaded.model);
  spec_ = std::move(loaded.spec);
}

FastConformerRecognizer::~FastConformerRecognizer() = default;

int FastConformerRecognizer::sample_rate() const {
  return static_cast<int>(source_.config.preprocessor.sample_rate);
}

Recognizer::AudioLimit FastConformerRecognizer::audio_limit(const DecodeOptions& options) const {
  (void)options;
  const auto& e = source_.config.encoder;
  const auto& mel = source_.config.preprocessor;
  AudioLimit limit;
  limit.seconds = static_cast<double>(e.pos_emb_max_len * e.subsampling_factor * mel.hop_length) /
                  static_cast<double>(mel.sample_rate);
  limit.why = "its relative position table holds " + std::to_string(e.pos_emb_max_len) +
              " encoder frames (encoder.pos_emb_max_len)";
  return limit;
}

DecodeOptions FastConformerRecognizer::resolve_decode(const DecodeOverrides& o) const {
  const models::FastConformerConfig& config = source_.config;
  const char* own = config.is_transducer() ? kTransducerGreedy : kCtcGreedy;
  const std::string method = o.find<std::string>(kDecodeMethodKey).value_or(own);
  // A hybrid's CTC head is the other method it takes.
  const bool hybrid_ctc = config.has_aux_ctc && method == kCtcGreedy;
  if (method != own && !hybrid_ctc) {
    const std::string owners = models::architectures_taking(method);
    OASR_THROW(kInvalidArgument, "decode method '", method, "' is not a method of this NeMo ",
               head_name(config), " checkpoint",
               owners.empty() ? std::string() : " (" + owners + " checkpoints take it)",
               "; it takes ", own, config.has_aux_ctc ? std::string(" or ") + kCtcGreedy : "");
  }
  for (const auto& [key, value] : o.items()) {
    (void)value;
    OASR_CHECK(key == kDecodeMethodKey, kInvalidArgument, decode_label(key),
               " is not read by NeMo FastConformer greedy search; drop it");
  }
  DecodeOptions resolved;
  resolved.set(kDecodeMethodKey, method);
  return resolved;
}

Tensor FastConformerRecognizer::features(Waveform samples) const {
  return mel_->compute(samples).transpose(0, 1).contiguous();  // [frames, features]
}

std::vector<Transcript> FastConformerRecognizer::transcribe(std::span<const Waveform> utterances,
                                                            const DecodeOptions& options,
                                                            int64_t max_batch_size) const {
  // Greedy on the transducer head, or on the CTC head (CTC and hybrid models).
  const bool use_ctc = options.get<std::string>(kDecodeMethodKey) == kCtcGreedy;
  std::vector<Tensor> feats(utterances.size());
  ops::parallel_for_rethrowing(static_cast<int64_t>(utterances.size()), [&](int64_t i) {
    feats[static_cast<size_t>(i)] = features(utterances[static_cast<size_t>(i)]);
  });
  return transcribe_in_length_buckets(feats, max_batch_size, [&](const std::vector<Tensor>& batch) {
    return transcribe_batch(batch, use_ctc);
  });
}

std::vector<Transcript> FastConformerRecognizer::transcribe_batch(const std::vector<Tensor>& feats,
                                                                  bool use_ctc) const {
  const int64_t batch = static_cast<int64_t>(feats.size());
  int64_t max_frames = 0;
  for (const Tensor& f : feats) max_frames = std::max(max_frames, f.size(0));
  const int64_t dim = feats.front().size(1);
  Tensor padded = Tensor::zeros({batch, max_frames, dim}, DType::kF32);
  std::vector<int64_t> lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    padded.select(0, b).narrow(0, 0, feats[b].size(0)).copy_(feats[b]);
    lengths[static_cast<size_t>(b)] = feats[b].size(0);
  }
  const models::FastConformerEncoder::Output encoded = model_->encode(padded, lengths);
  return use_ctc ? ctc_transcripts(encoded) : transducer_transcripts(encoded);
}

std::vector<Transcript> FastConformerRecognizer::ctc_transcripts(
    const models::FastConformerEncoder::Output& encoded) const {
  const Tensor log_probs = model_->ctc_log_probs(encoded.out);
  const double seconds_per_frame = encoder_frame_seconds();
  std::vector<Transcript> results(encoded.lengths.size());
  for (size_t b = 0; b < results.size(); ++b) {
    const Tensor row =
        log_probs.select(0, static_cast<int64_t>(b)).narrow(0, 0, encoded.lengths[b]);
    const std::vector<decode::CtcEmission> emitted =
        decode::ctc_greedy_emissions(row.contiguous(), source_.config.blank_id());
    Transcript& out = results[b];
    // NeMo's CTC offsets (ctc_decoding.py, _compute_offsets over the token
    // lengths decode_hypothesis keeps): a token spans from the previous
    // token's emitting frame (frame 0 for the first) to its own.
    int64_t previous_frame = 0;
    for (const decode::CtcEmission& e : emitted) {
      out.tokens.push_back(e.token);
      out.token_times.push_back({static_cast<double>(previous_frame) * seconds_per_frame,
                                 static_cast<double>(e.frame) * seconds_per_frame});
      previous_frame = e.frame;
    }
    out.text = detokenize(out.tokens);
  }
  return results;
}

std::vector<Transcript> FastConformerRecognizer::transducer_transcripts(
    const models::FastConformerEncoder::Output& encoded) const {
  const models::FastConformerConfig& config = source_.config;
  models::TransducerBatchSteps steps(model_->predictor(), model_->joint(), encoded.out,
                                     config.blank_id());
  decode::TransducerGreedyOptions options;
  options.blank_id = config.blank_id();
  options.durations = config.transducer.durations;
  options.max_symbols = config.transducer.max_symbols;
  const std::vector<decode::TransducerHypothesis> hyps =
      decode::transducer_greedy_search(steps, encoded.lengths, options);
  const double seconds_per_frame = encoder_frame_seconds();
  std::vector<Transcript> results(hyps.size());
  for (size_t b = 0; b < hyps.size(); ++b) {
    const decode::TransducerHypothesis& h = hyps[b];
    Transcript& out = results[b];
    out.tokens = h.tokens;
    out.score = h.score;
    out.text = detokenize(out.tokens);
    // NeMo's token offsets: a token starts on its frame and lasts its
    // predicted duration (TDT) or the one frame (RNN-T).
    for (size_t i = 0; i < h.frames.size(); ++i) {
      const int64_t span = h.durations.empty() ? 1 : std::max<int64_t>(h.durations[i], 1);
      out.token_times.push_back({static_cast<double>(h.frames[i]) * seconds_per_frame,
                                 static_cast<double>(h.frames[i] + span) * seconds_per_frame});
    }
  }
  return results;
}

double FastConformerRecognizer::encoder_frame_seconds() const {
  const models::FastConformerConfig& config = source_.config;
  return static_cast<double>(config.preprocessor.hop_length * config.encoder.subsampling_factor) /
         static_cast<double>(config.preprocessor.sample_rate);
}

std::string FastConformerRecognizer::detokenize(std::span<const int64_t> tokens) const {
  std::vector<int> ids;
  ids.reserve(tokens.size());
  for (int64_t id : tokens) {
    OASR_CHECK(id >= 0 && id < source_.config.blank_id(), kInvalidArgument, "token id ", id,
               " is outside the vocabulary [0, ", source_.config.blank_id(), ")");
    ids.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = source_.tokenizer->Decode(ids, &text);
  OASR_CHECK(status.ok(), kInternal, "SentencePiece decode: ", status.ToString());
  return text;
}

}  // namespace oasr::engine
