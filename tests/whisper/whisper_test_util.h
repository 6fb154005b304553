// Helpers for Whisper tests that need the real tiny.en directory the
// ctest fixture whisper_tiny_en writes (tests/whisper/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace oasr::testing {

// $OASR_WHISPER_TINY_EN_DIR when the fixture converted the model there;
// otherwise empty, with `why` saying why not (the fixture's marker text).
inline std::filesystem::path whisper_tiny_en_dir(std::string& why) {
  const char* env = std::getenv("OASR_WHISPER_TINY_EN_DIR");
  if (env == nullptr || *env == '\0') {
    why =
        "OASR_WHISPER_TINY_EN_DIR is not set (run through ctest with the whisper_tiny_en "
        "fixture)";
    return {};
  }
  const std::filesystem::path dir(env);
  if (std::filesystem::is_regular_file(dir / "oasr_config.json")) return dir;
  std::ifstream marker(dir.string() + ".unavailable");
  if (!std::getline(marker, why)) {
    why = dir.string() + " was not written (did the whisper.tiny_en_dir fixture run?)";
  }
  return {};
}

}  // namespace oasr::testing

// Declares `var` as the tiny.en directory, or skips the test with the reason.
#define OASR_WHISPER_TINY_EN_DIR_OR_SKIP(var)                                        \
  std::string var##_why;                                                             \
  const std::filesystem::path var = ::oasr::testing::whisper_tiny_en_dir(var##_why); \
  if (var.empty()) GTEST_SKIP() << var##_why
