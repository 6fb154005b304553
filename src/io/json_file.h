// One reader for every JSON document oasr opens (configs, indexes,
// tokenizer and generation files), so each failure reads the same: the
// path, then what is wrong.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>

namespace oasr::io {

// The document at `path`. kIo when it cannot be opened or read, kCorruptFile
// "PATH: not valid JSON (...)" when it does not parse.
nlohmann::json read_json_file(const std::filesystem::path& path);

// The same, or nullopt when `path` is not a regular file.
std::optional<nlohmann::json> read_json_file_if_present(const std::filesystem::path& path);

}  // namespace oasr::io
