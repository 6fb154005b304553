// A Whisper model directory in Hugging Face layout (what
// WhisperForConditionalGeneration.save_pretrained writes, and what `oasr
// convert --from ct2` writes, plus its oasr_config.json):
//   config.json                 HF WhisperConfig, model_type "whisper" (required)
//   generation_config.json      optional; completed as below
//   weights, the first found:   model.safetensors, model.safetensors.index.json
//                               (shards), pytorch_model.bin (torch.save zip),
//                               pytorch_model.bin.index.json (shards)
//   tokenizer, the first found: tokenizer.json, or vocab.json + merges.txt
//                               (+ added_tokens.json when present)
//
// WhisperGeneration fields are taken from generation_config.json, falling
// back (for older HF exports, which keep some in config.json or leave them
// to the tokenizer) as listed; a field that cannot be resolved is an error
// naming the field, the files looked at and what to add:
//   decoder_start_token_id   gen, config.json, tokenizer <|startoftranscript|>
//   eos_token_id             gen, config.json, tokenizer <|endoftext|>
//   pad_token_id             gen, config.json, eos_token_id
//   bos_token_id             gen, config.json (optional)
//   no_timestamps_token_id   gen, tokenizer <|notimestamps|>
//   is_multilingual          gen, else vocab_size >= 51865 (OpenAI's rule)
//   lang_to_id               multilingual only: gen, else the tokenizer's special
//                            tokens between <|startoftranscript|> and <|translate|>
//   transcribe/translate id  multilingual only: gen task_to_id, tokenizer
//   suppress_tokens          gen, config.json, else none (noted)
//   begin_suppress_tokens    gen, config.json, else [220 (" "), eos] (noted)
//   max_length               gen, config.json, max_target_positions
//   alignment_heads          gen, else none
//   prev_sot_token_id        gen, tokenizer <|startofprev|> (optional)
// Every token id must lie inside the vocabulary.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/whisper/whisper_config.h"

namespace oasr::models {

// A directory whose config.json says model_type "whisper".
bool is_whisper_dir(const std::filesystem::path& dir);
// Why is_whisper_dir() turns `dir` down, in words ("" when it does not).
std::string whisper_dir_rejection(const std::filesystem::path& dir);

// The tokenizer's special tokens ("<|...|>" spelled entries of the
// vocabulary and the added tokens) and their ids. Reads tokenizer_json when
// set, else vocab_json + added_tokens_json (+ tokenizer_config.json's
// added_tokens_decoder beside them).
std::map<std::string, int64_t> read_whisper_special_tokens(const WhisperSource& tokenizer_files);

// The lookup described above. `generation` may be null (no
// generation_config.json); `dir_label` names the directory in messages;
// lines saying what was assumed are appended to `notes`.
WhisperGeneration resolve_whisper_generation(const nlohmann::json* generation,
                                             const nlohmann::json& config,
                                             const std::map<std::string, int64_t>& special_tokens,
                                             const WhisperConfig& network,
                                             const std::string& dir_label,
                                             std::vector<std::string>& notes);

// Reads config, generation settings and tokenizer locations, and opens the
// weights (names and shapes are checked later, by Module::load_state_dict).
// A proj_out.weight equal to model.decoder.embed_tokens.weight (torch.save
// files keep the tied copy) is hidden from `weights`; a different one is
// refused. Names saved from a bare WhisperModel ("encoder.…") get HF's
// "model." prefix. Errors name the file and field and say what to do.
WhisperSource load_whisper_dir(const std::filesystem::path& dir);

}  // namespace oasr::models
