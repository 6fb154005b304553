// The marker every architecture's native oasr directory carries: its
// oasr_config.json, whose "architecture" names the descriptor that reads it
// (models/architecture.h).
#pragma once

#include <filesystem>
#include <system_error>

namespace oasr::models {

inline constexpr const char* kNativeConfigName = "oasr_config.json";

// Whether `dir` holds oasr_config.json (of any architecture).
inline bool looks_like_native_dir(const std::filesystem::path& dir) {
  std::error_code error;
  return std::filesystem::is_regular_file(dir / kNativeConfigName, error);
}

}  // namespace oasr::models
