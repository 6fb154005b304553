#include "engine/asr_engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "audio/audio_file.h"
#include "core/error.h"
#include "core/logging.h"
#include "decode/attention_rescoring.h"
#include "engine/whisper_recognizer.h"
#include "layers/quantizable.h"
#include "models/architecture.h"
#include "models/materialize.h"
#include "models/native_checkpoint.h"
#include "models/whisper_convert.h"
#include "models/whisper_dir.h"
#include "ops/cpu_threads.h"
#include "quant/apply_links.h"

namespace oasr::engine {

namespace {
constexpr DecodeMethod kMethods[] = {
    DecodeMethod::kCtcGreedySearch, DecodeMethod::kCtcPrefixBeamSearch,
    DecodeMethod::kAttentionRescoring, DecodeMethod::kGreedySearch, DecodeMethod::kBeamSearch};
constexpr const char* kU2ppMethods =
    "ctc_greedy_search, ctc_prefix_beam_search or attention_rescoring";
constexpr const char* kWhisperMethods = "greedy_search or beam_search";
// HF's num_beams for beam search when --beam-size is not given.
constexpr int64_t kWhisperDefaultBeams = 5;
// An upper bound on beams so a typo cannot run for minutes: CTC prefix beam
// search costs O(beam^2) per frame and Whisper's beam search one decoder row
// per beam per step. The checkpoint defaults are 10 (U2++) and 5 (Whisper).
constexpr int64_t kMaxBeamSize = 128;
}  // namespace

const char* decode_method_name(DecodeMethod method) {
  switch (method) {
    case DecodeMethod::kCtcGreedySearch:
      return "ctc_greedy_search";
    case DecodeMethod::kCtcPrefixBeamSearch:
      return "ctc_prefix_beam_search";
    case DecodeMethod::kAttentionRescoring:
      return "attention_rescoring";
    case DecodeMethod::kGreedySearch:
      return "greedy_search";
    case DecodeMethod::kBeamSearch:
      return "beam_search";
  }
  return "unknown";
}

bool is_whisper_method(DecodeMethod method) {
  return method == DecodeMethod::kGreedySearch || method == DecodeMethod::kBeamSearch;
}

const char* model_family_name(ModelFamily family) {
  return family == ModelFamily::kWhisper ? "Whisper" : "U2++";
}

DecodeMethod parse_decode_method(const std::string& name) {
  for (DecodeMethod m : kMethods) {
    if (name == decode_method_name(m)) return m;
  }
  OASR_THROW(kInvalidArgument, "unknown decode method '", name, "'; use ", kU2ppMethods,
             " (U2++ checkpoints) or ", kWhisperMethods, " (Whisper checkpoints)");
}

void DecodeOptions::validate() const {
  OASR_CHECK(beam_size >= 1 && beam_size <= kMaxBeamSize, kInvalidArgument,
             "beam_size (--beam-size) must be in [1, ", kMaxBeamSize, "], got ", beam_size);
  OASR_CHECK(ctc_weight >= 0.0 && std::isfinite(ctc_weight), kInvalidArgument,
             "ctc_weight (--ctc-weight) must be a finite number >= 0, got ", ctc_weight);
  OASR_CHECK(reverse_weight >= 0.0 && reverse_weight <= 1.0, kInvalidArgument,
             "reverse_weight (--reverse-weight) must be in [0, 1], got ", reverse_weight);
  OASR_CHECK(chunk_size == -1 || chunk_size > 0, kInvalidArgument,
             "chunk_size (--chunk-size) must be -1 (offline) or a positive number of encoder "
             "frames, got ",
             chunk_size);
  OASR_CHECK(left_chunks >= -1, kInvalidArgument,
             "left_chunks (--left-chunks) must be -1 (all) or >= 0, got ", left_chunks);
  OASR_CHECK(std::isfinite(length_penalty), kInvalidArgument,
             "length_penalty (--length-penalty) must be a finite number, got ", length_penalty);
}

std::string DecodeOptions::dump() const {
  std::ostringstream out;
  out << "method=" << decode_method_name(method) << " beam_size=" << beam_size
      << " ctc_weight=" << ctc_weight << " reverse_weight=" << reverse_weight
      << " chunk_size=" << chunk_size << " left_chunks=" << left_chunks;
  if (is_whisper_method(method)) out << " length_penalty=" << length_penalty;
  return out.str();
}

void EngineConfig::validate() const {
  OASR_CHECK(!ckpt_dir.empty(), kInvalidArgument,
             "no checkpoint directory given; pass --ckpt-dir DIR");
  OASR_CHECK(max_batch_size >= 1, kInvalidArgument, "max_batch_size must be >= 1, got ",
             max_batch_size);
  OASR_CHECK(threads >= 0, kInvalidArgument, "threads must be >= 0 (0: the machine's ",
             ops::default_cpu_threads(), " hardware threads), got ", threads);
  const Device d = served_device();
  const DType served = served_dtype();
  if (d.is_cuda()) {
    OASR_CHECK(cuda_available(), kUnsupported, "device '", device,
               "' asked for, but no CUDA GPU is usable here (this build has no CUDA backend, or "
               "no GPU is visible): build with -DOASR_WITH_CUDA=ON on a machine with an NVIDIA "
               "GPU and driver, check CUDA_VISIBLE_DEVICES, or use --device cpu");
    OASR_CHECK(d.index < cuda_device_count(), kInvalidArgument, "device '", device, "': only ",
               cuda_device_count(), " CUDA device(s) are visible");
  } else {
    OASR_CHECK(served == DType::kF32, kUnsupported, "dtype ", dtype_name(served),
               " on the CPU: the CPU bodies serve float32 only; use --dtype float32 (the CPU "
               "default) or --device cuda for float16/bfloat16");
  }
  quantization.validate();
}

Device EngineConfig::served_device() const {
  return parse_device(device);
}

DType EngineConfig::served_dtype() const {
  if (dtype.empty()) return served_device().is_cuda() ? DType::kF16 : DType::kF32;
  const std::optional<DType> parsed = parse_dtype(dtype);
  OASR_CHECK(
      parsed && (*parsed == DType::kF32 || *parsed == DType::kF16 || *parsed == DType::kBF16),
      kInvalidArgument, "dtype '", dtype, "' is not served; use float32, float16 or bfloat16");
  return *parsed;
}

std::string EngineConfig::dump() const {
  std::ostringstream out;
  out << "ckpt_dir=" << ckpt_dir.string() << " device=" << device
      << " dtype=" << (dtype.empty() ? "default" : dtype) << " max_batch_size=" << max_batch_size
      << " threads=" << (threads == 0 ? std::string("default") : std::to_string(threads))
      << " quantization=(" << quantization.dump() << ")";
  return out.str();
}

namespace {

DecodeOptions resolve_decode(const models::DecodeConfig& defaults, const DecodeOverrides& o) {
  DecodeOptions d;
  d.method = parse_decode_method(o.method.value_or(defaults.method));
  OASR_CHECK(!is_whisper_method(d.method), kInvalidArgument, "decode method '",
             decode_method_name(d.method),
             "' is for Whisper checkpoints; this U2++ checkpoint takes ", kU2ppMethods);
  OASR_CHECK(!o.length_penalty, kInvalidArgument,
             "length_penalty (--length-penalty) applies to Whisper beam search; a U2++ "
             "checkpoint does not take it: drop it");
  // A knob the chosen method does not read is refused, not ignored.
  const char* method = decode_method_name(d.method);
  OASR_CHECK(!o.beam_size || d.method != DecodeMethod::kCtcGreedySearch, kInvalidArgument,
             "ctc_greedy_search keeps one hypothesis; drop --beam-size ", o.beam_size.value_or(0),
             " or use --decode-method ctc_prefix_beam_search|attention_rescoring");
  for (const auto& [given, flag] : {std::pair{o.ctc_weight.has_value(), "--ctc-weight"},
                                    std::pair{o.reverse_weight.has_value(), "--reverse-weight"}}) {
    OASR_CHECK(!given || d.method == DecodeMethod::kAttentionRescoring, kInvalidArgument, flag,
               " weighs the attention rescoring; ", method,
               " does not rescore: drop it or use --decode-method attention_rescoring");
  }
  d.beam_size = o.beam_size.value_or(defaults.beam_size);
  d.ctc_weight = o.ctc_weight.value_or(defaults.ctc_weight);
  d.reverse_weight = o.reverse_weight.value_or(defaults.reverse_weight);
  d.chunk_size = o.chunk_size.value_or(defaults.decoding_chunk_size);
  d.left_chunks = o.left_chunks.value_or(defaults.num_decoding_left_chunks);
  d.validate();
  return d;
}

// Whisper: greedy_search (HF's default, num_beams 1) unless told; beam_search
// with 5 beams unless --beam-size says otherwise. The U2++ knobs are refused.
DecodeOptions resolve_whisper_decode(const DecodeOverrides& o) {
  const auto refuse_u2pp_knob = [](bool given, const char* name) {
    OASR_CHECK(!given, kInvalidArgument, name,
               " applies to U2++ checkpoints; a Whisper checkpoint takes --decode-method ",
               "greedy_search|beam_search, --beam-size and --length-penalty");
  };
  refuse_u2pp_knob(o.ctc_weight.has_value(), "ctc_weight (--ctc-weight)");
  refuse_u2pp_knob(o.reverse_weight.has_value(), "reverse_weight (--reverse-weight)");
  refuse_u2pp_knob(o.chunk_size.has_value(), "chunk_size (--chunk-size)");
  refuse_u2pp_knob(o.left_chunks.has_value(), "left_chunks (--left-chunks)");
  DecodeOptions d;
  d.method = parse_decode_method(o.method.value_or("greedy_search"));
  OASR_CHECK(is_whisper_method(d.method), kInvalidArgument, "decode method '",
             decode_method_name(d.method), "' is for U2++ (CTC) checkpoints; this Whisper ",
             "checkpoint takes ", kWhisperMethods);
  if (d.method == DecodeMethod::kGreedySearch) {
    OASR_CHECK(!o.beam_size || *o.beam_size == 1, kInvalidArgument,
               "greedy_search keeps one hypothesis; drop --beam-size ", o.beam_size.value_or(1),
               " or use --decode-method beam_search");
    OASR_CHECK(!o.length_penalty, kInvalidArgument,
               "--length-penalty scores the finished hypotheses of beam_search; greedy_search "
               "has none: drop it or use --decode-method beam_search");
    d.beam_size = 1;
  } else {
    d.beam_size = o.beam_size.value_or(kWhisperDefaultBeams);
  }
  d.length_penalty = o.length_penalty.value_or(1.0);
  d.ctc_weight = 0.0;
  d.reverse_weight = 0.0;
  d.chunk_size = -1;
  d.left_chunks = -1;
  d.validate();
  return d;
}

audio::FbankOptions fbank_options(const models::FbankConfig& f) {
  audio::FbankOptions o;
  o.sample_rate = static_cast<double>(f.sample_rate);
  o.num_mel_bins = static_cast<int>(f.num_mel_bins);
  o.frame_length_ms = f.frame_length_ms;
  o.frame_shift_ms = f.frame_shift_ms;
  o.dither = 0.0;  // inference, as WeNet's recognize
  o.energy_floor = 0.0;
  return o;
}

decode::UnitTable unit_table(const std::vector<std::string>& units) {
  std::vector<std::pair<std::string, int64_t>> entries;
  entries.reserve(units.size());
  for (size_t i = 0; i < units.size(); ++i) entries.emplace_back(units[i], static_cast<int64_t>(i));
  return decode::UnitTable::from_entries(entries);
}

// A model output (CTC log-probs) as a contiguous host float32 tensor, for the
// CPU searches; the tensor itself when it already is one.
Tensor host_f32(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::kF32).contiguous();
}

models::MaterializeOptions materialize_options(const EngineConfig& config) {
  models::MaterializeOptions options;
  options.device = config.served_device();
  options.dtype = config.served_dtype();
  return options;
}

}  // namespace

ASREngine::ASREngine(const EngineConfig& config) : config_(config) {
  // An architecture without a CUDA path is refused by name before the
  // device checks, so the message says what is missing even where no GPU is
  // present. An in-memory source is a U2++ one.
  const models::Architecture& architecture =
      config_.source == nullptr && !config_.ckpt_dir.empty()
          ? models::architecture_for(config_.ckpt_dir)
          : *models::find_architecture(models::kArchitectureName);
  OASR_CHECK(architecture.serves_cuda || config_.served_device().is_cpu(), kUnsupported, "device '",
             config_.device, "': ", config_.ckpt_dir.string(), " is a ", architecture.display_name,
             " model, and the ", architecture.display_name,
             " path is not ported to CUDA yet; use --device cpu");
  // Until the Recognizer interface lands ([W2-R]), the engine still serves
  // these two architectures through its own members.
  const bool whisper = architecture.name == models::kWhisperArchitectureName;
  OASR_CHECK(whisper || architecture.name == models::kArchitectureName, kUnsupported,
             config_.ckpt_dir.string(), " is a ", architecture.display_name,
             " model; ASREngine serves U2++ and Whisper checkpoints only");
  config_.validate();
  if (config_.threads > 0) ops::set_cpu_threads(config_.threads);
  if (whisper) {
    load_whisper();
  } else {
    load_u2pp();
  }
}

void ASREngine::load_whisper() {
  family_ = ModelFamily::kWhisper;
  decode_ = resolve_whisper_decode(config_.decode);
  whisper_ =
      std::make_unique<WhisperRecognizer>(models::load_whisper_dir(config_.ckpt_dir),
                                          config_.quantization, materialize_options(config_));
  quantization_spec_ = whisper_->quantization_spec();
  report_quantization(whisper_->model());
}

void ASREngine::report_quantization(const Module& model) {
  quantization_info_ = quant::quantization_info(model, quantization_spec_);
  log_quantization();
}

void ASREngine::log_quantization() const {
  log::info("quantization: {}", quantization_info_.summary());
  for (const quant::LayerReport& layer : quantization_info_.layers) {
    log::debug("  {} {} lane {} kernel {} input {}", layer.path, layer.scheme, layer.lane,
               layer.kernel, layer.input_quantizer);
  }
}

void ASREngine::require_u2pp(const char* member) const {
  OASR_CHECK(family_ == ModelFamily::kU2pp, kUnsupported, "ASREngine::", member,
             " serves U2++ checkpoints; ", config_.ckpt_dir.string(),
             " is a Whisper model: use transcribe() or transcribe_files()");
}

void ASREngine::load_u2pp() {
  source_ = config_.source ? *config_.source : models::load_checkpoint_dir(config_.ckpt_dir);
  fbank_.emplace(fbank_options(source_.config.fbank));
  units_ = unit_table(source_.units);
  decode_ = resolve_decode(source_.config.decode, config_.decode);
  models::MaterializedU2pp loaded =
      models::materialize_u2pp_model(source_, config_.quantization, materialize_options(config_));
  model_ = std::move(loaded.model);
  quantization_spec_ = std::move(loaded.spec);
  quantization_info_ = quant::quantization_info(*model_, quantization_spec_);
  quant::add_link_report(quantization_info_, *model_,
                         models::u2pp_quantization_layout(source_.config.model));
  log_quantization();
  const EngineConfig& config = config_;
  detokenize_.kind = source_.config.tokenizer.type == models::TokenizerType::kBpe
                         ? decode::TokenizerKind::kBpe
                         : decode::TokenizerKind::kChar;
  detokenize_.connect_symbol = source_.config.tokenizer.connect_symbol;
  OASR_CHECK(decode_.method != DecodeMethod::kAttentionRescoring || decode_.reverse_weight == 0.0 ||
                 model_->has_right_decoder(),
             kInvalidArgument, "reverse_weight ", decode_.reverse_weight,
             " needs a bidirectional decoder, and ", config.ckpt_dir.string(),
             " has a left-to-right one only; use --reverse-weight 0");
}

ASREngine::~ASREngine() = default;

void ASREngine::set_input_observer(quant::InputObserver* observer) {
  require_u2pp("set_input_observer()");
  for (auto& [path, module] : model_->named_modules()) {
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module); layer != nullptr) {
      layer->set_input_observer(observer);
    }
  }
}

const models::ModelSource& ASREngine::source() const {
  require_u2pp("source()");
  return source_;
}

int ASREngine::sample_rate() const {
  if (family_ == ModelFamily::kWhisper) return WhisperRecognizer::kSampleRate;
  return static_cast<int>(source_.config.fbank.sample_rate);
}

const audio::FbankComputer& ASREngine::fbank() const {
  require_u2pp("fbank()");
  return *fbank_;
}

const models::U2ppModel& ASREngine::model() const {
  require_u2pp("model()");
  return *model_;
}

const WhisperRecognizer& ASREngine::whisper() const {
  OASR_CHECK(family_ == ModelFamily::kWhisper, kUnsupported,
             "ASREngine::whisper(): ", config_.ckpt_dir.string(),
             " is a U2++ checkpoint, not a Whisper model");
  return *whisper_;
}

Tensor ASREngine::features(std::span<const float> samples) const {
  require_u2pp("features()");
  Tensor feats = fbank_->compute(samples);
  OASR_CHECK(feats.size(0) > 0, kInvalidArgument, "audio of ", samples.size(),
             " samples is shorter than one ", fbank_->options().frame_length_ms,
             " ms analysis window; nothing to recognise");
  return feats;
}

std::vector<Transcript> ASREngine::transcribe_files(
    const std::vector<std::filesystem::path>& paths) const {
  std::vector<std::vector<float>> utterances;
  utterances.reserve(paths.size());
  for (const auto& path : paths) {
    utterances.push_back(audio::load_audio(path, sample_rate()).samples);
  }
  return transcribe(utterances);
}

std::vector<Transcript> ASREngine::transcribe(
    const std::vector<std::vector<float>>& utterances) const {
  if (family_ == ModelFamily::kWhisper) {
    WhisperDecodeOptions options;
    options.num_beams = decode_.method == DecodeMethod::kBeamSearch ? decode_.beam_size : 1;
    options.length_penalty = decode_.length_penalty;
    options.max_batch_size = config_.max_batch_size;
    std::vector<Transcript> out;
    out.reserve(utterances.size());
    for (WhisperTranscript& t : whisper_->transcribe(utterances, options)) {
      out.push_back(Transcript{std::move(t.text), std::move(t.tokens), t.score});
    }
    return out;
  }
  std::vector<Tensor> feats;
  feats.reserve(utterances.size());
  for (const auto& samples : utterances) feats.push_back(features(samples));
  // Length bucketing: sort by frames so a batch pads little, then restore order.
  std::vector<size_t> order(feats.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return feats[a].size(0) > feats[b].size(0); });
  std::vector<Transcript> results(feats.size());
  const size_t batch = static_cast<size_t>(config_.max_batch_size);
  for (size_t start = 0; start < order.size(); start += batch) {
    const size_t end = std::min(order.size(), start + batch);
    std::vector<Tensor> group;
    for (size_t i = start; i < end; ++i) group.push_back(feats[order[i]]);
    std::vector<Transcript> decoded = transcribe_batch(group);
    for (size_t i = start; i < end; ++i) results[order[i]] = std::move(decoded[i - start]);
  }
  return results;
}

std::vector<Transcript> ASREngine::transcribe_batch(const std::vector<Tensor>& feats) const {
  const int64_t batch = static_cast<int64_t>(feats.size());
  int64_t max_frames = 0;
  for (const Tensor& f : feats) max_frames = std::max(max_frames, f.size(0));
  const int64_t dim = feats.front().size(1);
  Tensor padded = Tensor::zeros({batch, max_frames, dim}, DType::kF32);
  Tensor lengths = Tensor::empty({batch}, DType::kI64);
  for (int64_t b = 0; b < batch; ++b) {
    padded.select(0, b).narrow(0, 0, feats[b].size(0)).copy_(feats[b]);
    lengths.data<int64_t>()[b] = feats[b].size(0);
  }
  models::U2ppEncodeOptions options;
  options.decoding_chunk_size = decode_.chunk_size;
  options.num_decoding_left_chunks = decode_.left_chunks;
  // Chunked decoding runs the streaming computation (forward_chunk_by_chunk),
  // so offline results equal what a StreamingSession returns.
  options.simulate_streaming = decode_.chunk_size > 0;
  const auto encoded = model_->encode(padded, lengths, options);
  // The searches run on the host in float32: one copy back per batch.
  const Tensor log_probs = host_f32(model_->ctc_log_probs(encoded.out));
  std::vector<Transcript> out;
  out.reserve(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t frames = encoded.lengths.data<int64_t>()[b];
    const Tensor row_probs = log_probs.select(0, b).narrow(0, 0, frames).contiguous();
    const Tensor row_enc = encoded.out.narrow(0, b, 1).narrow(1, 0, frames).contiguous();
    out.push_back(decode_utterance(row_probs, row_enc));
  }
  return out;
}

Transcript ASREngine::decode_utterance(const Tensor& ctc_log_probs,
                                       const Tensor& encoder_out) const {
  require_u2pp("decode_utterance()");
  Transcript t;
  const int64_t blank = model_->config().blank_id;
  if (decode_.method == DecodeMethod::kCtcGreedySearch) {
    t.tokens = decode::ctc_greedy_search(ctc_log_probs, blank);
  } else {
    decode::CtcPrefixBeamSearchOptions beam;
    beam.beam_size = decode_.beam_size;
    beam.blank_id = blank;
    const auto nbest = decode::ctc_prefix_beam_search(ctc_log_probs, beam);
    if (decode_.method == DecodeMethod::kCtcPrefixBeamSearch || nbest.empty()) {
      if (!nbest.empty()) {
        t.tokens = nbest.front().tokens;
        t.score = nbest.front().score;
      }
    } else {
      decode::SpecialTokens special =
          decode::SpecialTokens::wenet_default(model_->config().vocab_size);
      special.blank = blank;
      special.sos = model_->config().sos_id();
      special.eos = model_->config().eos_id();
      decode::AttentionRescoringOptions options;
      options.ctc_weight = decode_.ctc_weight;
      options.reverse_weight = decode_.reverse_weight;
      const double reverse_weight = decode_.reverse_weight;
      auto decoder = [&](const decode::AttentionDecoderInputs& in) {
        const auto logp = model_->forward_attention_decoder(encoder_out, in.hyps, in.hyps_lens,
                                                            in.reversed_hyps, reverse_weight);
        return decode::AttentionDecoderOutputs{logp.left, logp.right};
      };
      const auto best = decode::attention_rescoring(nbest, decoder, special, options);
      t.tokens = best.tokens;
      t.score = best.score;
    }
  }
  t.text = detokenize(t.tokens);
  return t;
}

std::string ASREngine::detokenize(std::span<const int64_t> tokens) const {
  if (family_ == ModelFamily::kWhisper) return whisper_->detokenize(tokens);
  return decode::detokenize(units_, tokens, detokenize_);
}

std::unique_ptr<StreamingSession> ASREngine::start_session() const {
  require_u2pp("start_session()");
  OASR_CHECK(decode_.chunk_size > 0, kInvalidArgument,
             "a streaming session needs a chunk size; set --chunk-size N (e.g. 16)");
  return std::make_unique<StreamingSession>(*this);
}

// ---- StreamingSession -----------------------------------------------------------

StreamingSession::StreamingSession(const ASREngine& engine)
    : engine_(engine),
      encoder_(engine.model().encoder(), engine.decode_options().chunk_size,
               engine.decode_options().left_chunks) {}

namespace {
// Concatenates [1, k_i, D] tensors (one dtype and device) along dimension 1.
Tensor concat_frames(const std::vector<Tensor>& chunks, int64_t dim) {
  int64_t total = 0;
  for (const Tensor& c : chunks) total += c.size(1);
  Tensor out = Tensor::empty({1, total, dim}, chunks.front().dtype(), chunks.front().device());
  int64_t at = 0;
  for (const Tensor& c : chunks) {
    out.narrow(1, at, c.size(1)).copy_(c);
    at += c.size(1);
  }
  return out;
}
}  // namespace

Transcript StreamingSession::accept_waveform(std::span<const float> samples) {
  OASR_CHECK(!finished_, kInvalidArgument,
             "this streaming session has finished; start a new one for the next utterance");
  pending_samples_.insert(pending_samples_.end(), samples.begin(), samples.end());
  // Kaldi frames (snip_edges) depend only on their own window, so frames
  // computed from a buffer that starts at a frame boundary are bit-identical
  // to the same frames computed over the whole utterance.
  const audio::FbankComputer& fbank = engine_.fbank();
  const int64_t frames = fbank.num_frames(static_cast<int64_t>(pending_samples_.size()));
  if (frames > 0) {
    const Tensor feats = fbank.compute(pending_samples_);
    const int64_t consumed = frames * fbank.options().window_shift();
    pending_samples_.erase(pending_samples_.begin(), pending_samples_.begin() + consumed);
    append_encoder_frames(encoder_.accept(feats));
  }
  return partial();
}

Transcript StreamingSession::finish() {
  OASR_CHECK(!finished_, kInvalidArgument, "this streaming session has already finished");
  finished_ = true;
  append_encoder_frames(encoder_.finish());
  OASR_CHECK(!encoder_chunks_.empty(), kInvalidArgument,
             "the streaming session received less audio than one analysis window; "
             "nothing to recognise");
  const Tensor encoder_out =
      concat_frames(encoder_chunks_, engine_.model().config().encoder.output_size);
  // CTC over the whole utterance at once, as the offline path computes it.
  const Tensor log_probs =
      host_f32(engine_.model().ctc_log_probs(encoder_out)).select(0, 0).contiguous();
  return engine_.decode_utterance(log_probs, encoder_out);
}

void StreamingSession::append_encoder_frames(const Tensor& frames) {
  if (!frames.defined() || frames.size(1) == 0) return;
  encoder_chunks_.push_back(frames.contiguous());
  ctc_chunks_.push_back(host_f32(engine_.model().ctc_log_probs(frames)));
}

Transcript StreamingSession::partial() const {
  Transcript t;
  if (ctc_chunks_.empty()) return t;
  const int64_t vocab = ctc_chunks_.front().size(2);
  const Tensor log_probs = concat_frames(ctc_chunks_, vocab).select(0, 0).contiguous();
  const int64_t blank = engine_.model().config().blank_id;
  if (engine_.decode_options().method == DecodeMethod::kCtcGreedySearch) {
    t.tokens = decode::ctc_greedy_search(log_probs, blank);
  } else {
    decode::CtcPrefixBeamSearchOptions beam;
    beam.beam_size = engine_.decode_options().beam_size;
    beam.blank_id = blank;
    const auto nbest = decode::ctc_prefix_beam_search(log_probs, beam);
    if (!nbest.empty()) {
      t.tokens = nbest.front().tokens;
      t.score = nbest.front().score;
    }
  }
  t.text = engine_.detokenize(t.tokens);
  return t;
}

}  // namespace oasr::engine
