// What a WeNet train.yaml says, as typed structs: the network (U2ppConfig,
// u2pp_config.h, which the model is built from), the features, the
// tokenizer and the decoding defaults, with WeNet's own defaults for the keys
// a train.yaml leaves out. A native checkpoint's oasr_config.json stores the
// same struct (native_checkpoint.h), so model code reads one config whatever
// the checkpoint format.
//
// parse_wenet_train_yaml accepts the keys of WeNet 2.x and 3.x train.yaml
// files. A value oasr does not implement is refused by name (kUnsupported)
// rather than ignored; keys that only matter for training (dropout,
// optimizer, augmentation) are ignored; an unknown key inside encoder_conf /
// decoder_conf is refused, because it may change the network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "models/u2pp/u2pp_config.h"

namespace oasr::models {

enum class TokenizerType { kChar, kBpe };
const char* tokenizer_type_name(TokenizerType type);  // "char", "bpe"
// kUnsupported naming `what`, the value and the accepted ones.
TokenizerType parse_tokenizer_type(const std::string& name, const std::string& what);

// WeNet's activation_type spelling: swish, relu, gelu (torch.nn.GELU, erf).
Activation parse_wenet_activation(const std::string& name, const std::string& what);
const char* wenet_activation_name(Activation activation);  // kInternal for others

// Kaldi fbank as WeNet's compute_fbank calls it (the defaults are its own).
struct FbankConfig {
  int64_t sample_rate = 16000;  // dataset_conf.resample_conf.resample_rate
  int64_t num_mel_bins = 23;
  double frame_length_ms = 25.0;
  double frame_shift_ms = 10.0;
  // The training-time dither; inference uses 0, as WeNet's recognize does.
  double dither = 0.0;
};

struct TokenizerConfig {
  TokenizerType type = TokenizerType::kChar;
  bool split_with_space = false;
  std::string connect_symbol;  // joins char tokens when detokenizing
};

// oasr's decoding defaults (those of WeNet's wenet/bin/recognize.py); the
// CLI and EngineConfig override them.
struct DecodeConfig {
  std::string method = "attention_rescoring";
  int64_t beam_size = 10;
  double ctc_weight = 0.0;
  double reverse_weight = 0.0;
  int64_t decoding_chunk_size = -1;  // -1: full context (offline)
  int64_t num_decoding_left_chunks = -1;
};

struct WenetConfig {
  // The network: input_dim, vocab_size (output_dim), special ids, encoder
  // and decoder. model.encoder.global_cmvn says whether CMVN applies.
  U2ppConfig model;
  double ctc_weight = 0.5;      // model_conf: the training loss mix (informative)
  double reverse_weight = 0.0;  // model_conf
  FbankConfig fbank;
  TokenizerConfig tokenizer;
  DecodeConfig decode;
};

// U2ppConfig::validate plus what ties the sections together (input_dim ==
// num_mel_bins, positive frame sizes); errors name `what` (the file).
void validate(const WenetConfig& config, const std::string& what);

// Files train.yaml names, as written there (empty when it names none).
struct WenetRecordedPaths {
  std::string cmvn_file;
  // Informative only: load_cmvn_stats tells JSON from Kaldi text by content.
  bool is_json_cmvn = true;
  std::string symbol_table;
  std::string bpe_model;
};

struct WenetTrainYaml {
  WenetConfig config;
  WenetRecordedPaths paths;
  // The `tokenizer:` key; absent in WeNet 2.x files, where the directory
  // decides (a sentencepiece model beside the checkpoint means bpe).
  std::optional<TokenizerType> tokenizer;
};

// Parses train.yaml text; `source` names it in errors. Malformed YAML or a
// wrongly typed value is kCorruptFile; an unsupported choice kUnsupported.
// model.encoder.global_cmvn is set when train.yaml names a CMVN file.
WenetTrainYaml parse_wenet_train_yaml(const std::string& text, const std::string& source);
WenetTrainYaml load_wenet_train_yaml(const std::filesystem::path& path);

}  // namespace oasr::models
