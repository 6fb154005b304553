// `oasr transcribe AUDIO... --ckpt-dir DIR [decode flags] [--output-format text|json]`:
// one line per file, "<file>\t<transcript>" (text) or one JSON object per line.
#include <nlohmann/json.hpp>

#include <iostream>

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
  engine::ASREngine engine(options.engine.to_config());
  std::vector<std::filesystem::path> paths(options.audio.begin(), options.audio.end());
  const auto results = engine.transcribe_files(paths);
  for (size_t i = 0; i < results.size(); ++i) {
    if (options.output_format == "json") {
      nlohmann::ordered_json line;
      line["file"] = options.audio[i];
      line["text"] = results[i].text;
      line["tokens"] = results[i].tokens;
      line["score"] = results[i].score;
      std::cout << line.dump() << "\n";
    } else {
      std::cout << options.audio[i] << "\t" << results[i].text << "\n";
    }
  }
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
