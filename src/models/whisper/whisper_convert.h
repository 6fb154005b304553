// CTranslate2 (faster-whisper) Whisper directories -> oasr's Whisper
// directory, which is the Hugging Face layout (models/whisper/whisper_dir.h) plus
// oasr_config.json, so transformers loads what this writes.
//
// A CTranslate2 directory holds model.bin (io/ct2_model.h, spec
// "WhisperSpec"), config.json (suppress_ids, suppress_ids_begin, lang_ids,
// alignment_heads) and tokenizer.json. The network's sizes come from the
// tensor shapes and the scalars encoder/num_heads, decoder/num_heads; the
// token ids from the tokenizer's special tokens. CTranslate2 stores
//   self-attention   linear_0 = [q; k; v] fused (k's bias slot is zeros:
//                    HF's k_proj has no bias), linear_1 = out_proj
//   cross-attention  linear_0 = q, linear_1 = [k; v] fused, linear_2 = out_proj
//   layer norms      gamma / beta (HF: weight / bias)
//   ffn              linear_0 = fc1, linear_1 = fc2, layer_norm = final_layer_norm
//   decoder/projection/weight, an alias of decoder/embeddings/weight (HF ties
//                    proj_out to embed_tokens and does not store it)
// and int8 / int16 weights with a "<name>_scale" companion (CTranslate2's
// quantization: q = round(w * scale)), which are dequantized to float32 as
// q / scale.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "models/whisper/whisper_config.h"

namespace oasr::models {

inline constexpr const char* kCt2WhisperSpecName = "WhisperSpec";

// A directory holding a model.bin whose header names the WhisperSpec.
bool is_ct2_whisper_dir(const std::filesystem::path& dir);

struct Ct2WhisperDir {
  WhisperSource source;  // HF names; tensors borrow model.bin where they can
  uint32_t binary_version = 0;
  uint32_t spec_revision = 0;
  size_t variables = 0, aliases = 0;
  std::map<std::string, int64_t> dtype_counts;  // CTranslate2 dtype -> variables of it
};

// Reads and checks everything (every tensor's shape against the sizes, the
// flags a Whisper spec must have, no variable left unexplained) before
// anything is written. Errors name the file, variable or field and what to do.
Ct2WhisperDir read_ct2_whisper_dir(const std::filesystem::path& dir);

struct WhisperWriteOptions {
  // Replace a non-empty destination; only an oasr checkpoint directory (one
  // that holds oasr_config.json) is ever replaced.
  bool force = false;
  // Store floating tensors as this (float32, float16 or bfloat16); unset
  // keeps each tensor's dtype (dequantized ones are float32).
  std::optional<DType> dtype;
  std::string converted_from;  // oasr_config.json's "converted_from"
  // Set by oasr quantize: the weights are its quantized state dict (8-bit
  // weights beside their fp32 scales), oasr_config.json gets format_version 2
  // with this spec and `notes`, and `extra_files` (name, contents) are
  // written beside (quantization_report.json). Such a directory is oasr's:
  // transformers cannot load its 8-bit tensors.
  nlohmann::json quantization;
  std::vector<std::string> notes;
  std::vector<std::pair<std::string, std::string>> extra_files;
};

// Writes `source` in HF layout: config.json, generation_config.json,
// model.safetensors (HF state-dict names, metadata format "pt"), the
// tokenizer files, preprocessor_config.json and oasr_config.json, into a
// sibling DST.tmp-XXXXXXXX that is renamed into place at the end.
void save_whisper_dir(const WhisperSource& source, const std::filesystem::path& destination,
                      const WhisperWriteOptions& options = {});

// oasr_config.json of a Whisper directory.
inline constexpr const char* kWhisperArchitectureName = "whisper";

}  // namespace oasr::models
