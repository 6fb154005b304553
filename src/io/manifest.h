// JSON-lines manifests for `oasr eval` (and later calibration).
//
// Each non-blank line is an object {"id": str, "audio": str, "text": str,
// ...}; other keys are ignored. Audio paths are resolved against the audio
// root (the manifest's folder by default); absolute paths are kept. Reading
// checks every line before failing, then throws one oasr::Error listing the
// problems by line number (the first 20, and how many more).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace oasr::io {

struct ManifestEntry {
  std::string id;
  std::filesystem::path audio;      // resolved against the audio root
  std::optional<std::string> text;  // absent only when text is not required
  int line = 0;                     // 1-based line in the manifest
};

struct ManifestOptions {
  // Empty: the manifest's own folder.
  std::filesystem::path audio_root;
  // eval needs a reference transcript on every line; calibration does not.
  bool require_text = true;
};

// Parses manifest text; `name` is used in messages and `default_root` is the
// audio root when options.audio_root is empty.
std::vector<ManifestEntry> parse_manifest(const std::string& contents, const std::string& name,
                                          const std::filesystem::path& default_root,
                                          const ManifestOptions& options = {});

// Reads and parses the file at `path` (kNotFound / kIo when it cannot be read).
std::vector<ManifestEntry> read_manifest(const std::filesystem::path& path,
                                         const ManifestOptions& options = {});

}  // namespace oasr::io
