// ASREngine: audio in, text out, for one checkpoint directory (native oasr,
// a WeNet experiment, or a Whisper model in Hugging Face layout). It owns the model, the frontend
// and the decoding options; the CLI, the server and the bindings all fill an EngineConfig and call
// it, so every surface behaves the same.
//
//   EngineConfig config;
//   config.ckpt_dir = "exp/u2pp";
//   config.decode.method = "ctc_prefix_beam_search";
//   ASREngine engine(config);
//   auto results = engine.transcribe_files({"a.wav", "b.flac"});
//
// Offline utterances are batched by length (max_batch_size rows a batch,
// padded, masked); an utterance gives the same transcript alone or in any
// batch. With decode.chunk_size > 0 each utterance is encoded chunk by chunk
// with attention and CNN caches (WeNet's simulate-streaming forward), which
// is exactly what a StreamingSession computes from audio given in pieces.
//
// A Whisper directory (models::is_whisper_dir) is served by a
// WhisperRecognizer (engine/whisper_recognizer.h): 16 kHz audio, log-mel in
// 30 s windows, greedy_search or beam_search as Hugging Face's generate().
// The U2++-only members (features, decode_utterance, fbank, model, source,
// start_session) refuse on a Whisper engine with kUnsupported.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "audio/fbank.h"
#include "decode/ctc_search.h"
#include "decode/units.h"
#include "models/model_source.h"
#include "models/u2pp_model.h"
#include "models/u2pp_streaming.h"
#include "quant/calibration/input_observer.h"
#include "quant/report.h"
#include "quant/spec.h"

namespace oasr::engine {

class WhisperRecognizer;

// U2++: the three CTC-based methods. Whisper: greedy_search, beam_search.
enum class DecodeMethod {
  kCtcGreedySearch,
  kCtcPrefixBeamSearch,
  kAttentionRescoring,
  kGreedySearch,
  kBeamSearch
};
const char* decode_method_name(DecodeMethod method);
DecodeMethod parse_decode_method(const std::string& name);  // kInvalidArgument lists choices
bool is_whisper_method(DecodeMethod method);                // greedy_search, beam_search

enum class ModelFamily { kU2pp, kWhisper };
const char* model_family_name(ModelFamily family);  // "U2++", "Whisper"

// Each field left unset takes the checkpoint's default (its decode config).
struct DecodeOverrides {
  std::optional<std::string> method;
  std::optional<int64_t> beam_size;
  std::optional<double> ctc_weight;
  std::optional<double> reverse_weight;
  std::optional<int64_t> chunk_size;     // decoding_chunk_size; -1 = offline
  std::optional<int64_t> left_chunks;    // num_decoding_left_chunks; -1 = all
  std::optional<double> length_penalty;  // Whisper beam search
};

struct DecodeOptions {
  DecodeMethod method = DecodeMethod::kAttentionRescoring;
  int64_t beam_size = 10;
  double ctc_weight = 0.0;
  double reverse_weight = 0.0;
  int64_t chunk_size = -1;
  int64_t left_chunks = -1;
  // Whisper beam search: finished hypotheses score sum_logprobs /
  // generated_len ^ length_penalty (HF's BeamSearchScorer).
  double length_penalty = 1.0;

  void validate() const;  // kInvalidArgument naming the field and the accepted range
  std::string dump() const;
};

struct EngineConfig {
  std::filesystem::path ckpt_dir;
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  // The served dtype: "float32", "float16" or "bfloat16"; empty takes the
  // device's default (float32 on the CPU, float16 on CUDA). The CPU serves
  // float32 only.
  std::string dtype;
  int64_t max_batch_size = 8;
  // CPU threads for every op (oasr's worker pool and OpenBLAS together,
  // ops/cpu_threads.h); 0 keeps the process's setting (default: the
  // machine's hardware threads). Process-wide: the last engine built wins.
  int threads = 0;
  DecodeOverrides decode;
  // Online quantization of a full-precision checkpoint ("int8_w8a8", or
  // {scheme, ignore, module_types, kv_cache}); a quantized checkpoint is
  // served quantized without it (its spec is authoritative).
  quant::QuantizationConfig quantization;
  // Set: serve this in-memory U2++ source (config, assets and weights)
  // instead of reading ckpt_dir, which then only names it in messages.
  // oasr quantize's second calibration pass decodes its smoothed master so.
  std::shared_ptr<const models::ModelSource> source;

  // Refuses (kUnsupported, saying what to do): cuda in a build without CUDA
  // or on a machine without a GPU, a 16-bit dtype on the CPU.
  void validate() const;
  std::string dump() const;
  Device served_device() const;  // parsed device
  DType served_dtype() const;    // dtype, or the device's default when empty
};

struct Transcript {
  std::string text;
  std::vector<int64_t> tokens;
  double score = 0.0;  // the chosen hypothesis' score under the decode method
};

class StreamingSession;

class ASREngine {
 public:
  explicit ASREngine(const EngineConfig& config);
  ~ASREngine();

  const DecodeOptions& decode_options() const { return decode_; }
  ModelFamily family() const { return family_; }
  bool is_whisper() const { return family_ == ModelFamily::kWhisper; }
  const models::ModelSource& source() const;  // U2++ only
  // The rate transcribe() expects: the checkpoint's fbank rate, 16000 for Whisper.
  int sample_rate() const;

  // Decodes each file (resampled to the model's rate); results in input order.
  std::vector<Transcript> transcribe_files(const std::vector<std::filesystem::path>& paths) const;
  // Mono samples in [-1, 1) at sample_rate().
  std::vector<Transcript> transcribe(const std::vector<std::vector<float>>& utterances) const;

  // fbank [T, F] of mono samples at sample_rate() (before CMVN).
  Tensor features(std::span<const float> samples) const;
  // Decodes CTC log-probs [T', V] of one utterance (and its encoder output
  // [1, T', D] for attention rescoring) with the engine's method.
  Transcript decode_utterance(const Tensor& ctc_log_probs, const Tensor& encoder_out) const;

  // Token ids -> text: the unit table (U2++) or the byte-level BPE tokenizer
  // without special tokens (Whisper).
  std::string detokenize(std::span<const int64_t> tokens) const;
  const audio::FbankComputer& fbank() const;  // U2++ only

  // A streaming session (needs decode chunk_size > 0).
  std::unique_ptr<StreamingSession> start_session() const;

  const models::U2ppModel& model() const;  // U2++ only
  // Calibration (oasr quantize): attaches `observer` to every quantizable
  // layer of the U2++ model, so each later forward hands it the layer's
  // input; nullptr detaches. U2++ only.
  void set_input_observer(quant::InputObserver* observer);
  const WhisperRecognizer& whisper() const;  // Whisper only

  // What is served: schemes, quantized layer count, KV-cache format, and per
  // layer its scheme, kernel lane and input quantizer; skipped layers.
  const quant::QuantizationInfo& quantization_info() const { return quantization_info_; }
  const quant::QuantizationSpec& quantization_spec() const { return quantization_spec_; }

 private:
  void load_u2pp();
  void load_whisper();
  void report_quantization(const Module& model);
  void log_quantization() const;
  // Refuses (kUnsupported) a U2++-only member on a Whisper engine.
  void require_u2pp(const char* member) const;
  std::vector<Transcript> transcribe_batch(const std::vector<Tensor>& feats) const;

  EngineConfig config_;
  ModelFamily family_ = ModelFamily::kU2pp;
  models::ModelSource source_;
  std::unique_ptr<models::U2ppModel> model_;
  std::unique_ptr<WhisperRecognizer> whisper_;
  quant::QuantizationSpec quantization_spec_;
  quant::QuantizationInfo quantization_info_;
  std::optional<audio::FbankComputer> fbank_;
  decode::UnitTable units_;
  decode::DetokenizeOptions detokenize_;
  DecodeOptions decode_;
};

// Audio in pieces -> partial results, then the final one. Partial results
// are the CTC prefix beam search (greedy for ctc_greedy_search) over the
// encoder frames so far; finish() applies the engine's decode method to the
// whole utterance, giving exactly what transcribe() gives with the same
// chunk_size.
class StreamingSession {
 public:
  explicit StreamingSession(const ASREngine& engine);

  // Mono samples at the engine's sample rate, any piece size. Returns the
  // partial transcript after the newly computable chunks.
  Transcript accept_waveform(std::span<const float> samples);
  Transcript finish();  // refuses further input afterwards
  bool finished() const { return finished_; }

 private:
  void append_encoder_frames(const Tensor& frames);
  Transcript partial() const;

  const ASREngine& engine_;
  models::U2ppStreamingEncoder encoder_;
  // Samples from the start of the next fbank frame on.
  std::vector<float> pending_samples_;
  std::vector<Tensor> encoder_chunks_;  // [1, k, D] each
  std::vector<Tensor> ctc_chunks_;      // [1, k, V] each, for partial results
  bool finished_ = false;
};

}  // namespace oasr::engine
