// oasr's native checkpoint directory, format_version 1 (full precision;
// DESIGN.md §4), and the one entry point that loads any checkpoint directory.
//
//   DIR/oasr_config.json    what the model is (below)
//   DIR/model.safetensors   every state-dict tensor under WeNet's names, in
//                           the source's order and dtypes, CMVN included as
//                           encoder.global_cmvn.mean / .istd (float32 [D])
//   DIR/units.txt           "<token> <id>" per line, ids 0 .. vocab_size-1
//   DIR/bpe.model           the sentencepiece model (bpe tokenizer only)
//
// oasr_config.json (every key is written; on reading, "model", "features"
// and "tokenizer" keys are required and unknown keys anywhere but "source"
// are refused, since they would mean a writer newer than this reader):
//   {
//     "format_version": 1,
//     "architecture": "u2pp_conformer",
//     "model": {
//       "input_dim": 80, "vocab_size": 4233, "blank_id": 0, "sos_id": 4232, "eos_id": 4232,
//       "ctc_weight": 0.3, "reverse_weight": 0.3,
//       "encoder": {"type": "conformer", "output_size": 256, "attention_heads": 4,
//                   "linear_units": 2048, "num_blocks": 12, "input_layer": "conv2d",
//                   "pos_enc_layer_type": "rel_pos", "selfattention_layer_type": "rel_selfattn",
//                   "normalize_before": true, "macaron_style": true, "use_cnn_module": true,
//                   "cnn_module_kernel": 8, "cnn_module_norm": "layer_norm", "causal": true,
//                   "activation_type": "swish", "static_chunk_size": 0,
//                   "use_dynamic_chunk": true, "query_bias": true, "key_bias": true,
//                   "value_bias": true, "conv_bias": true, "mlp_bias": true,
//                   "final_norm": true, "norm_eps": 1e-05, "conv_norm_eps": 1e-05},
//       "decoder": {"type": "bitransformer", "attention_heads": 4, "linear_units": 2048,
//                   "num_blocks": 3, "r_num_blocks": 3, "normalize_before": true,
//                   "activation_type": "relu", "norm_eps": 1e-05}
//     },
//     "features": {"type": "fbank", "sample_rate": 16000, "num_mel_bins": 80,
//                  "frame_length_ms": 25.0, "frame_shift_ms": 10.0,
//                  "dither": 1.0,            // training-time; inference uses 0
//                  "cmvn": "tensors"},       // or "none": no global CMVN
//     "tokenizer": {"type": "char", "units": "units.txt", "split_with_space": false,
//                   "connect_symbol": ""},   // bpe adds "bpe_model": "bpe.model"
//     "decode": {"method": "attention_rescoring", "beam_size": 10, "ctc_weight": 0.0,
//                "reverse_weight": 0.0, "decoding_chunk_size": -1,
//                "num_decoding_left_chunks": -1},   // optional; defaults as shown
//     "source": {"format": "wenet", "checkpoint": "final.pt", "notes": []}  // informative
//   }
// The "model" keys are WeNet's train.yaml names (U2ppConfig's fields), so a
// reader who knows WeNet knows them; floats are written as their shortest
// decimal (1e-05, not 9.99999974e-06). format_version 2 (quantized, DESIGN.md §4) adds
// "quantization": the quant::QuantizationSpec JSON (schemes, layers,
// kv_cache, producer), kept in ModelSource::quantization; a source with one
// is written as version 2, one without as version 1.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/native_dir.h"
#include "models/u2pp/model_source.h"

namespace oasr::models {

inline constexpr const char* kNativeWeightsName = "model.safetensors";
inline constexpr const char* kNativeUnitsName = "units.txt";
inline constexpr const char* kNativeBpeModelName = "bpe.model";
inline constexpr const char* kU2ppArchitectureName = "u2pp_conformer";

// The config document for `source` (the layout above).
nlohmann::ordered_json native_config_json(const ModelSource& source);
// Reads the "model", "features", "tokenizer" and "decode" sections back;
// `what` names the document in errors (kCorruptFile / kUnsupported).
WenetConfig parse_native_config(const nlohmann::json& document, const std::string& what);

struct NativeWriteOptions {
  // Replace a non-empty destination; only one that is an oasr checkpoint
  // directory (it holds oasr_config.json) is ever replaced.
  bool force = false;
  // Store the model's floating-point weights in this dtype (float32, float16
  // or bfloat16; unset keeps each tensor's own). The global CMVN statistics
  // always stay float32: they are few and feed every frame.
  std::optional<DType> weight_dtype{};
  // More files written into the directory before it is renamed into place
  // (file name, contents), e.g. oasr quantize's quantization_report.json.
  std::vector<std::pair<std::string, std::string>> extra_files{};
};

// Writes `source` as a native directory at `destination`, atomically: every
// file goes into a sibling DIR.tmp-XXXXXX that is renamed into place, so a
// failure leaves no half-written checkpoint and the old one intact.
void save_native_checkpoint(const ModelSource& source, const std::filesystem::path& destination,
                            const NativeWriteOptions& options = {});

ModelSource load_native_dir(const std::filesystem::path& dir);

// The one entry point: a native directory (oasr_config.json), a WeNet
// experiment directory (train.yaml + *.pt), or a .pt file inside one.
ModelSource load_checkpoint_dir(const std::filesystem::path& path);

}  // namespace oasr::models
