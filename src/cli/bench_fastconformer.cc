#include "cli/bench_fastconformer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "asr/engine_config.h"
#include "cli/bench_common.h"
#include "cli/engine_options.h"
#include "core/device.h"
#include "core/device_graph_cache.h"
#include "core/error.h"
#include "models/architecture.h"
#include "models/fastconformer/fastconformer_model.h"
#include "ops/cpu_threads.h"

namespace oasr::cli {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kFramesPerSecond = 100;  // NeMo's 10 ms window stride
constexpr uint32_t kInputSeed = 0;

struct BenchFastConformerOptions {
  std::string checkpoint;
  std::string device = "cpu";
  std::string dtype;  // empty: float32 on cpu, float16 on cuda
  double seconds = 10.0;
  std::string batch = "1,16";
  int warmup = 2;
  int iters = 5;
  int threads = 0;
  bool no_baseline = false;
  std::string peer_modes;  // empty: the script's default for the device
  std::string baseline_python;
  std::string baseline_script = "bench/fastconformer_torch_bench.py";
  QuantizationFlags quantization;
};

CLI::App* g_app = nullptr;
std::shared_ptr<BenchFastConformerOptions> g_options;

nlohmann::ordered_json time_oasr(const models::FastConformerModel& model,
                                 const BenchFastConformerOptions& options,
                                 const engine::EngineConfig& served,
                                 const std::string& quantization, int64_t batch,
                                 std::mt19937& generator) {
  const int64_t frames = static_cast<int64_t>(std::llround(options.seconds * kFramesPerSecond));
  const Device device = served.served_device();
  // The features wait on the device before timing, as the baseline's do.
  const Tensor feats =
      random_features(batch, frames, model.config().encoder.feat_in, generator).to(device);
  const std::vector<int64_t> lengths(static_cast<size_t>(batch), frames);
  oasr::synchronize(device);
  const DeviceGraphCache::Stats before = model.encoder().graph_stats();
  std::vector<double> times_ms;
  for (int run = 0; run < options.warmup + options.iters; ++run) {
    if (run == options.warmup) {
      oasr::synchronize(device);
      oasr::reset_peak_memory(device);
    }
    const auto start = std::chrono::steady_clock::now();
    // Encoder, CTC head and log-softmax; the log-probabilities come back to
    // the host, which waits for the device.
    const models::FastConformerModel::Output out = model.forward(feats, lengths);
    const auto stop = std::chrono::steady_clock::now();
    OASR_CHECK(out.log_probs.defined() && out.log_probs.device().is_cpu(), kInternal,
               "the FastConformer forward returned no host log-probabilities");
    if (run >= options.warmup) {
      times_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
  }
  const double median_ms = median(times_ms);
  nlohmann::ordered_json line;
  line["bench"] = "fastconformer";
  line["impl"] = "oasr";
  line["device"] = options.device;
  line["dtype"] = dtype_name(served.served_dtype());
  line["quantization"] = quantization;
  line["batch"] = batch;
  line["seconds"] = options.seconds;
  line["median_ms"] = round3(median_ms);
  line["min_ms"] = round3(*std::min_element(times_ms.begin(), times_ms.end()));
  line["rtfx"] = round3(static_cast<double>(batch) * options.seconds / (median_ms / 1e3));
  line["threads"] = ops::cpu_threads();
  line["layers"] = model.config().encoder.n_layers;
  line["d_model"] = model.config().encoder.d_model;
  add_memory_and_graphs(line, device, before, model.encoder().graph_stats());
  return line;
}

// The baseline's timing lines by (impl, batch size).
std::map<std::pair<std::string, int64_t>, nlohmann::json> run_baseline(
    const BenchFastConformerOptions& options, const engine::EngineConfig& served) {
  OASR_CHECK(fs::exists(options.baseline_script), kNotFound, "baseline script ",
             options.baseline_script,
             " not found; run from the source directory, pass --baseline-script PATH, or "
             "--no-baseline");
  const std::string python =
      options.baseline_python.empty() ? default_baseline_python() : options.baseline_python;
  std::ostringstream command;
  command << shell_quote(python) << " " << shell_quote(options.baseline_script) << " --ckpt "
          << shell_quote(options.checkpoint) << " --seconds " << options.seconds << " --batch "
          << shell_quote(options.batch) << " --warmup " << options.warmup << " --iters "
          << options.iters << " --threads " << ops::cpu_threads() << " --seed " << kInputSeed
          << " --device " << shell_quote(options.device) << " --dtype "
          << dtype_name(served.served_dtype());
  std::string modes = options.peer_modes;
  // Against int8 on the CPU, also the int8 a PyTorch user has there.
  if (modes.empty() && !served.served_device().is_cuda() &&
      options.quantization.scheme.rfind("int8", 0) == 0) {
    modes = "eager,dynamic_int8";
  }
  if (!modes.empty()) command << " --modes " << shell_quote(modes);
  const auto timing_line = [](const nlohmann::json& line) {
    return line.is_object() && line.contains("batch") && line["batch"].is_number_integer() &&
           line.contains("median_ms") && line["median_ms"].is_number() && line.contains("impl");
  };
  std::map<std::pair<std::string, int64_t>, nlohmann::json> lines;
  for (nlohmann::json& line :
       run_baseline_script(command.str(), python, options.baseline_script, timing_line)) {
    std::pair<std::string, int64_t> key{line["impl"].get<std::string>(),
                                        line["batch"].get<int64_t>()};
    lines[std::move(key)] = std::move(line);
  }
  return lines;
}

void run_bench_fastconformer(const BenchFastConformerOptions& options) {
  engine::EngineConfig served;
  served.ckpt_dir = options.checkpoint;
  served.device = options.device;
  served.dtype = options.dtype;
  served.quantization = options.quantization.to_config();
  served.validate();
  OASR_CHECK(options.seconds > 0, kInvalidArgument, "--seconds must be positive");
  OASR_CHECK(options.iters >= 1 && options.warmup >= 0, kInvalidArgument,
             "need --iters >= 1 and --warmup >= 0");
  OASR_CHECK(options.threads >= 0, kInvalidArgument, "--threads must be >= 0, got ",
             options.threads);
  const std::vector<int64_t> batch_sizes = parse_batch_sizes(options.batch);
  if (options.threads > 0) ops::set_cpu_threads(options.threads);
  const models::Architecture& architecture = models::architecture_for(options.checkpoint);
  const models::MaterializedModel materialized = architecture.materialize(
      options.checkpoint, served.quantization, served.materialize_options());
  const auto* model = dynamic_cast<const models::FastConformerModel*>(materialized.model.get());
  OASR_CHECK(model != nullptr, kUnsupported, "oasr bench fastconformer: ", options.checkpoint,
             " is a ", architecture.display_name,
             " model; this bench times NeMo FastConformer CTC checkpoints");
  OASR_CHECK(!model->config().is_transducer(), kUnsupported,
             "oasr bench fastconformer: ", options.checkpoint,
             " is a transducer (RNN-T / TDT) checkpoint; this bench times the CTC models "
             "(encoder, CTC head and log-softmax)");
  const std::string quantization =
      options.quantization.scheme.empty() ? "none" : options.quantization.scheme;
  std::mt19937 generator(kInputSeed);
  std::map<int64_t, double> oasr_ms;
  for (const int64_t batch : batch_sizes) {
    const nlohmann::ordered_json line =
        time_oasr(*model, options, served, quantization, batch, generator);
    oasr_ms[batch] = line["median_ms"].get<double>();
    std::cout << line.dump() << std::endl;
  }
  if (options.no_baseline) return;
  const auto baseline = run_baseline(options, served);
  for (const int64_t batch : batch_sizes) {
    nlohmann::ordered_json line;
    line["bench"] = "fastconformer";
    line["compare"] = "baseline/oasr";
    line["batch"] = batch;
    line["device"] = options.device;
    line["dtype"] = dtype_name(served.served_dtype());
    line["quantization"] = quantization;
    line["oasr_ms"] = round3(oasr_ms[batch]);
    // Above 1: oasr is faster than that baseline.
    for (const auto& [key, peer] : baseline) {
      if (key.second != batch) continue;
      const double peer_ms = peer["median_ms"].get<double>();
      line[key.first + "_ms"] = round3(peer_ms);
      line["speedup_" + key.first] = round3(peer_ms / oasr_ms[batch]);
    }
    std::cout << line.dump() << std::endl;
  }
}

}  // namespace

void add_bench_fastconformer_command(CLI::App& bench) {
  g_options = std::make_shared<BenchFastConformerOptions>();
  BenchFastConformerOptions& o = *g_options;
  g_app = bench.add_subcommand(
      "fastconformer",
      "Time a NeMo FastConformer CTC model (encoder, CTC head, log-softmax) on random log-mel "
      "input and compare with transformers' ParakeetForCTC on the same .nemo weights (SDPA "
      "eager, torch.compile, torch.compile mode=reduce-overhead on cuda)");
  g_app->add_option("--ckpt-dir", o.checkpoint, "a .nemo archive or its unpacked directory")
      ->required();
  g_app->add_option("--device", o.device, "cpu | cuda | cuda:N")->capture_default_str();
  g_app->add_option("--dtype", o.dtype,
                    "float32 | float16 | bfloat16 (default: float32 on cpu, float16 on cuda)");
  g_app->add_option("--seconds", o.seconds, "audio seconds per row (100 frames/s)")
      ->capture_default_str();
  g_app->add_option("--batch", o.batch, "comma-separated batch sizes")->capture_default_str();
  g_app->add_option("--warmup", o.warmup, "untimed runs first")->capture_default_str();
  g_app->add_option("--iters", o.iters, "timed runs (the median is reported)")
      ->capture_default_str();
  g_app
      ->add_option("--threads", o.threads,
                   "CPU threads for oasr and the baseline (0: the machine's hardware threads)")
      ->capture_default_str();
  g_app->add_flag("--no-baseline", o.no_baseline, "skip the transformers baseline");
  g_app->add_option("--peer-modes", o.peer_modes,
                    "the baseline's modes, comma-separated: eager, nemo (NeMo's own modules), "
                    "dynamic_int8 (cpu), compile, compile_cudagraphs (default: eager, compile, "
                    "compile_cudagraphs on cuda; eager on cpu, and dynamic_int8 for int8)");
  g_app->add_option("--baseline-python", o.baseline_python,
                    "python with torch and transformers >= 5 (default: .venv/bin/python if "
                    "present, else python3)");
  g_app->add_option("--baseline-script", o.baseline_script, "the baseline script")
      ->capture_default_str();
  add_quantization_flags(*g_app, o.quantization);
}

bool run_bench_fastconformer_if_parsed() {
  if (g_app == nullptr || !g_app->parsed()) return false;
  run_bench_fastconformer(*g_options);
  return true;
}

}  // namespace oasr::cli
