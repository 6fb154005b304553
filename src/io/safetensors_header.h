// Validation of a safetensors header (internal to io/). Everything a reader
// needs to trust before touching tensor bytes is checked here, so a corrupt
// or truncated file is refused up front with a message naming the defect.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace oasr::io::detail {

// The header may not be larger than this (the reference implementation's
// limit too): a bigger length prefix means a corrupt file, not a big model.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
inline constexpr size_t kHeaderLengthPrefixBytes = 8;

struct SafeTensorsHeader {
  uint64_t header_bytes = 0;        // N: the JSON text after the 8-byte prefix
  uint64_t data_bytes = 0;          // size of the data section
  std::vector<TensorInfo> tensors;  // sorted by data offset, ties in header order
  std::map<std::string, std::string> metadata;
};

// Reads and checks the little-endian length prefix of a file of `file_size`
// bytes whose first bytes are `prefix` (at least 8 of them when the file has
// that many). `file_label` names the file in messages.
uint64_t parse_header_length(const std::string& file_label, const unsigned char* prefix,
                             uint64_t file_size);

// Parses and validates the JSON header text; `data_bytes` is what the file
// holds after the header. Throws kCorruptFile (kUnsupported for a dtype that
// safetensors defines but oasr does not serve).
SafeTensorsHeader parse_header_json(const std::string& file_label, std::string_view json_text,
                                    uint64_t data_bytes);

}  // namespace oasr::io::detail
