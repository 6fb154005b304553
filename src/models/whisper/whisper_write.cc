// Writing a Whisper directory in HF layout (save_whisper_dir, declared in
// models/whisper/whisper_convert.h), atomically: a sibling staging directory that is
// renamed into place once every file is written and synced.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "io/json_file.h"
#include "io/posix_file.h"
#include "io/safetensors.h"
#include "io/staged_directory.h"
#include "models/native_dir.h"
#include "models/whisper/whisper_convert.h"

namespace oasr::models {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

namespace {

// Tokenizer and processor files of an HF directory, copied as they are.
constexpr const char* kCopiedHfFiles[] = {"tokenizer_config.json", "special_tokens_map.json",
                                          "normalizer.json", "preprocessor_config.json"};

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
    default:
      return "float32";
  }
}

// WhisperFeatureExtractor's settings (16 kHz, 25 ms / 10 ms frames, 30 s
// windows), so transformers' WhisperProcessor loads the directory too.
ordered_json preprocessor_config(int64_t num_mel_bins) {
  ordered_json out;
  out["chunk_length"] = 30;
  out["feature_extractor_type"] = "WhisperFeatureExtractor";
  out["feature_size"] = num_mel_bins;
  out["hop_length"] = 160;
  out["n_fft"] = 400;
  out["n_samples"] = 480000;
  out["nb_max_frames"] = 3000;
  out["padding_side"] = "right";
  out["padding_value"] = 0.0;
  out["processor_class"] = "WhisperProcessor";
  out["return_attention_mask"] = false;
  out["sampling_rate"] = 16000;
  return out;
}

// tokenizer_config.json for a tokenizer.json that comes without one (a
// CTranslate2 model): the special tokens from <|endoftext|> to
// <|notimestamps|> as additional_special_tokens, as OpenAI's Hugging Face
// repositories list them. transformers takes the timestamp tokens to start
// after the last special token (WhisperTokenizer._compute_offsets); without
// the list that is <|endoftext|> + 1 and every offset is 2.12 s late.
ordered_json tokenizer_config(const fs::path& tokenizer_json, const WhisperGeneration& generation) {
  const nlohmann::json tokenizer = io::read_json_file(tokenizer_json);
  std::vector<std::pair<int64_t, std::string>> specials;
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
    for (const nlohmann::json& token : tokenizer["added_tokens"]) {
      if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() ||
          !token.contains("content") || !token["content"].is_string()) {
        continue;
      }
      const auto id = token["id"].get<int64_t>();
      if (id >= generation.eos_token_id && id <= generation.no_timestamps_token_id) {
        specials.emplace_back(id, token["content"].get<std::string>());
      }
    }
  }
  std::sort(specials.begin(), specials.end());
  ordered_json names = ordered_json::array();
  for (const auto& [id, content] : specials) names.push_back(content);
  ordered_json out;
  out["additional_special_tokens"] = names;
  out["tokenizer_class"] = "WhisperTokenizer";
  return out;
}

void write_contents(const WhisperSource& source, const fs::path& dir,
                    const WhisperWriteOptions& options) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  DType embed_dtype = DType::kF32;
  const bool quantized = !options.quantization.is_null();
  for (const std::string& name : source.weights->names()) {
    Tensor tensor = source.weights->get(name);
    const bool floating = tensor.dtype() == DType::kF32 || tensor.dtype() == DType::kF16 ||
                          tensor.dtype() == DType::kBF16;
    OASR_CHECK(floating || quantized, kInvalidArgument, "the Whisper model to write has ", name,
               " of dtype ", dtype_name(tensor.dtype()),
               "; a full-precision Whisper holds floating tensors");
    if (options.dtype && tensor.dtype() != *options.dtype) tensor = tensor.to(*options.dtype);
    if (name == "model.decoder.embed_tokens.weight") embed_dtype = tensor.dtype();
    tensors.emplace_back(name, std::move(tensor));
  }
  const auto dump = [](const ordered_json& document) { return document.dump(2) + "\n"; };
  io::write_file_synced(dir / "config.json",
                        dump(whisper_hf_config_json(source.config, source.generation,
                                                    torch_dtype_name(embed_dtype))));
  io::write_file_synced(dir / "generation_config.json", dump(source.generation.to_hf_json()));
  // transformers refuses safetensors whose metadata does not say "pt".
  io::save_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  if (!source.tokenizer_json.empty()) {
    io::write_file_synced(dir / "tokenizer.json", io::read_file_bytes(source.tokenizer_json));
  } else {
    OASR_CHECK(!source.vocab_json.empty() && !source.merges_txt.empty(), kInvalidArgument,
               "the Whisper model to write has no tokenizer files");
    io::write_file_synced(dir / "vocab.json", io::read_file_bytes(source.vocab_json));
    io::write_file_synced(dir / "merges.txt", io::read_file_bytes(source.merges_txt));
    if (!source.added_tokens_json.empty()) {
      io::write_file_synced(dir / "added_tokens.json",
                            io::read_file_bytes(source.added_tokens_json));
    }
  }
  for (const char* name : kCopiedHfFiles) {
    if (is_file(source.dir / name))
      io::write_file_synced(dir / name, io::read_file_bytes(source.dir / name));
  }
  if (!source.tokenizer_json.empty() && !is_file(dir / "tokenizer_config.json") &&
      !is_file(dir / "special_tokens_map.json")) {
    io::write_file_synced(dir / "tokenizer_config.json",
                          dump(tokenizer_config(source.tokenizer_json, source.generation)));
  }
  if (!is_file(dir / "preprocessor_config.json")) {
    io::write_file_synced(dir / "preprocessor_config.json",
                          dump(preprocessor_config(source.config.num_mel_bins)));
  }
  ordered_json oasr_config;
  oasr_config["architecture"] = kWhisperArchitectureName;
  oasr_config["format_version"] = quantized ? 2 : 1;
  oasr_config["converted_from"] = options.converted_from;
  if (quantized) {
    oasr_config["notes"] = options.notes;
    oasr_config["quantization"] = options.quantization;
  }
  io::write_file_synced(dir / kNativeConfigName, dump(oasr_config));
  for (const auto& [name, contents] : options.extra_files) {
    io::write_file_synced(dir / name, contents);
  }
}

}  // namespace

void save_whisper_dir(const WhisperSource& source, const fs::path& requested,
                      const WhisperWriteOptions& options) {
  OASR_CHECK(source.weights != nullptr, kInvalidArgument,
             "the Whisper model to write has no weights");
  if (options.dtype) {
    const DType dtype = *options.dtype;
    OASR_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16,
               kInvalidArgument, "--dtype ", dtype_name(dtype),
               ": Whisper weights are stored as float32, float16 or bfloat16");
  }
  source.config.validate("the Whisper model to write");

  io::StagedDirectoryOptions staged;
  staged.force = options.force;
  staged.source = source.dir;
  staged.what = "model";
  io::write_staged_directory(requested, staged, [&](const fs::path& staging) {
    write_contents(source, staging, options);
  });
}

}  // namespace oasr::models
