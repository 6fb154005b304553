// What a front end (the CLI, the server, the Python package) fills to build
// an ASREngine: the checkpoint, the device and dtype, batching, decode
// overrides and quantization. engine/engine_options.h parses it from
// key=value pairs or JSON, so every front end takes the same names and gives
// the same messages.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "layers/module.h"
#include "models/materialize_options.h"
#include "quant/spec.h"

namespace oasr::engine {

// What a request asks of decoding; each field left unset takes the engine's
// default (the checkpoint's decode config, then the architecture's). Which
// methods and knobs apply is the architecture's to say: its recognizer
// refuses a knob its method does not read, by name.
struct DecodeOverrides {
  std::optional<std::string> method;
  std::optional<int64_t> beam_size;
  std::optional<double> ctc_weight;
  std::optional<double> reverse_weight;
  std::optional<int64_t> chunk_size;     // decoding_chunk_size; -1 = offline
  std::optional<int64_t> left_chunks;    // num_decoding_left_chunks; -1 = all
  std::optional<double> length_penalty;  // beam search over an autoregressive decoder
  std::optional<bool> timestamps;        // Whisper: timestamp tokens and segments
  // Whisper audio over 30 s: "sequential" (seek on the last timestamp) or
  // "windows" (independent 30 s windows).
  std::optional<std::string> long_form;
  // Whisper temperature fallback (openai-whisper's transcribe()): the
  // temperatures tried in order and the thresholds that reject a decode.
  std::optional<std::vector<double>> temperatures;
  std::optional<double> compression_ratio_threshold;
  std::optional<double> logprob_threshold;
  std::optional<double> no_speech_threshold;

  bool empty() const;
  bool operator==(const DecodeOverrides&) const = default;
  // Each field `over` sets replaces this one's.
  DecodeOverrides overlaid(const DecodeOverrides& over) const;
};

// The resolved decode settings of one request. `method` is one of the
// architecture's method names (U2++: ctc_greedy_search,
// ctc_prefix_beam_search, attention_rescoring; Whisper: greedy_search,
// beam_search).
struct DecodeOptions {
  std::string method;
  int64_t beam_size = 10;
  double ctc_weight = 0.0;
  double reverse_weight = 0.0;
  int64_t chunk_size = -1;
  int64_t left_chunks = -1;
  // Beam search over an autoregressive decoder: finished hypotheses score
  // sum_logprobs / generated_len ^ length_penalty (HF's BeamSearchScorer).
  double length_penalty = 1.0;
  // Whisper: decode with timestamp tokens (segments with start / end times)
  // instead of <|notimestamps|>.
  bool timestamps = false;
  // Whisper: how audio over 30 s is decoded ("sequential" or "windows").
  std::string long_form = "sequential";
  // Whisper: {0} decodes once; more values fall back to the next one while
  // a threshold rejects the decode (decode/whisper_long_form.h).
  std::vector<double> temperatures = {0.0};
  std::optional<double> compression_ratio_threshold;
  std::optional<double> logprob_threshold;
  std::optional<double> no_speech_threshold;

  // kInvalidArgument naming the field and the accepted range.
  void validate() const;
  std::string dump() const;
};

// An upper bound on beams so a typo cannot run for minutes: CTC prefix beam
// search costs O(beam^2) per frame and an autoregressive beam search one
// decoder row per beam per step. The checkpoint defaults are 10 (U2++) and
// 5 (Whisper).
inline constexpr int64_t kMaxBeamSize = 128;

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
  DecodeOverrides decode;  // the engine's defaults; a request may override them
  // Online quantization of a full-precision checkpoint ("int8_w8a8", or
  // {scheme, ignore, module_types, kv_cache}); a quantized checkpoint is
  // served quantized without it (its spec is authoritative).
  quant::QuantizationConfig quantization;
  // Set: serve these tensors (the checkpoint's state-dict names) in place of
  // ckpt_dir's weights file; config, vocabulary and the rest still come from
  // ckpt_dir. oasr quantize's calibration decodes its smoothed master so.
  std::shared_ptr<const TensorSource> weights;

  // Refuses (kUnsupported, saying what to do): cuda in a build without CUDA
  // or on a machine without a GPU, a 16-bit dtype on the CPU.
  void validate() const;
  std::string dump() const;
  Device served_device() const;  // parsed device
  DType served_dtype() const;    // dtype, or the device's default when empty
  // What every architecture's materialize() is given for this config.
  models::MaterializeOptions materialize_options() const;
};

}  // namespace oasr::engine
