// The committed NeMo oracle files (fastconformer/data, OASR_ORACLE_DIR) the
// FastConformer tests share, each opened once per test binary, and the
// prompts' audio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr::testing {

inline const char* const kNemoPrompts[] = {"u00", "u01", "u02"};

// One of the generator's safetensors files, by name ("reference",
// "transducer", "hybrid").
inline const io::SafeTensorsFile& nemo_oracle_file(const std::string& name) {
  static std::map<std::string, io::SafeTensorsFile> opened;
  auto found = opened.find(name);
  if (found == opened.end()) {
    found = opened.emplace(name, io::SafeTensorsFile::open(oracle_dir() / (name + ".safetensors")))
                .first;
  }
  return found->second;
}

// The prompts' 16 kHz waveforms, as the CTC case recorded them (every case
// decodes the same audio).
inline std::vector<std::vector<float>> nemo_prompt_waves() {
  std::vector<std::vector<float>> out;
  for (const char* key : kNemoPrompts) {
    const Tensor audio = nemo_oracle_file("reference").get(std::string(key) + ".audio");
    out.emplace_back(audio.data<float>(), audio.data<float>() + audio.numel());
  }
  return out;
}

// Row `row` of NeMo's padded batch: its tokens out of the rows' concatenated
// `tokens`, given each row's `lengths`.
inline std::vector<int64_t> nemo_batch_row(const std::vector<int64_t>& tokens,
                                           const std::vector<int64_t>& lengths, size_t row) {
  size_t offset = 0;
  for (size_t i = 0; i < row; ++i) offset += static_cast<size_t>(lengths[i]);
  return {tokens.begin() + static_cast<std::ptrdiff_t>(offset),
          tokens.begin() + static_cast<std::ptrdiff_t>(offset + static_cast<size_t>(lengths[row]))};
}

}  // namespace oasr::testing
