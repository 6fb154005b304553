// libFuzzer target: a Hugging Face tokenizer.json, as the byte-level BPE
// tokenizer reads it (decode/byte_bpe_tokenizer.h) and as the Whisper
// loader takes its special tokens from it (models/whisper/whisper_dir.h);
// the tokenizer then encodes a text and decodes its first ids. The input is
// tokenizer.json, a NUL, then the text to encode.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "decode/byte_bpe_tokenizer.h"
#include "fuzz_util.h"
#include "models/whisper/whisper_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string_view> parts =
      oasr::fuzz::split_parts(oasr::fuzz::as_text(data, size), 2);
  oasr::models::WhisperSource files;
  files.tokenizer_json = oasr::fuzz::write_scratch_file("tokenizer.json", parts[0]);
  oasr::fuzz::run_parser([&] { return oasr::models::read_whisper_special_tokens(files).size(); });
  oasr::fuzz::run_parser([&] {
    const auto tokenizer =
        oasr::decode::ByteLevelBpeTokenizer::from_tokenizer_json(files.tokenizer_json);
    const std::string text = parts[1].empty() ? "Hello world <|endoftext|>" : std::string(parts[1]);
    std::vector<int64_t> ids;
    oasr::fuzz::run_parser([&] { ids = tokenizer.encode(text); });
    for (int64_t id = 0; id < std::min<int64_t>(tokenizer.vocab_size(), 300); ++id) {
      ids.push_back(id);
    }
    std::string decoded;
    oasr::fuzz::run_parser([&] { decoded = tokenizer.decode(ids, false); });
    oasr::fuzz::run_parser([&] { decoded += tokenizer.decode(ids, true); });
    return decoded.size();
  });
  return 0;
}
