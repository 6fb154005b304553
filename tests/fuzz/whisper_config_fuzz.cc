// libFuzzer target: a Hugging Face Whisper directory's config.json and
// generation_config.json (models/whisper/whisper_config.h, from_hf_json;
// models/whisper/whisper_dir.h, resolve_whisper_generation). The input is
// config.json, a NUL, then generation_config.json (none without the NUL).
// The tokenizer's special tokens are whisper-tiny's.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "io/json_file.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_dir.h"

namespace {

const std::map<std::string, int64_t>& special_tokens() {
  static const std::map<std::string, int64_t> tokens = {
      {"<|endoftext|>", 50257},   {"<|startoftranscript|>", 50258}, {"<|en|>", 50259},
      {"<|de|>", 50261},          {"<|translate|>", 50358},         {"<|transcribe|>", 50359},
      {"<|startoflm|>", 50360},   {"<|startofprev|>", 50361},       {"<|nocaptions|>", 50362},
      {"<|notimestamps|>", 50363}};
  return tokens;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = oasr::fuzz::as_text(data, size);
  const bool has_generation = input.find('\0') != std::string_view::npos;
  const std::vector<std::string_view> parts = oasr::fuzz::split_parts(input, 2);
  const auto config_path = oasr::fuzz::write_scratch_file("config.json", parts[0]);
  const auto generation_path = oasr::fuzz::write_scratch_file("generation_config.json", parts[1]);
  oasr::fuzz::run_parser([&] {
    const nlohmann::json config = oasr::io::read_json_file(config_path);
    oasr::models::WhisperConfig network;  // whisper-tiny's, when config.json is refused
    oasr::fuzz::run_parser(
        [&] { network = oasr::models::WhisperConfig::from_hf_json(config, config_path.string()); });
    nlohmann::json generation;
    if (has_generation) generation = oasr::io::read_json_file(generation_path);
    std::vector<std::string> notes;
    const oasr::models::WhisperGeneration resolved = oasr::models::resolve_whisper_generation(
        has_generation ? &generation : nullptr, config, special_tokens(), network,
        oasr::fuzz::scratch_dir().string(), notes);
    return resolved.to_hf_json().dump().size() + resolved.forced_decoder_ids_json().size();
  });
  return 0;
}
