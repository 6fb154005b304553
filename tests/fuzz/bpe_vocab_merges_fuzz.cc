// libFuzzer target: GPT-2-style tokenizer files (vocab.json, merges.txt,
// added_tokens.json and tokenizer_config.json beside them), as the
// byte-level BPE tokenizer reads them (decode/byte_bpe_tokenizer.h,
// from_vocab_merges) and as the Whisper loader takes its special tokens
// from them (models/whisper/whisper_dir.h). The input is the four files in
// that order, separated by NULs; an empty one is absent.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "decode/byte_bpe_tokenizer.h"
#include "fuzz_util.h"
#include "models/whisper/whisper_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      oasr::fuzz::split_parts(oasr::fuzz::as_text(data, size), 4);
  oasr::models::WhisperSource files;
  files.vocab_json = oasr::fuzz::write_scratch_file("vocab.json", parts[0]);
  files.merges_txt = oasr::fuzz::write_scratch_file("merges.txt", parts[1]);
  // An empty part is a file the directory does not have (both are optional).
  std::filesystem::remove(oasr::fuzz::scratch_dir() / "tokenizer_config.json");
  if (!parts[2].empty()) {
    files.added_tokens_json = oasr::fuzz::write_scratch_file("added_tokens.json", parts[2]);
  }
  if (!parts[3].empty()) oasr::fuzz::write_scratch_file("tokenizer_config.json", parts[3]);
  oasr::fuzz::run_parser([&] { return oasr::models::read_whisper_special_tokens(files).size(); });
  oasr::fuzz::run_parser([&] {
    const auto tokenizer = oasr::decode::ByteLevelBpeTokenizer::from_vocab_merges(
        files.vocab_json, files.merges_txt, files.added_tokens_json);
    std::vector<int64_t> ids;
    oasr::fuzz::run_parser([&] { ids = tokenizer.encode("Hello world, <|endoftext|> ok."); });
    for (int64_t id = 0; id < std::min<int64_t>(tokenizer.vocab_size(), 300); ++id) {
      ids.push_back(id);
    }
    std::string decoded;
    oasr::fuzz::run_parser([&] { decoded = tokenizer.decode(ids, true); });
    return decoded.size();
  });
  return 0;
}
