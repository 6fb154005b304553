#include "cli/bench_qwen2_audio.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "audio/audio_file.h"
#include "cli/bench_common.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "engine/asr_engine.h"
#include "io/manifest.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"

namespace oasr::cli {
namespace {

namespace fs = std::filesystem;

struct BenchQwen2AudioOptions {
  std::string manifest;
  int64_t utterances = 16;
  int warmup = 1;
  int repeats = 3;
  bool no_baseline = false;
  std::string baseline_python;
  std::string baseline_script = "bench/qwen2_audio_torch_bench.py";
  std::string peer_args;
  EngineFlags engine;
};

CLI::App* g_app = nullptr;
std::shared_ptr<BenchQwen2AudioOptions> g_options;

// The peer's lines, each with the share of utterances whose tokens equal
// oasr's and the speed ratio.
void run_peer(const BenchQwen2AudioOptions& options, const engine::EngineConfig& config,
              int64_t max_new_tokens, const std::vector<io::ManifestEntry>& audio,
              const std::vector<engine::Transcript>& transcripts, double oasr_tokens_per_s) {
  OASR_CHECK(fs::exists(options.baseline_script), kNotFound, "baseline script ",
             options.baseline_script,
             " not found; run from the source directory, pass --baseline-script PATH, or "
             "--no-baseline");
  std::vector<std::pair<std::string, std::string>> listed;
  for (const io::ManifestEntry& entry : audio) listed.emplace_back(entry.id, entry.audio.string());
  const PeerAudioList list(listed, "bench qwen2-audio");
  const std::string python =
      options.baseline_python.empty() ? default_baseline_python() : options.baseline_python;
  std::ostringstream command;
  command << shell_quote(python) << " " << shell_quote(options.baseline_script) << " --model-dir "
          << shell_quote(config.ckpt_dir.string()) << " --audio-list " << shell_quote(list.path())
          << " --batch-size " << config.max_batch_size << " --warmup " << options.warmup
          << " --repeats " << options.repeats;
  command << " --max-new-tokens " << max_new_tokens;
  if (!options.peer_args.empty()) command << " " << options.peer_args;
  const std::vector<nlohmann::json> lines = run_baseline_script(
      command.str(), python, options.baseline_script, [](const nlohmann::json& line) {
        return line.is_object() &&
               ((line.contains("tokens") && line.contains("wall_s")) || line.contains("error"));
      });
  for (const nlohmann::json& peer : lines) {
    if (peer.contains("error")) continue;
    int64_t same = 0;
    for (size_t i = 0; i < transcripts.size() && i < peer["tokens"].size(); ++i) {
      same += peer["tokens"][i].get<std::vector<int64_t>>() == transcripts[i].tokens;
    }
    nlohmann::ordered_json line;
    line["bench"] = "qwen2-audio";
    line["compare"] = "oasr/" + peer.value("impl", std::string("transformers"));
    line["peer_mode"] = peer.value("mode", std::string());
    line["peer_tokens_per_s"] = peer["tokens_per_s"];
    line["utterances_with_equal_tokens"] = same;
    line["speedup"] = round3(oasr_tokens_per_s / peer["tokens_per_s"].get<double>());
    std::cout << line.dump() << std::endl;
  }
}

void run_bench_qwen2_audio(const BenchQwen2AudioOptions& options) {
  OASR_CHECK(options.utterances >= 1 && options.warmup >= 0 && options.repeats >= 1,
             kInvalidArgument,
             "bench qwen2-audio: --utterances and --repeats must be >= 1 and "
             "--warmup >= 0, got ",
             options.utterances, ", ", options.repeats, ", ", options.warmup);
  const engine::EngineConfig config = options.engine.to_config();
  OASR_CHECK(models::is_qwen2_audio_dir(config.ckpt_dir), kInvalidArgument,
             "bench qwen2-audio: ", config.ckpt_dir.string(),
             " is not a Qwen2-Audio directory (config.json model_type qwen2_audio)");
  engine::ASREngine asr(config);
  auto entries = io::read_manifest(options.manifest, {});
  if (static_cast<int64_t>(entries.size()) > options.utterances) {
    entries.resize(static_cast<size_t>(options.utterances));
  }
  std::vector<std::vector<float>> samples;
  double audio_seconds = 0;
  for (const auto& entry : entries) {
    audio::DecodedAudio audio = audio::load_audio(entry.audio, asr.sample_rate());
    audio_seconds += audio.duration_seconds();
    samples.push_back(std::move(audio.samples));
  }
  for (int i = 0; i < options.warmup; ++i) asr.transcribe(samples);
  std::vector<double> walls;
  std::vector<engine::Transcript> transcripts;
  for (int i = 0; i < options.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    transcripts = asr.transcribe(samples);
    walls.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double wall = median(walls);
  int64_t tokens = 0;
  for (const auto& t : transcripts) tokens += static_cast<int64_t>(t.tokens.size());
  nlohmann::ordered_json line;
  line["bench"] = "qwen2-audio";
  line["impl"] = "oasr";
  line["device"] = config.device;
  line["dtype"] = config.dtype;
  line["quantization"] =
      config.quantization.scheme().empty() ? "none" : config.quantization.scheme();
  line["kv_cache"] =
      config.quantization.kv_cache().empty() ? "served dtype" : config.quantization.kv_cache();
  line["max_batch_size"] = config.max_batch_size;
  line["utterances"] = transcripts.size();
  line["audio_seconds"] = round3(audio_seconds);
  line["generated_tokens"] = tokens;
  line["wall_s"] = round3(wall);
  nlohmann::json each = nlohmann::json::array();
  for (const double w : walls) each.push_back(round3(w));
  line["wall_s_each"] = each;
  line["rtfx"] = round3(audio_seconds / wall);
  line["tokens_per_s"] = round3(static_cast<double>(tokens) / wall);
  std::cout << line.dump() << std::endl;
  if (!options.no_baseline) {
    run_peer(options, config, asr.decode_options().get<int64_t>("max_new_tokens"), entries,
             transcripts, static_cast<double>(tokens) / wall);
  }
}

}  // namespace

void add_bench_qwen2_audio_command(CLI::App& bench) {
  g_options = std::make_shared<BenchQwen2AudioOptions>();
  BenchQwen2AudioOptions& o = *g_options;
  g_app = bench.add_subcommand(
      "qwen2-audio",
      "Transcribe the first --utterances of a manifest with a Qwen2-Audio model (timed after "
      "loading and audio decoding; tokens per second) and run transformers on the same "
      "directory and audio (eager SDPA and compiled static-cache generation)");
  g_app->add_option("--manifest", o.manifest, "jsonl manifest of the audio")->required();
  g_app->add_option("--utterances", o.utterances, "how many entries, from the top")
      ->capture_default_str();
  g_app->add_option("--warmup", o.warmup, "untimed transcriptions first")->capture_default_str();
  g_app->add_option("--repeats", o.repeats, "timed transcriptions; wall_s is their median")
      ->capture_default_str();
  g_app->add_flag("--no-baseline", o.no_baseline, "skip transformers");
  g_app->add_option("--peer-args", o.peer_args, "more arguments for the peer script");
  g_app->add_option("--baseline-python", o.baseline_python,
                    "python with torch and transformers (default: .venv/bin/python if present)");
  g_app->add_option("--baseline-script", o.baseline_script, "the peer script")
      ->capture_default_str();
  add_engine_flags(*g_app, o.engine);
}

bool run_bench_qwen2_audio_if_parsed() {
  if (g_app == nullptr || !g_app->parsed()) return false;
  run_bench_qwen2_audio(*g_options);
  return true;
}

}  // namespace oasr::cli
