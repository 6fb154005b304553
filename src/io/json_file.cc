#include "io/json_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json_error.h"

namespace oasr::io {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open the file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  OASR_CHECK(!in.bad(), kIo, path.string(), ": reading the file failed");
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    OASR_THROW(kCorruptFile, path.string(), ": not valid JSON (", json_error_text(e), ")");
  }
}

std::optional<nlohmann::json> read_json_file_if_present(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return std::nullopt;
  return read_json_file(path);
}

}  // namespace oasr::io
