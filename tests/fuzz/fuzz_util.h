// What the libFuzzer targets share. A target feeds bytes to one parser;
// oasr::Error is how a parser rejects bad bytes, so it is caught and
// ignored. Any other exception, a crash, a leak, undefined behaviour or a
// hang is a finding: other exceptions are reported by name and abort, so
// libFuzzer records the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"

namespace oasr::fuzz {

// A folder of this process's own (parsers that take a path read the input
// from a file in it); removed when the process exits normally.
class ScratchDir {
 public:
  ScratchDir() {
    // tmpfs when there is one: thousands of small writes a second are then
    // memory copies, not journal traffic.
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    if (tmp == nullptr && ::access("/dev/shm", W_OK | X_OK) == 0) base = "/dev/shm";
    std::string pattern = base + "/oasr-fuzz-" + std::to_string(::getpid()) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("oasr fuzz: mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

// Writes `bytes` to `name` in the scratch folder (replacing it) and returns its path.
inline std::filesystem::path write_scratch_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = scratch_dir() / name;
  // A fresh file, not a truncated one: ext4 flushes a file rewritten by
  // truncation when it is closed, which would make every run wait on disk.
  std::filesystem::remove(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "oasr fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at NUL bytes into at most `count` parts (the last keeps any
// further NULs); missing parts are empty. Multi-file targets use it, so a
// corpus file stays readable text: part one, NUL, part two, ...
inline std::vector<std::string_view> split_parts(std::string_view input, size_t count) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < count) {
    const size_t nul = input.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(input.substr(0, nul));
    input.remove_prefix(nul + 1);
  }
  parts.push_back(input);
  parts.resize(count);
  return parts;
}

// Runs `parse`; an oasr::Error is the expected rejection, any other
// exception is a finding.
template <typename F>
void run_parser(F&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    // Bad bytes, refused as they should be. OASR_FUZZ_VERBOSE=1 shows the
    // message (to check what a corpus file exercises).
    static const bool verbose = std::getenv("OASR_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "oasr fuzz: refused: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "oasr fuzz: FINDING: a non-oasr exception escaped the parser: %s\n",
                 e.what());
    std::abort();
  }
}

}  // namespace oasr::fuzz
