// Whisper's configuration as Hugging Face transformers keeps it: the network
// (config.json, WhisperConfig), the generation settings
// (generation_config.json, WhisperGeneration) and the directory they came
// from with its weights and tokenizer files (WhisperSource). The field names
// are HF's, so a reader who knows transformers knows them. Directories are
// read by models/whisper/whisper_dir.h; CTranslate2 models are converted to this
// layout by models/whisper/whisper_convert.h.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"

namespace oasr::models {

// config.json (HF WhisperConfig): the fields that shape the network.
struct WhisperConfig {
  int64_t num_mel_bins = 80, d_model = 384, encoder_layers = 4, encoder_attention_heads = 6,
          decoder_layers = 4, decoder_attention_heads = 6, encoder_ffn_dim = 1536,
          decoder_ffn_dim = 1536, vocab_size = 51864, max_source_positions = 1500,
          max_target_positions = 448;
  std::string activation_function = "gelu";  // the erf GELU; others are refused
  bool scale_embedding = false;              // embeddings * sqrt(d_model) when true

  // Reads an HF config.json document. The eleven sizes above are required
  // (HF would silently use whisper-tiny's for a missing one, which builds a
  // different network than the weights); activation_function and
  // scale_embedding default as HF's. A missing or ill-typed field is
  // kCorruptFile, an unsupported value kUnsupported, each naming the field;
  // `what` names the document in messages.
  static WhisperConfig from_hf_json(const nlohmann::json& config,
                                    const std::string& what = "config.json");
  // Checks the values (positive sizes, heads dividing d_model, the
  // activation); from_hf_json calls it. kInvalidArgument naming `what`.
  void validate(const std::string& what) const;
  int64_t encoder_head_dim() const { return d_model / encoder_attention_heads; }
  int64_t decoder_head_dim() const { return d_model / decoder_attention_heads; }
};

// generation_config.json, completed from config.json and the tokenizer's
// special tokens where an (older) HF generation config lacks a field; see
// models/whisper/whisper_dir.h for the order in which each field is looked up.
struct WhisperGeneration {
  int64_t decoder_start_token_id = 0;  // <|startoftranscript|>
  int64_t eos_token_id = 0;            // <|endoftext|>
  int64_t pad_token_id = 0;
  int64_t no_timestamps_token_id = 0;                              // <|notimestamps|>
  std::optional<int64_t> transcribe_token_id, translate_token_id;  // multilingual only
  std::map<std::string, int64_t> lang_to_id;  // "<|en|>" -> id; empty for .en models
  bool is_multilingual = false;
  std::vector<int64_t> suppress_tokens, begin_suppress_tokens;
  int64_t max_length = 448;
  // (decoder layer, head) pairs whose cross-attention aligns words to time
  // (word timestamps); empty when the checkpoint does not say.
  std::vector<std::pair<int64_t, int64_t>> alignment_heads;
  std::optional<int64_t> bos_token_id;       // HF writes <|endoftext|>; unused by generation
  std::optional<int64_t> prev_sot_token_id;  // <|startofprev|>: starts a text prompt
  // generation_config.json's max_initial_timestamp_index: the latest
  // timestamp index the first generated token may take (with timestamps);
  // unset where the file does not say (HF then sets no limit).
  std::optional<int64_t> max_initial_timestamp_index;

  // The prompt HF's generate() forces without a language or task given:
  // <|startoftranscript|>, then <|transcribe|> when multilingual (the
  // language, detected, goes between them), then <|notimestamps|>.
  // HF's checkpoints write it as forced_decoder_ids [[1, null], [2, task]]
  // (multilingual) or [[1, notimestamps]] (English-only).
  nlohmann::ordered_json forced_decoder_ids_json() const;
  // generation_config.json as HF's own Whisper checkpoints have it.
  nlohmann::ordered_json to_hf_json() const;
};

// config.json for `config` (every field HF's WhisperConfig takes, training
// ones at their inference values), with the token ids of `generation`.
nlohmann::ordered_json whisper_hf_config_json(const WhisperConfig& config,
                                              const WhisperGeneration& generation,
                                              const std::string& torch_dtype);

// A Whisper model directory in HF layout, read (models/whisper/whisper_dir.h).
struct WhisperSource {
  std::filesystem::path dir;
  WhisperConfig config;
  WhisperGeneration generation;
  std::shared_ptr<const TensorSource> weights;  // HF state-dict names
  // tokenizer.json, or (when absent) vocab.json + merges.txt with
  // added_tokens.json (which may be empty: not every HF dir has one).
  std::filesystem::path tokenizer_json;
  std::filesystem::path vocab_json, merges_txt, added_tokens_json;
  std::filesystem::path weights_path;  // model.safetensors / its index / pytorch_model.bin
  // What reading changed or assumed, one line each, for reports.
  std::vector<std::string> notes;
  // oasr_config.json's "quantization" spec (format_version 2: a checkpoint
  // `oasr quantize` wrote, its weights already 8-bit); null when the
  // directory is full precision.
  nlohmann::json quantization;
  std::string converted_from;  // oasr_config.json's, when the directory has one
};

}  // namespace oasr::models
