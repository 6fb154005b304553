// A Qwen2-Audio model directory as Hugging Face's save_pretrained writes it
// for Qwen2AudioForConditionalGeneration and its processor, read as it is:
//   config.json               model_type "qwen2_audio" (qwen2_audio_config.h)
//   weights                   model.safetensors, or model-*-of-*.safetensors
//                             with model.safetensors.index.json
//   generation_config.json    optional: eos_token_id (one id or a list),
//                             pad_token_id, max_new_tokens
//   tokenizer.json            Qwen2's byte-level BPE (decode/byte_bpe_tokenizer.h)
//   preprocessor_config.json  WhisperFeatureExtractor: feature_size must be
//                             the tower's num_mel_bins, and the 16 kHz, 400-point,
//                             160-hop, 30 s framing oasr's log-mel computes
// The end-of-sequence ids come from generation_config.json, else
// text_config's eos_token_id, else the tokenizer's <|endoftext|>; each must
// lie inside the vocabulary. A missing or contradictory file is refused
// naming it and what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "models/qwen2_audio/qwen2_audio_config.h"

namespace oasr::models {

struct Qwen2AudioGeneration {
  std::vector<int64_t> eos_token_ids;
  int64_t max_new_tokens = 256;  // generation_config.json's, else this
};

struct Qwen2AudioSource {
  std::filesystem::path dir;
  Qwen2AudioConfig config;
  Qwen2AudioGeneration generation;
  std::shared_ptr<const TensorSource> weights;
  std::filesystem::path weights_path;  // model.safetensors or the index
  std::filesystem::path tokenizer_path;
};

// Why `dir` is not a Qwen2-Audio directory, in words; empty when it is one.
// Must not throw.
std::string qwen2_audio_dir_rejection(const std::filesystem::path& dir);
bool is_qwen2_audio_dir(const std::filesystem::path& dir);

// Reads and checks everything but the weights' values (opened, mapped lazily).
Qwen2AudioSource load_qwen2_audio_dir(const std::filesystem::path& dir);

}  // namespace oasr::models
