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
  const engine::ASREngine engine(options.engine.to_config());
  const bool json = options.output_format == "json";
  // A file that cannot be read, is too short, or fails inside its batch (for
  // example longer than the model's positional table) is reported by name;
  // the others are still transcribed, each with the text it has alone
  // (ASREngine::transcribe_each; batch invariance).
  std::vector<std::vector<float>> utterances;
  std::vector<std::string> labels;
  std::vector<size_t> loaded;
  std::vector<engine::UtteranceResult> results(options.audio.size());
  for (size_t i = 0; i < options.audio.size(); ++i) {
    try {
      utterances.push_back(engine.load_utterance(options.audio[i]));
      labels.push_back(options.audio[i]);
      loaded.push_back(i);
    } catch (const Error& e) {
      results[i].error = e;
    }
  }
  std::vector<engine::UtteranceResult> decoded = engine.transcribe_each(utterances, labels);
  utterances.clear();
  for (size_t k = 0; k < loaded.size(); ++k) results[loaded[k]] = std::move(decoded[k]);

  size_t failed = 0;
  for (size_t i = 0; i < options.audio.size(); ++i) {
    nlohmann::ordered_json line;
    line["file"] = options.audio[i];
    const engine::UtteranceResult& result = results[i];
    if (!result.ok()) {
      ++failed;
      if (options.audio.size() > 1) std::cerr << "oasr: error: " << result.error->what() << "\n";
      if (json) {
        line["error"] = result.error->what();
        std::cout << line.dump() << "\n";
      }
      continue;
    }
    if (json) {
      line["text"] = result.transcript->text;
      line["tokens"] = result.transcript->tokens;
      line["score"] = result.transcript->score;
      if (!result.transcript->segments.empty()) {
        nlohmann::ordered_json segments = nlohmann::ordered_json::array();
        for (const engine::Segment& s : result.transcript->segments) {
          segments.push_back(
              {{"start", s.start}, {"end", s.end}, {"text", s.text}, {"tokens", s.tokens}});
        }
        line["segments"] = std::move(segments);
      }
      std::cout << line.dump() << "\n";
    } else {
      std::cout << options.audio[i] << "\t" << result.transcript->text << "\n";
    }
  }
  // One file asked and it failed: its own message is the one line.
  if (options.audio.size() == 1 && failed == 1) throw *results[0].error;
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
