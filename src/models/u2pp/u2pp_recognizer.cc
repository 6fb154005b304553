#include "models/u2pp/u2pp_recognizer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>

#include "core/cancellation.h"
#include "core/error.h"
#include "core/progress.h"
#include "decode/attention_rescoring.h"
#include "decode/ctc_alignment.h"
#include "models/architecture.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/native_checkpoint.h"
#include "ops/cpu_threads.h"
#include "quantize/apply_links.h"

namespace oasr::engine {

namespace {

constexpr const char* kCtcGreedy = "ctc_greedy_search";
constexpr const char* kCtcPrefixBeam = "ctc_prefix_beam_search";
constexpr const char* kRescoring = "attention_rescoring";
// Endpointed audio from this many seconds on shows a progress bar.
constexpr int64_t kProgressAudioSeconds = 60;

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

// The best CTC hypothesis of `log_probs` [T, V]: greedy for
// ctc_greedy_search, else the prefix beam search's first.
Transcript best_ctc_path(const Tensor& log_probs, const U2ppDecode& options, int64_t blank) {
  Transcript t;
  if (options.method == kCtcGreedy) {
    t.tokens = decode::ctc_greedy_search(log_probs, blank);
    return t;
  }
  decode::CtcPrefixBeamSearchOptions beam;
  beam.beam_size = options.beam_size;
  beam.blank_id = blank;
  const auto nbest = decode::ctc_prefix_beam_search(log_probs, beam);
  if (!nbest.empty()) {
    t.tokens = nbest.front().tokens;
    t.score = nbest.front().score;
  }
  return t;
}

// task(0) .. task(count - 1) on the CPU pool, the lowest row's exception of
// this phase rethrown (a batch runs its phases one after another, so a later
// row's search error now comes before an earlier row's rescoring error; the
// engine then retries the rows alone).
void for_each_row(int64_t count, const std::function<void(int64_t)>& task) {
  ops::parallel_for_rethrowing(count, task);
}

}  // namespace

std::vector<DecodeOptionSpec> u2pp_decode_options() {
  std::vector<DecodeOptionSpec> specs;
  DecodeOptionSpec method;
  method.key = kDecodeMethodKey;
  method.kind = DecodeValueKind::kText;
  method.help =
      "the search: CTC greedy, CTC prefix beam, or the prefix beam's n-best rescored "
      "by the attention decoder";
  method.default_text = "the checkpoint's (attention_rescoring)";
  method.choices = {kCtcGreedy, kCtcPrefixBeam, kRescoring};
  method.aliases = {"decoding_method"};
  specs.push_back(method);
  specs.push_back({.key = "beam_size",
                   .kind = DecodeValueKind::kInteger,
                   .help = "prefix beam size",
                   .default_text = "the checkpoint's (10)",
                   .min = 1,
                   .max = static_cast<double>(kMaxBeamSize)});
  specs.push_back({.key = "ctc_weight",
                   .kind = DecodeValueKind::kNumber,
                   .help = "weight of the CTC score in attention rescoring",
                   .default_text = "the checkpoint's (0)",
                   .min = 0.0});
  specs.push_back({.key = "reverse_weight",
                   .kind = DecodeValueKind::kNumber,
                   .help = "share of the right-to-left decoder in attention rescoring",
                   .default_text = "the checkpoint's (0)",
                   .min = 0.0,
                   .max = 1.0});
  specs.push_back({.key = "chunk_size",
                   .kind = DecodeValueKind::kInteger,
                   .help = "decode chunk by chunk with this many encoder frames per chunk "
                           "(-1: offline)",
                   .default_text = "-1",
                   .min = 1,
                   .special = {-1.0}});
  specs.push_back({.key = "left_chunks",
                   .kind = DecodeValueKind::kInteger,
                   .help = "chunks of history kept in the attention cache (-1: all)",
                   .default_text = "-1",
                   .min = -1});
  specs.push_back({.key = "endpoint",
                   .kind = DecodeValueKind::kBool,
                   .help = "streaming: end a segment at CTC endpoints as WeNet's runtime does "
                           "(5 s of silence, or endpoint_silence after text, or "
                           "max_segment_seconds) and go on from a fresh state, so a stream of "
                           "any length decodes in bounded memory",
                   .default_text = "false"});
  specs.push_back({.key = "endpoint_silence",
                   .kind = DecodeValueKind::kNumber,
                   .help = "with endpoint: seconds of trailing silence after text that end a "
                           "segment",
                   .default_text = "1.0",
                   .min = 0.04,
                   .max = 60.0});
  specs.push_back({.key = "max_segment_seconds",
                   .kind = DecodeValueKind::kNumber,
                   .help = "with endpoint: the longest segment, in seconds",
                   .default_text = "20",
                   .min = 1.0,
                   .max = 3600.0});
  return specs;
}

U2ppDecode U2ppDecode::from(const DecodeOptions& options) {
  U2ppDecode d;
  d.method = options.get<std::string>(kDecodeMethodKey);
  d.beam_size = options.get<int64_t>("beam_size");
  d.ctc_weight = options.get<double>("ctc_weight");
  d.reverse_weight = options.get<double>("reverse_weight");
  d.chunk_size = options.get<int64_t>("chunk_size");
  d.left_chunks = options.get<int64_t>("left_chunks");
  d.endpoint = options.get<bool>("endpoint");
  d.endpoint_silence = options.get<double>("endpoint_silence");
  d.max_segment_seconds = options.get<double>("max_segment_seconds");
  return d;
}

DecodeOptions U2ppDecode::values() const {
  DecodeOptions out;
  out.set(kDecodeMethodKey, method);
  out.set("beam_size", beam_size);
  out.set("ctc_weight", ctc_weight);
  out.set("reverse_weight", reverse_weight);
  out.set("chunk_size", chunk_size);
  out.set("left_chunks", left_chunks);
  out.set("endpoint", endpoint);
  out.set("endpoint_silence", endpoint_silence);
  out.set("max_segment_seconds", max_segment_seconds);
  return out;
}

RecognizerFactory u2pp_recognizer_factory() {
  return [](const EngineConfig& config) { return std::make_unique<U2ppRecognizer>(config); };
}

U2ppRecognizer::U2ppRecognizer(const EngineConfig& config) : ckpt_dir_(config.ckpt_dir) {
  source_ = models::load_checkpoint_dir(config.ckpt_dir);
  if (config.weights) source_.weights = config.weights;
  // The decode flags are refused before the weights are materialized.
  resolve_knobs(config.decode);
  fbank_.emplace(fbank_options(source_.config.fbank));
  units_ = unit_table(source_.units);
  models::MaterializedU2pp loaded =
      models::materialize_u2pp_model(source_, config.quantization, config.materialize_options());
  model_ = std::move(loaded.model);
  spec_ = std::move(loaded.spec);
  detokenize_.kind = source_.config.tokenizer.type == models::TokenizerType::kBpe
                         ? decode::TokenizerKind::kBpe
                         : decode::TokenizerKind::kChar;
  detokenize_.connect_symbol = source_.config.tokenizer.connect_symbol;
}

U2ppRecognizer::~U2ppRecognizer() = default;

int U2ppRecognizer::sample_rate() const {
  return static_cast<int>(source_.config.fbank.sample_rate);
}

Recognizer::AudioLimit U2ppRecognizer::audio_limit(const DecodeOptions& options) const {
  // Segmented at endpoints, positions restart with every segment, and rule 3
  // keeps a segment inside the table (resolve_decode checks it).
  if (U2ppDecode::from(options).endpoint) return {};
  // Offline, every encoder frame has an absolute position in WeNet's table:
  // the longest audio is the one whose fbank frames (Kaldi's snip_edges:
  // one per shift once a window fits) subsample to the table's rows.
  const models::ConformerEncoder& encoder = model_->encoder();
  const int64_t rows = encoder.position_rows();
  const int64_t rate = encoder.subsampling().rate;
  const double shift_ms = source_.config.fbank.frame_shift_ms;
  const double window_ms = source_.config.fbank.frame_length_ms;
  AudioLimit limit;
  limit.seconds =
      (static_cast<double>(encoder.longest_input_frames() - 1) * shift_ms + window_ms) / 1000.0;
  limit.why = "its positional table holds " + std::to_string(rows) + " encoder frames of " +
              std::to_string(rate) + " x " + std::to_string(static_cast<int>(shift_ms)) +
              " ms, WeNet's max_len";
  return limit;
}

DecodeOptions U2ppRecognizer::resolve_decode(const DecodeOverrides& o) const {
  const U2ppDecode d = resolve_knobs(o);
  if (d.endpoint) {
    // Rule 3 is checked after each chunk, so a segment runs up to one chunk
    // past max_segment_seconds; all of it must fit the positional table.
    const AudioLimit table = audio_limit(U2ppDecode{}.values());
    const double chunk_seconds = static_cast<double>(d.chunk_size) * encoder_frame_seconds();
    OASR_CHECK(d.max_segment_seconds + chunk_seconds <= table.seconds, kInvalidArgument,
               "max_segment_seconds (--max-segment-seconds) ", d.max_segment_seconds,
               " s and one chunk of ", chunk_seconds, " s exceed the ", table.seconds,
               " s this model takes at once (", table.why, "); use at most ",
               std::floor(table.seconds - chunk_seconds));
  }
  OASR_CHECK(d.method != kRescoring || d.reverse_weight == 0.0 || model_->has_right_decoder(),
             kInvalidArgument, "reverse_weight ", d.reverse_weight,
             " needs a bidirectional decoder, and ", ckpt_dir_.string(),
             " has a left-to-right one only; use --reverse-weight 0");
  return d.values();
}

U2ppDecode U2ppRecognizer::resolve_knobs(const DecodeOverrides& o) const {
  const models::DecodeConfig& defaults = source_.config.decode;
  U2ppDecode d;
  d.method = o.find<std::string>(kDecodeMethodKey).value_or(defaults.method);
  if (d.method != kCtcGreedy && d.method != kCtcPrefixBeam && d.method != kRescoring) {
    const std::string owners = models::architectures_taking(d.method);
    OASR_THROW(kInvalidArgument, "decode method '", d.method, "' is not a U2++ method",
               owners.empty() ? std::string() : " (" + owners + " checkpoints take it)",
               "; this U2++ checkpoint takes ", kMethods);
  }
  // A knob the chosen method does not read is refused, not ignored.
  OASR_CHECK(!o.has("beam_size") || d.method != kCtcGreedy, kInvalidArgument,
             "ctc_greedy_search keeps one hypothesis; drop --beam-size ",
             o.find<int64_t>("beam_size").value_or(0),
             " or use --decode-method ctc_prefix_beam_search|attention_rescoring");
  for (const auto& [given, flag] : {std::pair{o.has("ctc_weight"), "--ctc-weight"},
                                    std::pair{o.has("reverse_weight"), "--reverse-weight"}}) {
    OASR_CHECK(!given || d.method == kRescoring, kInvalidArgument, flag,
               " weighs the attention rescoring; ", d.method,
               " does not rescore: drop it or use --decode-method attention_rescoring");
  }
  d.beam_size = o.find<int64_t>("beam_size").value_or(defaults.beam_size);
  d.ctc_weight = o.find<double>("ctc_weight").value_or(defaults.ctc_weight);
  d.reverse_weight = o.find<double>("reverse_weight").value_or(defaults.reverse_weight);
  d.chunk_size = o.find<int64_t>("chunk_size").value_or(defaults.decoding_chunk_size);
  d.left_chunks = o.find<int64_t>("left_chunks").value_or(defaults.num_decoding_left_chunks);
  d.endpoint = o.find<bool>("endpoint").value_or(false);
  for (const char* key : {"endpoint_silence", "max_segment_seconds"}) {
    OASR_CHECK(!o.has(key) || d.endpoint, kInvalidArgument, decode_label(key),
               " sets an endpoint rule, and endpointing is off: drop it or turn endpointing on "
               "(endpoint, --endpoint)");
  }
  OASR_CHECK(!d.endpoint || d.chunk_size > 0, kInvalidArgument,
             "endpoint (--endpoint) ends segments between chunks, and chunk_size is -1 "
             "(offline): set --chunk-size N (e.g. 16)");
  d.endpoint_silence = o.find<double>("endpoint_silence").value_or(d.endpoint_silence);
  d.max_segment_seconds = o.find<double>("max_segment_seconds").value_or(d.max_segment_seconds);
  // The checkpoint's defaults are held to the declared ranges too.
  const std::vector<DecodeOptionSpec> specs = u2pp_decode_options();
  const DecodeOptions resolved = d.values();
  for (const auto& [key, value] : resolved.items()) {
    check_decode_value(*find_decode_spec(specs, key), value);
  }
  return d;
}

quant::QuantizationInfo U2ppRecognizer::quantization_info() const {
  quant::QuantizationInfo info = quant::quantization_info(*model_, spec_);
  quant::add_link_report(info, *model_, models::u2pp_quantization_layout(source_.config.model));
  return info;
}

Tensor U2ppRecognizer::features(std::span<const float> samples) const {
  Tensor feats = fbank_->compute(samples);
  OASR_CHECK(feats.size(0) > 0, kInvalidArgument, "audio of ", samples.size(),
             " samples is shorter than one ", fbank_->options().frame_length_ms,
             " ms analysis window; nothing to recognise");
  return feats;
}

std::vector<Transcript> U2ppRecognizer::transcribe(std::span<const Waveform> utterances,
                                                   const DecodeOptions& resolved,
                                                   int64_t max_batch_size) const {
  const U2ppDecode options = U2ppDecode::from(resolved);
  if (options.endpoint) {
    // Segmented at endpoints: each utterance is a stream of its own, fed in
    // pieces of one second (the result does not depend on the pieces), so
    // memory beyond the audio itself stays bounded by a segment.
    std::vector<Transcript> results;
    const size_t piece = static_cast<size_t>(sample_rate());
    int64_t pieces = 0;
    for (const Waveform& utterance : utterances) {
      pieces += static_cast<int64_t>((utterance.size() + piece - 1) / piece);
    }
    // Long audio (an hour takes minutes on the CPU): seconds of audio done,
    // on a terminal (core/progress.h draws nothing elsewhere).
    std::optional<ProgressBar> progress;
    if (pieces >= kProgressAudioSeconds) {
      progress.emplace(pieces, "u2pp");
      progress->set_unit("s");
    }
    for (const Waveform& utterance : utterances) {
      U2ppStreamingSession session(*this, options);
      for (size_t at = 0; at < utterance.size(); at += piece) {
        throw_if_cancelled();
        session.accept_waveform(utterance.subspan(at, std::min(piece, utterance.size() - at)));
        if (progress) progress->advance();
      }
      results.push_back(session.finish());
    }
    if (progress) progress->finish();
    return results;
  }
  // Features of every utterance at once on the CPU pool (a few ms each on
  // one core, the host's largest share of a GPU batch); each utterance's
  // bits do not depend on the thread. The first refused utterance's error
  // is the one a serial loop would raise.
  std::vector<Tensor> feats(utterances.size());
  for_each_row(static_cast<int64_t>(utterances.size()), [&](int64_t i) {
    feats[static_cast<size_t>(i)] = features(utterances[static_cast<size_t>(i)]);
  });
  return transcribe_in_length_buckets(feats, max_batch_size, [&](const std::vector<Tensor>& batch) {
    return transcribe_batch(batch, options);
  });
}

std::vector<Transcript> U2ppRecognizer::transcribe_batch(const std::vector<Tensor>& feats,
                                                         const U2ppDecode& decode) const {
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
  options.decoding_chunk_size = decode.chunk_size;
  options.num_decoding_left_chunks = decode.left_chunks;
  // Chunked decoding runs the streaming computation (forward_chunk_by_chunk),
  // so offline results equal what a streaming session returns.
  options.simulate_streaming = decode.chunk_size > 0;
  const auto encoded = model_->encode(padded, lengths, options);
  // The searches run on the host in float32: one copy back per batch.
  const Tensor log_probs = host_f32(model_->ctc_log_probs(encoded.out));
  // The host searches and the alignments run row-parallel on the CPU pool;
  // attention rescoring (decoder calls on the model's device) row by row.
  std::vector<Tensor> row_probs(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t frames = encoded.lengths.data<int64_t>()[b];
    row_probs[static_cast<size_t>(b)] = log_probs.select(0, b).narrow(0, 0, frames).contiguous();
  }
  std::vector<CtcSearch> searched(static_cast<size_t>(batch));
  for_each_row(batch, [&](int64_t b) {
    searched[static_cast<size_t>(b)] = search_ctc(row_probs[static_cast<size_t>(b)], decode);
  });
  std::vector<Transcript> out(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t frames = row_probs[static_cast<size_t>(b)].size(0);
    const Tensor row_enc = encoded.out.narrow(0, b, 1).narrow(1, 0, frames).contiguous();
    out[static_cast<size_t>(b)] = rescore(searched[static_cast<size_t>(b)], row_enc, decode);
  }
  for_each_row(batch, [&](int64_t b) {
    finish(out[static_cast<size_t>(b)], row_probs[static_cast<size_t>(b)]);
  });
  return out;
}

U2ppRecognizer::CtcSearch U2ppRecognizer::search_ctc(const Tensor& ctc_log_probs,
                                                     const U2ppDecode& decode) const {
  const int64_t blank = model_->config().blank_id;
  CtcSearch searched;
  if (decode.method != kRescoring) {
    searched.best = best_ctc_path(ctc_log_probs, decode, blank);
    return searched;
  }
  decode::CtcPrefixBeamSearchOptions beam;
  beam.beam_size = decode.beam_size;
  beam.blank_id = blank;
  searched.nbest = decode::ctc_prefix_beam_search(ctc_log_probs, beam);
  return searched;
}

Transcript U2ppRecognizer::rescore(const CtcSearch& searched, const Tensor& encoder_out,
                                   const U2ppDecode& decode) const {
  if (decode.method != kRescoring || searched.nbest.empty()) return searched.best;
  decode::SpecialTokens special = decode::SpecialTokens::wenet_default(model_->config().vocab_size);
  special.blank = model_->config().blank_id;
  special.sos = model_->config().sos_id();
  special.eos = model_->config().eos_id();
  decode::AttentionRescoringOptions options;
  options.ctc_weight = decode.ctc_weight;
  options.reverse_weight = decode.reverse_weight;
  const double reverse_weight = decode.reverse_weight;
  auto decoder = [&](const decode::AttentionDecoderInputs& in) {
    const auto logp = model_->forward_attention_decoder(encoder_out, in.hyps, in.hyps_lens,
                                                        in.reversed_hyps, reverse_weight);
    return decode::AttentionDecoderOutputs{logp.left, logp.right};
  };
  const auto best = decode::attention_rescoring(searched.nbest, decoder, special, options);
  Transcript t;
  t.tokens = best.tokens;
  t.score = best.score;
  return t;
}

void U2ppRecognizer::finish(Transcript& t, const Tensor& ctc_log_probs) const {
  t.text = detokenize(t.tokens);
  // Token times from the CTC alignment of the chosen tokens: encoder frame f
  // starts at input frame f * subsampling rate (WeNet's timestamp rule).
  const double seconds_per_frame = encoder_frame_seconds();
  const int64_t blank = model_->config().blank_id;
  for (const decode::TokenSpan& span : decode::ctc_forced_align(ctc_log_probs, t.tokens, blank)) {
    t.token_times.push_back({static_cast<double>(span.start_frame) * seconds_per_frame,
                             static_cast<double>(span.end_frame) * seconds_per_frame});
  }
}

Transcript U2ppRecognizer::decode_utterance(const Tensor& ctc_log_probs, const Tensor& encoder_out,
                                            const U2ppDecode& decode) const {
  Transcript t = rescore(search_ctc(ctc_log_probs, decode), encoder_out, decode);
  finish(t, ctc_log_probs);
  return t;
}

double U2ppRecognizer::encoder_frame_seconds() const {
  return static_cast<double>(model_->encoder().subsampling().rate) *
         fbank_->options().frame_shift_ms / 1000.0;
}

std::string U2ppRecognizer::detokenize(std::span<const int64_t> tokens) const {
  return decode::detokenize(units_, tokens, detokenize_);
}

std::unique_ptr<StreamingSession> U2ppRecognizer::start_session(
    const DecodeOptions& resolved) const {
  const U2ppDecode options = U2ppDecode::from(resolved);
  OASR_CHECK(options.chunk_size > 0, kInvalidArgument,
             "a streaming session needs a chunk size; set --chunk-size N (e.g. 16)");
  return std::make_unique<U2ppStreamingSession>(*this, options);
}

// ---- U2ppStreamingSession ---------------------------------------------------------

U2ppStreamingSession::U2ppStreamingSession(const U2ppRecognizer& recognizer,
                                           const U2ppDecode& options)
    : recognizer_(recognizer),
      options_(options),
      encoder_(recognizer.model().encoder(), options.chunk_size, options.left_chunks) {
  const models::SubsamplingGeometry geometry = recognizer.model().encoder().subsampling();
  window_frames_ = (options.chunk_size - 1) * geometry.rate + geometry.right_context + 1;
  if (options.endpoint) {
    decode::EndpointConfig config;
    config.blank_id = recognizer.model().config().blank_id;
    config.rule2.min_trailing_silence_s = options.endpoint_silence;
    config.rule3.min_segment_s = options.max_segment_seconds;
    endpointer_.emplace(config, recognizer.encoder_frame_seconds());
  }
}

double U2ppStreamingSession::frame_start_seconds(int64_t frame) const {
  return static_cast<double>(frame) * recognizer_.fbank().options().frame_shift_ms / 1000.0;
}

double U2ppStreamingSession::frames_end_seconds(int64_t frame_end) const {
  const audio::FbankOptions& o = recognizer_.fbank().options();
  return (static_cast<double>(frame_end - 1) * o.frame_shift_ms + o.frame_length_ms) / 1000.0;
}

Transcript U2ppStreamingSession::accept_waveform(std::span<const float> samples) {
  OASR_CHECK(!finished_, kInvalidArgument,
             "this streaming session has finished; start a new one for the next utterance");
  pending_samples_.insert(pending_samples_.end(), samples.begin(), samples.end());
  // Kaldi frames (snip_edges) depend only on their own window, so frames
  // computed from a buffer that starts at a frame boundary are bit-identical
  // to the same frames computed over the whole utterance.
  const audio::FbankComputer& fbank = recognizer_.fbank();
  const int64_t frames = fbank.num_frames(static_cast<int64_t>(pending_samples_.size()));
  if (frames > 0) {
    const Tensor feats = fbank.compute(pending_samples_);
    const int64_t consumed = frames * fbank.options().window_shift();
    pending_samples_.erase(pending_samples_.begin(), pending_samples_.begin() + consumed);
    encoder_.append(feats);
    run_windows();
  }
  Transcript t = partial();
  t.segments.assign(segments_.begin() + static_cast<std::ptrdiff_t>(segments_returned_),
                    segments_.end());
  segments_returned_ = segments_.size();
  return t;
}

void U2ppStreamingSession::run_windows() {
  while (true) {
    const int64_t window_start = encoder_.frames_consumed();
    const Tensor out = encoder_.next_window();
    if (!out.defined()) return;
    append_encoder_frames(out);
    // Only a full window can end a segment: the last, shorter ones belong
    // to finish(), which ends the stream's last segment anyway.
    if (endpointer_ && out.size(1) == options_.chunk_size &&
        endpointer_->accept(ctc_chunks_.back().select(0, 0), segment_has_token_)) {
      end_segment(window_start + window_frames_);
    }
  }
}

Transcript U2ppStreamingSession::finish() {
  OASR_CHECK(!finished_, kInvalidArgument, "this streaming session has already finished");
  finished_ = true;
  encoder_.finish_input();
  run_windows();
  if (!endpointer_) {
    OASR_CHECK(!encoder_chunks_.empty(), kInvalidArgument,
               "the streaming session received less audio than one analysis window; "
               "nothing to recognise");
    return decode_open_segment();
  }
  OASR_CHECK(!encoder_chunks_.empty() || !segments_.empty(), kInvalidArgument,
             "the streaming session received less audio than one analysis window; "
             "nothing to recognise");
  if (!encoder_chunks_.empty()) end_segment(-1);
  Transcript whole = std::move(ended_);
  // A segment's text is detokenized on its own (no word boundary token
  // ends it), so texts of a word-spaced tokenizer are joined by a space.
  const std::string separator = recognizer_.words_are_spaced() ? " " : "";
  for (const Segment& segment : segments_) {
    if (segment.text.empty()) continue;
    if (!whole.text.empty()) whole.text += separator;
    whole.text += segment.text;
  }
  whole.segments = std::move(segments_);
  return whole;
}

Transcript U2ppStreamingSession::decode_open_segment() const {
  const Tensor encoder_out =
      concat_frames(encoder_chunks_, recognizer_.model().config().encoder.output_size);
  // CTC over the whole segment at once, as the offline path computes it.
  const Tensor log_probs =
      host_f32(recognizer_.model().ctc_log_probs(encoder_out)).select(0, 0).contiguous();
  return recognizer_.decode_utterance(log_probs, encoder_out, options_);
}

void U2ppStreamingSession::end_segment(int64_t last_frame_end) {
  const Transcript t = decode_open_segment();
  Segment segment;
  segment.start = frame_start_seconds(segment_first_frame_);
  // The stream's last segment ends where its audio does (pending samples
  // shorter than a frame are not part of any frame).
  segment.end = last_frame_end >= 0
                    ? frames_end_seconds(last_frame_end)
                    : frames_end_seconds(encoder_.frames_consumed() + encoder_.frames_buffered());
  segment.text = t.text;
  segment.tokens = t.tokens;
  ended_.tokens.insert(ended_.tokens.end(), t.tokens.begin(), t.tokens.end());
  for (const TokenTime& time : t.token_times) {
    ended_.token_times.push_back({time.start + segment.start, time.end + segment.start});
  }
  ended_.score += t.score;
  segments_.push_back(std::move(segment));
  encoder_chunks_.clear();
  ctc_chunks_.clear();
  segment_has_token_ = false;
  segment_first_frame_ = encoder_.restart_segment();
  endpointer_->reset();
}

void U2ppStreamingSession::append_encoder_frames(const Tensor& frames) {
  if (!frames.defined() || frames.size(1) == 0) return;
  encoder_chunks_.push_back(frames.contiguous());
  ctc_chunks_.push_back(host_f32(recognizer_.model().ctc_log_probs(frames)));
  if (!segment_has_token_) {
    // Whether the greedy path holds a token: some frame's best label is not
    // the blank (the endpoint rules' "decoded something").
    const Tensor& probs = ctc_chunks_.back();
    const int64_t vocab = probs.size(2);
    const int64_t blank = recognizer_.model().config().blank_id;
    const float* data = probs.data<float>();
    for (int64_t f = 0; f < probs.size(1) && !segment_has_token_; ++f) {
      const float* row = data + f * vocab;
      segment_has_token_ = std::max_element(row, row + vocab) - row != blank;
    }
  }
}

Transcript U2ppStreamingSession::partial() const {
  if (ctc_chunks_.empty()) return {};
  const int64_t vocab = ctc_chunks_.front().size(2);
  const Tensor log_probs = concat_frames(ctc_chunks_, vocab).select(0, 0).contiguous();
  Transcript t = best_ctc_path(log_probs, options_, recognizer_.model().config().blank_id);
  t.text = recognizer_.detokenize(t.tokens);
  return t;
}

}  // namespace oasr::engine
