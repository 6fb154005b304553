// The problem `oasr bench scaled-mm` times (cli/bench_scaled_mm.cc): its
// options, shapes and results, shared with the CUDA timing
// (cli/cuda/bench_scaled_mm_timing.cc, compiled in CUDA builds only).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "quant/format.h"

namespace oasr::cli::scaled_mm_bench {

struct Shape {
  int64_t m, n, k;
};

struct BenchScaledMMOptions {
  std::string device = "cuda";
  std::string shapes;  // empty: the default set
  std::string format = "all";
  int iters = 50;
  int warmup = 10;
  bool sweep = false;
  bool no_baseline = false;
  std::string act = "none";  // the epilogue activation: none | swish | relu
  std::string baseline_python = "python3";
  std::string baseline_script = "bench/torch_scaled_mm_bench.py";
  std::string cpu_baseline_script = "bench/torch_cpu_int8_linear_bench.py";
  int threads = 0;  // CPU: the worker pool's threads (0: the machine's)
};

// Median oasr times by (format, out, m, n, k) of the lane compared below.
using ResultKey = std::tuple<std::string, std::string, int64_t, int64_t, int64_t>;

// Times every format's lanes (native with the tuning table's configuration,
// mma_sync with the heuristic's tile, every configuration of both with
// --sweep, cublaslt) on each shape, printing one JSON line per launch
// configuration; fills `results` with the times of the lane auto serves.
// Defined in CUDA builds only; callers guard it with kBuiltWithCuda.
void run_oasr(const BenchScaledMMOptions& options, const std::vector<Shape>& shapes,
              const std::vector<quant::QDType>& formats, int device_index,
              std::map<ResultKey, double>& results);

// The CPU lanes (cli/bench_scaled_mm_cpu.cc): every registered CPU int8 lane
// on each shape, the GEMM alone and the dynamic linear (per-token quantize +
// GEMM); fills `results` with the dynamic linear of the lane auto serves.
void run_oasr_cpu(const BenchScaledMMOptions& options, const std::vector<Shape>& shapes,
                  std::map<ResultKey, double>& results);

}  // namespace oasr::cli::scaled_mm_bench
