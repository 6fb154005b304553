// JSON-lines manifest reader; see manifest.h.
#include "io/manifest.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_error.h"

namespace oasr::io {
namespace {

constexpr size_t kMaxListedProblems = 20;

const char* json_type_name(const nlohmann::json& value) {
  return value.type_name();
}

}  // namespace

std::vector<ManifestEntry> parse_manifest(const std::string& contents, const std::string& name,
                                          const std::filesystem::path& default_root,
                                          const ManifestOptions& options) {
  const std::filesystem::path root = options.audio_root.empty() ? default_root : options.audio_root;
  std::vector<ManifestEntry> entries;
  std::vector<std::string> problems;
  std::unordered_map<std::string, int> first_line_of_id;

  std::istringstream stream(contents);
  std::string line;
  int line_number = 0;
  while (std::getline(stream, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto report = [&](const std::string& what) {
      problems.push_back("line " + std::to_string(line_number) + ": " + what);
    };

    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& error) {  // parse_error, or 406: number overflow
      report("not valid JSON (" + json_error_text(error) + ")");
      continue;
    }
    if (!object.is_object()) {
      report(std::string("expected a JSON object, found ") + json_type_name(object));
      continue;
    }
    bool ok = true;
    std::string fields[3];
    const char* const keys[3] = {"id", "audio", "text"};
    for (int k = 0; k < 3; ++k) {
      const bool required = k < 2 || options.require_text;
      const auto it = object.find(keys[k]);
      if (it == object.end()) {
        if (required) {
          report(std::string("missing \"") + keys[k] + "\"");
          ok = false;
        }
        continue;
      }
      if (!it->is_string()) {
        report(std::string("\"") + keys[k] + "\" must be a string, found " + json_type_name(*it));
        ok = false;
        continue;
      }
      fields[k] = it->get<std::string>();
    }
    if (!ok) continue;
    if (fields[0].empty()) {
      report("\"id\" is empty");
      continue;
    }
    if (fields[1].empty()) {
      report("\"audio\" is empty");
      continue;
    }
    const auto [previous, inserted] = first_line_of_id.emplace(fields[0], line_number);
    if (!inserted) {
      report("duplicate id \"" + fields[0] + "\" (first on line " +
             std::to_string(previous->second) + ")");
      continue;
    }
    ManifestEntry entry;
    entry.id = std::move(fields[0]);
    const std::filesystem::path audio(fields[1]);
    entry.audio = audio.is_absolute() ? audio : root / audio;
    if (object.contains("text") && object["text"].is_string()) entry.text = std::move(fields[2]);
    entry.line = line_number;
    entries.push_back(std::move(entry));
  }

  if (!problems.empty()) {
    std::ostringstream message;
    message << "manifest " << name << " has " << problems.size() << " malformed line"
            << (problems.size() == 1 ? "" : "s")
            << " (each must be a JSON object with string \"id\", \"audio\""
            << (options.require_text ? ", \"text\"" : "") << "):";
    for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i) {
      message << "\n  " << problems[i];
    }
    if (problems.size() > kMaxListedProblems) {
      message << "\n  ... and " << problems.size() - kMaxListedProblems << " more";
    }
    OASR_THROW(kInvalidArgument, message.str());
  }
  OASR_CHECK(!entries.empty(), kInvalidArgument, "manifest ", name,
             " has no entries; expected one JSON object per line");
  return entries;
}

std::vector<ManifestEntry> read_manifest(const std::filesystem::path& path,
                                         const ManifestOptions& options) {
  OASR_CHECK(std::filesystem::exists(path), kNotFound, "manifest ", path.string(),
             " does not exist");
  OASR_CHECK(!std::filesystem::is_directory(path), kInvalidArgument, "manifest ", path.string(),
             " is a directory; pass a JSON-lines file with one {\"id\", \"audio\", \"text\"} "
             "object per line (tools/data/make_eval_sets.sh writes them)");
  std::ifstream file(path, std::ios::binary);
  OASR_CHECK(file.good(), kIo, "cannot open manifest ", path.string());
  std::ostringstream contents;
  contents << file.rdbuf();
  OASR_CHECK(!file.bad(), kIo, "error while reading manifest ", path.string());
  std::filesystem::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  return parse_manifest(contents.str(), path.string(), folder, options);
}

}  // namespace oasr::io
