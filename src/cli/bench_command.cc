// `oasr bench encoder --ckpt-dir DIR [...]`: wall-clock time of the U2++
// encoder (full attention; CPU float32, or CUDA in float32/float16/bfloat16)
// on synthetic fbank input, one JSON line per batch size, then the same
// measurement by the PyTorch oracle model (bench/u2pp_torch_bench.py, run as
// a subprocess; on CUDA both eager and torch.compile) and one comparison
// line per batch size. Timing only: the outputs are not compared here (the
// oracle tests do that). On CUDA each timed run ends with a device
// synchronisation, so host wall-clock time covers the queued GPU work.
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/bench_common.h"
#include "cli/bench_fastconformer.h"
#include "cli/bench_qwen2_audio.h"
#include "cli/bench_scaled_mm.h"
#include "cli/bench_whisper.h"
#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "core/tensor.h"
#include "models/architecture.h"
#include "models/u2pp/u2pp_model.h"
#include "ops/cpu_threads.h"

namespace oasr::cli {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kFramesPerSecond = 100;  // 10 ms fbank frame shift
constexpr uint32_t kInputSeed = 0;

struct BenchEncoderOptions {
  std::string checkpoint_dir;
  std::string device = "cpu";
  std::string dtype;  // empty: float32 on cpu, float16 on cuda
  double seconds = 10.0;
  std::string batch = "1,4";
  int warmup = 2;
  int iters = 5;
  int threads = 0;  // 0: OpenBLAS's default
  bool no_baseline = false;
  bool no_compile = false;
  std::string baseline_python;
  std::string baseline_script = "bench/u2pp_torch_bench.py";
  QuantizationFlags quantization;
};

// What a JSON line names as the served quantization: the --quantization
// flag, else what the checkpoint serves (its recipe, else its schemes), else
// "none" for full precision.
std::string scheme_label(const BenchEncoderOptions& options, const quant::QuantizationSpec& spec) {
  if (!options.quantization.scheme.empty()) return options.quantization.scheme;
  if (spec.empty()) return "none";
  const auto recipe = spec.producer.find("recipe");
  if (recipe != spec.producer.end() && recipe->is_string()) return recipe->get<std::string>();
  std::string names;
  for (const std::string& name : spec.scheme_names()) names += (names.empty() ? "" : "+") + name;
  return names;
}

nlohmann::ordered_json time_oasr_encoder(const models::U2ppModel& model,
                                         const BenchEncoderOptions& options,
                                         const std::string& quantization,
                                         const engine::EngineConfig& served, int64_t batch,
                                         std::mt19937& generator) {
  const int64_t frames = static_cast<int64_t>(std::llround(options.seconds * kFramesPerSecond));
  const Device device = served.served_device();
  // The input is placed on the device in the served dtype before timing, as
  // the PyTorch baseline does, so both time the encoder alone.
  const Tensor feats = random_features(batch, frames, model.config().encoder.input_dim, generator)
                           .to(served.served_dtype())
                           .to(device);
  const Tensor lengths = Tensor::from_vector(std::vector<int64_t>(batch, frames), {batch});
  oasr::synchronize(device);
  const DeviceGraphCache::Stats before = model.encoder().graph_stats();
  std::vector<double> times_ms;
  for (int run = 0; run < options.warmup + options.iters; ++run) {
    // The peak is the steady state's: the timed runs, after the warm-up
    // (which on CUDA also measures and records the shape's graph).
    if (run == options.warmup) {
      oasr::synchronize(device);
      oasr::reset_peak_memory(device);
    }
    const auto start = std::chrono::steady_clock::now();
    const auto output = model.encode(feats, lengths);  // full attention by default
    oasr::synchronize(device);
    const auto stop = std::chrono::steady_clock::now();
    OASR_CHECK(output.out.defined(), kInternal, "encode returned no output");
    if (run >= options.warmup) {
      times_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
    }
  }
  const double median_ms = median(times_ms);
  nlohmann::ordered_json line;
  line["bench"] = "encoder";
  line["impl"] = "oasr";
  line["device"] = options.device;
  line["batch"] = batch;
  line["seconds"] = options.seconds;
  line["median_ms"] = round3(median_ms);
  line["min_ms"] = round3(*std::min_element(times_ms.begin(), times_ms.end()));
  line["rtfx"] = round3(static_cast<double>(batch) * options.seconds / (median_ms / 1e3));
  line["threads"] = ops::cpu_threads();
  line["quantization"] = quantization;
  line["dtype"] = dtype_name(served.served_dtype());
  add_memory_and_graphs(line, device, before, model.encoder().graph_stats());
  return line;
}

// Runs the PyTorch baseline, relays each of its JSON lines and returns them
// by (impl, batch size): "pytorch" (eager) and, on CUDA, "pytorch_compile". Its stderr goes to a
// temporary file so that a failure can be shown as a tail rather than interleaved with the JSON on
// stdout.
std::map<std::pair<std::string, int64_t>, nlohmann::json> run_baseline(
    const BenchEncoderOptions& options, const engine::EngineConfig& served, int threads) {
  OASR_CHECK(fs::exists(options.baseline_script), kNotFound, "baseline script ",
             options.baseline_script,
             " not found; run from the source directory, pass --baseline-script PATH, or "
             "--no-baseline");
  const std::string python =
      options.baseline_python.empty() ? default_baseline_python() : options.baseline_python;
  std::ostringstream command;
  command << shell_quote(python) << " " << shell_quote(options.baseline_script) << " --ckpt-dir "
          << shell_quote(options.checkpoint_dir) << " --seconds " << options.seconds << " --batch "
          << shell_quote(options.batch) << " --warmup " << options.warmup << " --iters "
          << options.iters << " --threads " << threads << " --seed " << kInputSeed << " --device "
          << shell_quote(options.device) << " --dtype " << dtype_name(served.served_dtype());
  // torch.compile (default mode) is the baseline a PyTorch user reaches for
  // on a GPU; on the CPU it needs a host compiler and adds little.
  if (served.served_device().is_cuda() && !options.no_compile) command << " --compile";
  // What a PyTorch user would reach for against an int8 engine on the CPU:
  // dynamic int8 on every nn.Linear (torch.ao quantize_dynamic, what WeNet's
  // export uses; a CPU-only baseline). On CUDA the bar is the 16-bit model
  // under torch.compile (above); torchao's W8A8 runs through the script's
  // --torchao by hand (bench/README.md), as it needs a package the set-up
  // does not install.
  const bool on_cpu = !served.served_device().is_cuda();
  if (on_cpu && options.quantization.scheme.rfind("int8", 0) == 0) command << " --dynamic-int8";
  // On the CPU, ONNX Runtime too (fp32, and its dynamic int8 with the line
  // above): the engine under sherpa-onnx and WeNet's ONNX runtime. The script
  // leaves it out, saying why, where the package is not installed.
  if (on_cpu) command << " --onnxruntime";

  const auto timing_line = [](const nlohmann::json& line) {
    return line.is_object() && line.contains("batch") && line["batch"].is_number_integer() &&
           line.contains("median_ms") && line["median_ms"].is_number();
  };
  std::map<std::pair<std::string, int64_t>, nlohmann::json> lines;
  for (nlohmann::json& line :
       run_baseline_script(command.str(), python, options.baseline_script, timing_line)) {
    const std::pair<std::string, int64_t> key{line.value("impl", std::string("pytorch")),
                                              line["batch"].get<int64_t>()};
    lines[key] = std::move(line);
  }
  return lines;
}

void run_bench_encoder(const BenchEncoderOptions& options) {
  // The engine's refusals (no GPU, 16-bit on the CPU, quantization on cuda).
  engine::EngineConfig served;
  served.ckpt_dir = options.checkpoint_dir;
  served.device = options.device;
  served.dtype = options.dtype;
  served.quantization = options.quantization.to_config();
  served.validate();
  OASR_CHECK(options.seconds > 0, kInvalidArgument, "--seconds must be positive");
  OASR_CHECK(options.iters >= 1 && options.warmup >= 0, kInvalidArgument,
             "need --iters >= 1 and --warmup >= 0");
  const std::vector<int64_t> batch_sizes = parse_batch_sizes(options.batch);
  OASR_CHECK(options.threads >= 0, kInvalidArgument, "--threads must be >= 0, got ",
             options.threads);
  if (options.threads > 0) ops::set_cpu_threads(options.threads);
  const int threads = ops::cpu_threads();
  const models::Architecture& architecture = models::architecture_for(options.checkpoint_dir);
  const models::MaterializedModel materialized = architecture.materialize(
      options.checkpoint_dir, served.quantization, served.materialize_options());
  // This bench drives the Conformer encoder's own forward.
  const auto* model = dynamic_cast<const models::U2ppModel*>(materialized.model.get());
  OASR_CHECK(model != nullptr, kUnsupported, "oasr bench encoder: ", options.checkpoint_dir,
             " is a ", architecture.display_name,
             " model; this bench times the U2++ Conformer encoder (oasr bench whisper times "
             "Whisper)");
  const std::string quantization = scheme_label(options, materialized.spec);
  std::mt19937 generator(kInputSeed);
  std::map<int64_t, double> oasr_median_ms;
  for (int64_t batch : batch_sizes) {
    const nlohmann::ordered_json line =
        time_oasr_encoder(*model, options, quantization, served, batch, generator);
    oasr_median_ms[batch] = line["median_ms"].get<double>();
    std::cout << line.dump() << std::endl;
  }
  if (options.no_baseline) return;

  const auto baseline = run_baseline(options, served, threads);
  for (int64_t batch : batch_sizes) {
    const auto eager = baseline.find({"pytorch", batch});
    OASR_CHECK(eager != baseline.end(), kInvalidArgument,
               "the PyTorch baseline printed no line for batch ", batch);
    const auto compiled = baseline.find({"pytorch_compile", batch});
    const double oasr_ms = oasr_median_ms[batch];
    const double eager_ms = eager->second["median_ms"].get<double>();
    nlohmann::ordered_json line;
    line["bench"] = "encoder";
    line["compare"] = "pytorch/oasr";
    line["batch"] = batch;
    line["quantization"] = quantization;
    line["baseline"] = eager->second.value("quantization", std::string("none"));
    line["speedup"] = round3(eager_ms / oasr_ms);
    line["device"] = options.device;
    line["dtype"] = dtype_name(served.served_dtype());
    line["oasr_ms"] = round3(oasr_ms);
    line["torch_eager_ms"] = round3(eager_ms);
    if (compiled != baseline.end()) {
      const double compile_ms = compiled->second["median_ms"].get<double>();
      line["torch_compile_ms"] = round3(compile_ms);
      line["speedup_compile"] = round3(compile_ms / oasr_ms);
    }
    for (const char* peer : {"onnxruntime", "onnxruntime_int8"}) {
      const auto found = baseline.find({peer, batch});
      if (found == baseline.end()) continue;
      const double peer_ms = found->second["median_ms"].get<double>();
      line[std::string(peer) + "_ms"] = round3(peer_ms);
      line[std::string("speedup_") + peer] = round3(peer_ms / oasr_ms);
    }
    const auto graphs = baseline.find({"pytorch_compile_cudagraphs", batch});
    if (graphs != baseline.end()) {
      const double graphs_ms = graphs->second["median_ms"].get<double>();
      line["torch_compile_cudagraphs_ms"] = round3(graphs_ms);
      line["speedup_compile_cudagraphs"] = round3(graphs_ms / oasr_ms);
    }
    std::cout << line.dump() << std::endl;
  }
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("bench", "Measure inference speed (JSON lines on stdout)");
  app->require_subcommand(1);
  auto options = std::make_shared<BenchEncoderOptions>();
  CLI::App* encoder = app->add_subcommand(
      "encoder",
      "Time the U2++ encoder (full attention; float32 on cpu or quantized with --quantization; "
      "float16/bfloat16/float32 on cuda) on random fbank input and compare with the PyTorch "
      "oracle model (dynamic int8 Linear when the scheme is int8; eager and torch.compile on "
      "cuda; on cpu also ONNX Runtime fp32 and, for int8, its dynamic int8, where installed)");
  encoder
      ->add_option("--ckpt-dir", options->checkpoint_dir,
                   "checkpoint directory (WeNet experiment directory or oasr native)")
      ->required();
  encoder->add_option("--device", options->device, "cpu | cuda | cuda:N")->capture_default_str();
  encoder->add_option("--dtype", options->dtype,
                      "float32 | float16 | bfloat16 (default: float32 on cpu, float16 on cuda)");
  encoder->add_option("--seconds", options->seconds, "audio seconds per row (100 frames/s)")
      ->capture_default_str();
  encoder->add_option("--batch", options->batch, "comma-separated batch sizes")
      ->capture_default_str();
  encoder->add_option("--warmup", options->warmup, "untimed runs first")->capture_default_str();
  encoder->add_option("--iters", options->iters, "timed runs (the median is reported)")
      ->capture_default_str();
  encoder
      ->add_option("--threads", options->threads,
                   "CPU threads for oasr and the baseline (0: the machine's hardware threads)")
      ->capture_default_str();
  encoder->add_flag("--no-baseline", options->no_baseline, "skip the PyTorch baseline");
  encoder->add_flag("--no-compile", options->no_compile,
                    "cuda: skip the torch.compile baseline (eager only)");
  encoder->add_option("--baseline-python", options->baseline_python,
                      "python with torch (default: .venv/bin/python if present, else python3)");
  encoder
      ->add_option("--baseline-script", options->baseline_script,
                   "the baseline script (relative paths are from the working directory)")
      ->capture_default_str();
  add_quantization_flags(*encoder, options->quantization);
  add_bench_scaled_mm_command(*app);
  add_bench_whisper_command(*app);
  add_bench_qwen2_audio_command(*app);
  add_bench_fastconformer_command(*app);
  return {app, [options] {
            if (run_bench_scaled_mm_if_parsed() || run_bench_whisper_if_parsed() ||
                run_bench_qwen2_audio_if_parsed() || run_bench_fastconformer_if_parsed()) {
              return;
            }
            run_bench_encoder(*options);
          }};
}

}  // namespace oasr::cli
