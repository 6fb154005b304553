// nlohmann::json's exception texts start with the library's class tag
// ("[json.exception.parse_error.101] parse error at line 1, column 2: ...");
// a user reads the message after it. Every catch of a JSON exception that
// puts its text into an oasr::Error goes through json_error_text().
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace oasr {

inline std::string json_error_text(const std::exception& error) {
  std::string_view text = error.what();
  constexpr std::string_view kTag = "[json.exception.";
  if (text.substr(0, kTag.size()) == kTag) {
    const size_t close = text.find("] ");
    if (close != std::string_view::npos) text.remove_prefix(close + 2);
  }
  return std::string(text);
}

}  // namespace oasr
