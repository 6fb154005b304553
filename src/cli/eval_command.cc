// `oasr eval --manifest M.jsonl [--audio-root DIR] --ckpt-dir DIR [--metric wer|cer]
// [--output-format text|json]`: decodes every manifest entry and scores it
// against its reference after English normalisation of both sides.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "core/progress.h"
#include "eval/text_normalizer.h"
#include "eval/wer.h"
#include "io/manifest.h"

namespace oasr::cli {

namespace {

struct EvalOptions {
  std::string manifest;
  std::string audio_root;
  std::string metric = "wer";
  std::string output_format = "text";
  bool per_utterance = false;
  EngineFlags engine;
};

void run_eval(const EvalOptions& options) {
  OASR_CHECK(options.output_format == "text" || options.output_format == "json", kInvalidArgument,
             "unknown --output-format '", options.output_format, "'; use text or json");
  const eval::ErrorRateUnit unit = eval::parse_error_rate_unit(options.metric);
  io::ManifestOptions manifest_options;
  manifest_options.audio_root = options.audio_root;
  const auto entries = io::read_manifest(options.manifest, manifest_options);
  // Normalized once; a corpus without one reference word (or character) has
  // no error rate: refused before decoding, not printed as errors / 0.
  std::vector<std::string> references;
  for (const auto& entry : entries) references.push_back(eval::normalize_english(*entry.text));
  const bool any_reference = std::any_of(references.begin(), references.end(),
                                         [](const std::string& r) { return !r.empty(); });
  OASR_CHECK(any_reference, kInvalidArgument, "manifest ", options.manifest,
             ": every \"text\" is empty after normalization (0 reference ",
             unit == eval::ErrorRateUnit::kWord ? "words" : "characters", "), so the ",
             unit == eval::ErrorRateUnit::kWord ? "word" : "character",
             " error rate is undefined; give the entries their reference transcripts");
  engine::ASREngine asr(options.engine.to_config());

  eval::EvalResult result;
  result.unit = unit;
  if (options.per_utterance || options.output_format == "json") result.per_utterance.emplace();
  ProgressBar progress(static_cast<int64_t>(entries.size()), "eval");
  // Decode in groups of the engine's batch size so batching pays off while
  // the progress bar still moves.
  const size_t group = static_cast<size_t>(std::max<int64_t>(1, asr.config().max_batch_size));
  for (size_t start = 0; start < entries.size(); start += group) {
    const size_t end = std::min(entries.size(), start + group);
    std::vector<std::filesystem::path> paths;
    for (size_t i = start; i < end; ++i) paths.push_back(entries[i].audio);
    const auto transcripts = asr.transcribe_files(paths);
    for (size_t i = start; i < end; ++i) {
      result.add(entries[i].id, references[i],
                 eval::normalize_english(transcripts[i - start].text));
    }
    progress.advance(static_cast<int64_t>(end - start));
  }
  progress.finish();

  if (options.output_format == "json") {
    nlohmann::json json = result;
    std::cout << json.dump() << "\n";
    return;
  }
  const auto& t = result.totals;
  std::cout << std::fixed << std::setprecision(2) << eval::error_rate_unit_name(unit) << " "
            << 100.0 * t.error_rate() << "% (" << t.errors() << " errors / " << t.reference_length
            << " reference " << (unit == eval::ErrorRateUnit::kWord ? "words" : "characters")
            << ")  substitutions " << t.substitutions << "  deletions " << t.deletions
            << "  insertions " << t.insertions << "  utterances " << result.utterances << "\n";
  if (options.per_utterance && result.per_utterance) {
    for (const auto& u : *result.per_utterance) {
      std::cout << u.id << "\terrors=" << u.counts.errors() << "\tref=" << u.reference
                << "\thyp=" << u.hypothesis << "\n";
    }
  }
}

}  // namespace

Command add_eval_command(CLI::App& parent) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App* app = parent.add_subcommand(
      "eval", "Decode a jsonl manifest ({\"id\", \"audio\", \"text\"}) and print WER or CER");
  app->add_option("--manifest", options->manifest, "jsonl manifest")->required();
  app->add_option("--audio-root", options->audio_root,
                  "folder audio paths are relative to (default: the manifest's folder)");
  app->add_option("--metric", options->metric, "wer (default) or cer");
  app->add_option("--output-format", options->output_format, "text (default) or json");
  app->add_flag("--per-utterance", options->per_utterance, "also list each utterance's errors");
  add_engine_flags(*app, options->engine);
  return {app, [options] { run_eval(*options); }};
}

}  // namespace oasr::cli
