// `oasr eval --manifest M.jsonl [--audio-root DIR] --ckpt-dir DIR [--metric wer|cer]
// [--output-format text|json]`: decodes every manifest entry and scores it
// against its reference after English normalisation of both sides, and
// reports the decoding speed: seconds of audio decoded, the wall time of the
// decode calls (model load and audio reading excluded) and their ratio, RTFx.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
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

// Seconds of audio decoded and the wall time of the decode calls.
struct DecodeSpeed {
  double audio_seconds = 0.0;
  double decode_seconds = 0.0;
  double rtfx() const { return decode_seconds > 0.0 ? audio_seconds / decode_seconds : 0.0; }
};

void print_text_report(const eval::EvalResult& result, eval::ErrorRateUnit unit, bool per_utterance,
                       const DecodeSpeed& speed) {
  const auto& t = result.totals;
  std::cout << std::fixed << std::setprecision(2) << eval::error_rate_unit_name(unit) << " "
            << 100.0 * t.error_rate() << "% (" << t.errors() << " errors / " << t.reference_length
            << " reference " << (unit == eval::ErrorRateUnit::kWord ? "words" : "characters")
            << ")  substitutions " << t.substitutions << "  deletions " << t.deletions
            << "  insertions " << t.insertions << "  utterances " << result.utterances << "\n";
  std::cout << std::setprecision(1) << "speed: " << speed.audio_seconds << " s of audio in "
            << std::setprecision(2) << speed.decode_seconds << " s of decoding, RTFx "
            << std::setprecision(1) << speed.rtfx() << "\n";
  if (per_utterance && result.per_utterance) {
    for (const auto& u : *result.per_utterance) {
      std::cout << u.id << "\terrors=" << u.counts.errors() << "\tref=" << u.reference
                << "\thyp=" << u.hypothesis << "\n";
    }
  }
}

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
  // the progress bar still moves. An utterance that cannot be read or
  // decoded is named by manifest line and id; the others are still scored
  // (ASREngine::transcribe_each) and the command exits non-zero.
  std::vector<std::pair<const io::ManifestEntry*, std::string>> failures;
  DecodeSpeed speed;
  const double sample_rate = static_cast<double>(asr.sample_rate());
  const size_t group = static_cast<size_t>(std::max<int64_t>(1, asr.config().max_batch_size));
  for (size_t start = 0; start < entries.size(); start += group) {
    const size_t end = std::min(entries.size(), start + group);
    std::vector<std::vector<float>> utterances;
    std::vector<std::string> labels;
    std::vector<size_t> loaded;
    for (size_t i = start; i < end; ++i) {
      const std::string label = options.manifest + " line " + std::to_string(entries[i].line) +
                                " (id " + entries[i].id + ")";
      try {
        utterances.push_back(asr.load_utterance(entries[i].audio));
        labels.push_back(label);
        loaded.push_back(i);
      } catch (const Error& e) {
        failures.emplace_back(&entries[i], label + ": " + e.what());
      }
    }
    for (const std::vector<float>& samples : utterances) {
      speed.audio_seconds += static_cast<double>(samples.size()) / sample_rate;
    }
    const auto decode_start = std::chrono::steady_clock::now();
    const auto results = asr.transcribe_each(utterances, labels);
    speed.decode_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - decode_start).count();
    for (size_t k = 0; k < loaded.size(); ++k) {
      const size_t i = loaded[k];
      if (!results[k].ok()) {
        failures.emplace_back(&entries[i], results[k].error->what());
        continue;
      }
      result.add(entries[i].id, references[i],
                 eval::normalize_english(results[k].transcript->text));
    }
    progress.advance(static_cast<int64_t>(end - start));
  }
  progress.finish();

  std::sort(failures.begin(), failures.end(),
            [](const auto& a, const auto& b) { return a.first->line < b.first->line; });
  for (const auto& [entry, message] : failures) std::cerr << "oasr: error: " << message << "\n";
  // Nothing scored: there is no error rate to print.
  OASR_CHECK(failures.size() < entries.size(), kInvalidArgument, "none of the ", entries.size(),
             " utterance(s) of ", options.manifest, " could be decoded (each named above)");
  if (options.output_format == "json") {
    nlohmann::json json = result;
    json["audio_seconds"] = speed.audio_seconds;
    json["decode_seconds"] = speed.decode_seconds;
    json["rtfx"] = speed.rtfx();
    if (!failures.empty()) {
      json["failed"] = nlohmann::json::array();
      for (const auto& [entry, message] : failures) {
        json["failed"].push_back({{"id", entry->id},
                                  {"line", entry->line},
                                  {"audio", entry->audio.string()},
                                  {"error", message}});
      }
    }
    std::cout << json.dump() << "\n";
  } else {
    print_text_report(result, unit, options.per_utterance, speed);
  }
  OASR_CHECK(failures.empty(), kInvalidArgument, failures.size(), " of ", entries.size(),
             " utterance(s) could not be decoded (each named above); the error rate above counts "
             "the other ",
             entries.size() - failures.size(), " only");
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
