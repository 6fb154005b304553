// `oasr bench scaled-mm --device cuda|cpu [--shapes M,N,K;...] [--format int8|fp8|all]
// [--iters N] [--sweep] [--no-baseline] [--baseline-python PATH]`: GPU time
// of one scaled GEMM (quant/kernels/cuda/scaled_mm_cuda.h), per shape, format,
// output (float16, or the int8/e4m3 quantizing epilogue) and lane (native on
// sm_90 with the tuning table's configuration, mma_sync with the heuristic's
// tile, every configuration of both with --sweep, cublaslt). Each launch
// is timed alone between two CUDA events; the median over --iters launches
// after --warmup is reported, with TOPS = 2 M N K / time. Then the PyTorch
// baseline (bench/torch_scaled_mm_bench.py: torch._int_mm + dequant,
// torch._scaled_mm rowwise fp8, fp16 F.linear) runs as a subprocess on the
// same shapes; its JSON lines are relayed, and one comparison line per shape
// and format gives oasr/baseline time ratios. With --device cpu it times the
// CPU int8 lanes instead (cli/bench_scaled_mm_cpu.cc) against PyTorch's
// dynamic int8 Linear (oneDNN / QNNPACK) and float32 F.linear on the same
// shapes and threads (bench/torch_cpu_int8_linear_bench.py).
#include "cli/bench_scaled_mm.h"

#include "cli/bench_common.h"
#include "cli/bench_scaled_mm_problem.h"

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu_threads.h"
#include "quant/format.h"
#include "quant/number_format.h"

namespace oasr::cli {
namespace {

using scaled_mm_bench::BenchScaledMMOptions;
using scaled_mm_bench::ResultKey;
using scaled_mm_bench::run_oasr;
using scaled_mm_bench::run_oasr_cpu;
using scaled_mm_bench::Shape;

namespace fs = std::filesystem;
using quant::QDType;

CLI::App* g_app = nullptr;
std::shared_ptr<BenchScaledMMOptions> g_options;

// M in {4096, 32768} x (K, N) in {(256, 2048), (2048, 256), (256, 768)}: the
// U2++ encoder's GEMMs at a long and a large batch; plus one square 8192^3.
std::vector<Shape> default_shapes() {
  std::vector<Shape> shapes;
  for (int64_t m : {4096, 32768}) {
    shapes.push_back({m, 2048, 256});
    shapes.push_back({m, 256, 2048});
    shapes.push_back({m, 768, 256});
  }
  shapes.push_back({8192, 8192, 8192});
  return shapes;
}

// The CPU shapes: the U2++ Conformer's GEMMs at 10 s (M = 250) and 40 s of
// audio, and Whisper tiny's encoder GEMMs over one 30 s window (M = 1500).
std::vector<Shape> default_cpu_shapes() {
  std::vector<Shape> shapes;
  for (int64_t m : {250, 1000}) {
    shapes.push_back({m, 2048, 256});
    shapes.push_back({m, 256, 2048});
    shapes.push_back({m, 256, 256});
  }
  shapes.push_back({1500, 1536, 384});
  shapes.push_back({1500, 384, 1536});
  shapes.push_back({1500, 384, 384});
  return shapes;
}

std::vector<Shape> parse_shapes(const std::string& text, bool cpu) {
  if (text.empty()) return cpu ? default_cpu_shapes() : default_shapes();
  std::vector<Shape> shapes;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ';')) {
    if (part.empty()) continue;
    Shape shape{};
    char comma1 = 0, comma2 = 0;
    std::stringstream fields(part);
    fields >> shape.m >> comma1 >> shape.n >> comma2 >> shape.k;
    OASR_CHECK(!fields.fail() && fields.eof() && comma1 == ',' && comma2 == ',' && shape.m > 0 &&
                   shape.n > 0 && shape.k > 0,
               kInvalidArgument, "--shapes '", text,
               "': each shape is M,N,K of positive integers, shapes separated by ';'");
    OASR_CHECK(shape.k % 16 == 0 && shape.n % 8 == 0, kInvalidArgument, "--shapes: shape ", part,
               " needs K % 16 == 0 and N % 8 == 0");
    shapes.push_back(shape);
  }
  OASR_CHECK(!shapes.empty(), kInvalidArgument, "--shapes is empty; give e.g. 4096,2048,256");
  return shapes;
}

std::string shapes_argument(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) {
    if (!text.empty()) text += ";";
    text += std::to_string(s.m) + "," + std::to_string(s.n) + "," + std::to_string(s.k);
  }
  return text;
}

// Median times of a baseline script's lines by (impl, m, n, k).
using BaselineMedians = std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, double>;

// Runs `python script arguments`, relays its JSON lines and keeps each
// line's median_us (the CUDA and the CPU baselines both print them so).
BaselineMedians baseline_medians(const std::string& python, const std::string& script,
                                 const std::string& arguments, const char* alternatives) {
  OASR_CHECK(fs::exists(script), kNotFound, "baseline script ", script, " not found; ",
             alternatives);
  const std::string command = shell_quote(python) + " " + shell_quote(script) + " " + arguments;
  BaselineMedians lines;
  const auto is_object = [](const nlohmann::json& line) { return line.is_object(); };
  for (const nlohmann::json& line : run_baseline_script(command, python, script, is_object)) {
    if (line.contains("median_us") && line["median_us"].is_number()) {
      lines[{line.value("impl", std::string()), line.value("m", int64_t{0}),
             line.value("n", int64_t{0}), line.value("k", int64_t{0})}] =
          line["median_us"].get<double>();
    }
  }
  return lines;
}

BaselineMedians run_cpu_baseline(const BenchScaledMMOptions& options,
                                 const std::vector<Shape>& shapes) {
  std::ostringstream arguments;
  arguments << "--shapes " << shell_quote(shapes_argument(shapes)) << " --iters " << options.iters
            << " --warmup " << options.warmup << " --threads " << ops::cpu_threads();
  return baseline_medians(options.baseline_python, options.cpu_baseline_script, arguments.str(),
                          "run from the source directory or pass --no-baseline");
}

void run_bench_scaled_mm_cpu(const BenchScaledMMOptions& options) {
  OASR_CHECK(options.format == "int8" || options.format == "all", kInvalidArgument, "--format '",
             options.format, "': the CPU lanes serve int8; use int8 (or all)");
  OASR_CHECK(!options.sweep, kInvalidArgument,
             "--sweep times the CUDA kernels' configurations; drop it with --device cpu");
  OASR_CHECK(options.threads >= 0, kInvalidArgument, "--threads ", options.threads,
             ": use 0 (the machine's threads) or a positive count");
  ops::set_cpu_threads(options.threads);
  const std::vector<Shape> shapes = parse_shapes(options.shapes, /*cpu=*/true);
  std::map<ResultKey, double> results;
  run_oasr_cpu(options, shapes, results);
  if (options.no_baseline) return;
  const auto baseline = run_cpu_baseline(options, shapes);
  // oasr's dynamic int8 linear (the lane auto serves) / each PyTorch
  // layer: below 1 is oasr faster.
  for (const auto& [key, oasr_us] : results) {
    const auto& [format, out, m, n, k] = key;
    nlohmann::ordered_json line;
    line["bench"] = "scaled_mm";
    line["device"] = "cpu";
    line["compare"] = "oasr/baseline";
    line["m"] = m;
    line["n"] = n;
    line["k"] = k;
    line["oasr_linear_us"] = round3(oasr_us);
    for (const std::string impl :
         {"torch_dynamic_int8_onednn", "torch_dynamic_int8_qnnpack", "torch_fp32_linear"}) {
      const auto found = baseline.find({impl, m, n, k});
      if (found == baseline.end() || found->second <= 0) continue;
      line[impl + "_us"] = round3(found->second);
      line["ratio_" + impl] = round3(oasr_us / found->second);
    }
    std::cout << line.dump() << std::endl;
  }
}

int parse_device_index(const std::string& device) {
  const Device parsed = parse_device(device);  // refuses malformed text by name
  OASR_CHECK(parsed.is_cuda(), kInvalidArgument, "--device '", device,
             "': use cuda, cuda:N or cpu");
  return parsed.index;
}

// The CUDA baseline (bench/torch_scaled_mm_bench.py) on the same shapes.
[[maybe_unused]] BaselineMedians run_baseline(const BenchScaledMMOptions& options,
                                              const std::vector<Shape>& shapes) {
  std::ostringstream arguments;
  arguments << "--shapes " << shell_quote(shapes_argument(shapes)) << " --format "
            << shell_quote(options.format) << " --iters " << options.iters << " --warmup "
            << options.warmup << " --device " << shell_quote(options.device) << " --act "
            << shell_quote(options.act);
  return baseline_medians(options.baseline_python, options.baseline_script, arguments.str(),
                          "run from the source directory, pass --baseline-script PATH, or "
                          "--no-baseline");
}

void run_bench_scaled_mm(const BenchScaledMMOptions& options) {
  OASR_CHECK(options.iters >= 20 && options.warmup >= 0, kInvalidArgument,
             "need --iters >= 20 (a stable median) and --warmup >= 0");
  if (parse_device(options.device).is_cpu()) {
    run_bench_scaled_mm_cpu(options);
    return;
  }
  const int device_index = parse_device_index(options.device);
  OASR_CHECK(options.format == "int8" || options.format == "fp8" || options.format == "all",
             kInvalidArgument, "--format '", options.format, "': use int8, fp8 or all");
  const std::vector<Shape> shapes = parse_shapes(options.shapes, /*cpu=*/false);
  // The formats the mma_sync lane's kernels take, by their method name.
  std::vector<QDType> formats;
  for (QDType id : quant::number_formats()) {
    const quant::NumberFormat& row = quant::number_format(id);
    const bool on_gpu =
        std::find(row.cuda_lanes.begin(), row.cuda_lanes.end(), "mma_sync") != row.cuda_lanes.end();
    if (on_gpu && (options.format == "all" || options.format == row.method)) formats.push_back(id);
  }
  OASR_CHECK(kBuiltWithCuda, kUnsupported, "bench scaled-mm: this oasr was built without CUDA");
  std::map<ResultKey, double> results;
  if constexpr (kBuiltWithCuda) run_oasr(options, shapes, formats, device_index, results);
  if (options.no_baseline) return;
  const auto baseline = run_baseline(options, shapes);
  // oasr (the lane auto serves: native on Hopper, else mma_sync) / baseline:
  // below 1 is oasr faster.
  for (const auto& [key, oasr_us] : results) {
    const auto& [format, out, m, n, k] = key;
    nlohmann::ordered_json line;
    line["bench"] = "scaled_mm";
    line["compare"] = "oasr/baseline";
    line["format"] = format;
    line["out"] = out;
    line["m"] = m;
    line["n"] = n;
    line["k"] = k;
    line["oasr_us"] = round3(oasr_us);
    const std::string same_format = format == "int8" ? "torch_int_mm_dequant" : "torch_scaled_mm";
    for (const std::string& impl : {same_format, std::string("torch_fp16_linear")}) {
      const auto found = baseline.find({impl, m, n, k});
      if (found == baseline.end() || found->second <= 0) continue;
      line[impl + "_us"] = round3(found->second);
      line["ratio_" + impl] = round3(oasr_us / found->second);
    }
    std::cout << line.dump() << std::endl;
  }
}

}  // namespace

void add_bench_scaled_mm_command(CLI::App& bench) {
  auto options = std::make_shared<BenchScaledMMOptions>();
  CLI::App* app = bench.add_subcommand(
      "scaled-mm",
      "Time the scaled GEMMs (CUDA: int8 / fp8 on the native, mma_sync and cublaslt lanes; CPU: "
      "every int8 lane) and compare with PyTorch's int8, fp8, fp16 and float32 layers");
  app->add_option("--device", options->device, "cuda | cuda:N | cpu")->capture_default_str();
  app->add_option("--threads", options->threads,
                  "CPU: worker threads (0: the machine's hardware threads); the baseline uses "
                  "the same count")
      ->capture_default_str();
  app->add_option("--shapes", options->shapes,
                  "M,N,K;M,N,K;... (default, CUDA: M in {4096, 32768} x (N, K) in {(2048, 256), "
                  "(256, 2048), (768, 256)}, plus 8192,8192,8192; CPU: M in {250, 1000} x "
                  "(N, K) in {(2048, 256), (256, 2048), (256, 256)}, plus M = 1500 x (1536, "
                  "384), (384, 1536), (384, 384): Whisper tiny's encoder)");
  app->add_option("--format", options->format, "int8 | fp8 | all")->capture_default_str();
  app->add_option("--act", options->act,
                  "the epilogue activation (and the baselines'): none | "
                  "swish | relu")
      ->check(CLI::IsMember({"none", "swish", "relu"}))
      ->capture_default_str();
  app->add_option("--iters", options->iters, "timed launches (median reported; >= 20)")
      ->capture_default_str();
  app->add_option("--warmup", options->warmup, "untimed launches first")->capture_default_str();
  app->add_flag("--sweep", options->sweep,
                "also time every compiled mma_sync tile and native configuration (the lines "
                "tools/bench/native_tuning_table.py turns into the native tuning table)");
  app->add_flag("--no-baseline", options->no_baseline, "skip the PyTorch baseline");
  app->add_option("--baseline-python", options->baseline_python, "python with torch")
      ->capture_default_str();
  app->add_option("--baseline-script", options->baseline_script,
                  "the baseline script (relative paths are from the working directory)")
      ->capture_default_str();
  g_app = app;
  g_options = options;
}

bool run_bench_scaled_mm_if_parsed() {
  if (g_app == nullptr || !g_app->parsed()) return false;
  run_bench_scaled_mm(*g_options);
  return true;
}

}  // namespace oasr::cli
