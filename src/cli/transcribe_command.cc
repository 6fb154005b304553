// `oasr transcribe AUDIO... --ckpt-dir DIR [decode flags] [--output-format text|json]`:
// one line per file, "<file>\t<transcript>" (text) or one JSON object per line.
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/error.h"

namespace oasr::cli {

namespace {

struct TranscribeOptions {
  std::vector<std::string> audio;
  EngineFlags engine;
  std::string output_format = "text";
};

void run_transcribe(const TranscribeOptions& options) {
  OASR_CHECK(options.output_format == "text" || options.output_format == "json", kInvalidArgument,
             "unknown --output-format '", options.output_format, "'; use text or json");
  const engine::ASREngine engine(options.engine.to_config());
  const bool json = options.output_format == "json";
  // A file that cannot be read (or is too short) is reported by name and
  // the others are still transcribed: one batch call over the good ones
  // gives each the result it has alone (batch invariance).
  std::vector<std::vector<float>> utterances;
  std::vector<size_t> good;
  std::vector<std::optional<Error>> errors(options.audio.size());
  for (size_t i = 0; i < options.audio.size(); ++i) {
    try {
      utterances.push_back(engine.load_utterance(options.audio[i]));
      good.push_back(i);
    } catch (const Error& e) {
      errors[i] = e;
    }
  }
  const auto results =
      utterances.empty() ? std::vector<engine::Transcript>{} : engine.transcribe(utterances);
  size_t next = 0;
  for (size_t i = 0; i < options.audio.size(); ++i) {
    nlohmann::ordered_json line;
    line["file"] = options.audio[i];
    if (errors[i]) {
      if (options.audio.size() > 1) std::cerr << "oasr: error: " << errors[i]->what() << "\n";
      if (json) {
        line["error"] = errors[i]->what();
        std::cout << line.dump() << "\n";
      }
      continue;
    }
    const engine::Transcript& result = results[next++];
    if (json) {
      line["text"] = result.text;
      line["tokens"] = result.tokens;
      line["score"] = result.score;
      std::cout << line.dump() << "\n";
    } else {
      std::cout << options.audio[i] << "\t" << result.text << "\n";
    }
  }
  const size_t failed = options.audio.size() - good.size();
  // One file asked and it failed: its own message is the one line.
  if (options.audio.size() == 1 && failed == 1) throw *errors[0];
  OASR_CHECK(failed == 0, kInvalidArgument, failed, " of ", options.audio.size(),
             " file(s) could not be transcribed (each named above); the others' transcripts "
             "are printed");
}

}  // namespace

Command add_transcribe_command(CLI::App& parent) {
  auto options = std::make_shared<TranscribeOptions>();
  CLI::App* app = parent.add_subcommand("transcribe", "Recognise speech in audio files");
  app->add_option("audio", options->audio, "audio files (WAV, FLAC, OGG, MP3; any rate)")
      ->required();
  add_engine_flags(*app, options->engine);
  app->add_option("--output-format", options->output_format, "text (default) or json");
  return {app, [options] { run_transcribe(*options); }};
}

}  // namespace oasr::cli
