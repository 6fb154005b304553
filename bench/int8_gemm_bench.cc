// Micro benchmark of the AVX2 int8 lane against the CPU baselines a user
// would otherwise have, measured interleaved in one run (the machine is
// shared and loaded: each round times every implementation once, and the
// medians over rounds are reported).
//
//   oasr_bench_int8_gemm [--m 250] [--shapes 256x2048,2048x256,...] [--threads 1,2]
//                        [--rounds 7] [--target-ms 40] [--no-baseline]
//                        [--baseline-python .venv/bin/python]
//                        [--baseline-script bench/int8_linear_torch_bench.py]
//
// Shapes are KxN (in_features x out_features); M is the token count (250 =
// 10 s of audio after the U2++ 4x subsampling). Implementations, one JSON
// line each per shape and thread count:
//   oasr_int8        quantize_per_token_int8_avx2 + scaled_mm_int8_avx2, fp32 in,
//                    fp32 out (what a W8A8 Linear costs end to end; weight packed once)
//   oasr_int8_gemm   the GEMM alone on pre-quantized input
//   oasr_int8_vnni, oasr_int8_vnni_gemm
//                    the same on the AVX-512 VNNI lane (scaled_mm_int8_vnni),
//                    where the CPU has it
//   openblas_sgemm   fp32 cblas_sgemm, x W^T
//   torch_dyn_int8   PyTorch dynamic int8 Linear (bench/int8_linear_torch_bench.py)
// "gops" counts 2*M*N*K operations per call of median wall time; "cpu_us" is
// the median process CPU time per call (all threads). A final line per
// shape/threads gives the ratios torch_dyn_int8/oasr_int8 and
// openblas_sgemm/oasr_int8 of wall medians, and of CPU medians (*_cpu), and
// the same against oasr_int8_vnni (*_vs_vnni) where it ran; above 1: oasr is
// faster.
#include <cblas.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu_threads.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using Clock = std::chrono::steady_clock;

// How long OpenBLAS's threads get to stop spinning before the next measurement.
constexpr int kOpenBlasSettleMs = 300;

struct Options {
  int64_t m = 250;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::vector<int> threads = {1, 2};
  int rounds = 7;
  double target_ms = 40.0;
  bool baseline = true;
  std::string baseline_python = ".venv/bin/python";
  std::string baseline_script = "bench/int8_linear_torch_bench.py";
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

Options parse_options(int argc, char** argv) {
  Options options;
  std::string shapes =
      "256x256,256x1024,256x2048,1024x256,1024x1024,1024x2048,2048x256,"
      "2048x1024,2048x2048";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--m") {
      options.m = std::stoll(value());
    } else if (flag == "--shapes") {
      shapes = value();
    } else if (flag == "--threads") {
      options.threads.clear();
      for (const std::string& part : split(value(), ','))
        options.threads.push_back(std::stoi(part));
    } else if (flag == "--rounds") {
      options.rounds = std::stoi(value());
    } else if (flag == "--target-ms") {
      options.target_ms = std::stod(value());
    } else if (flag == "--no-baseline") {
      options.baseline = false;
    } else if (flag == "--baseline-python") {
      options.baseline_python = value();
    } else if (flag == "--baseline-script") {
      options.baseline_script = value();
    } else {
      throw std::runtime_error("unknown flag " + flag + " (see the comment at the top of " +
                               __FILE__ + ")");
    }
  }
  for (const std::string& shape : split(shapes, ',')) {
    const std::vector<std::string> kn = split(shape, 'x');
    if (kn.size() != 2) throw std::runtime_error("shape '" + shape + "' is not KxN");
    options.shapes.emplace_back(std::stoll(kn[0]), std::stoll(kn[1]));
  }
  return options;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// Median seconds per call: wall time, and process CPU time (all threads) --
// on a loaded machine the CPU time of a one-thread run shows the work done,
// free of the time other processes held the core.
struct Timing {
  double wall = 0, cpu = 0;
};

// The PyTorch baseline as a coprocess speaking one line per request.
class TorchBaseline {
 public:
  TorchBaseline(const std::string& python, const std::string& script) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execl(python.c_str(), python.c_str(), script.c_str(), static_cast<char*>(nullptr));
      std::perror("exec of the baseline failed");
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
    hello_ = read_json();
  }
  ~TorchBaseline() {
    fclose(to_);
    fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  const nlohmann::json& hello() const { return hello_; }

  Timing time(int64_t k, int64_t n, int64_t m, int threads, int iters) {
    std::fprintf(to_, "%lld %lld %lld %d %d\n", static_cast<long long>(k),
                 static_cast<long long>(n), static_cast<long long>(m), threads, iters);
    std::fflush(to_);
    const nlohmann::json answer = read_json();
    return {median(answer.at("seconds").get<std::vector<double>>()),
            median(answer.at("cpu_seconds").get<std::vector<double>>())};
  }

 private:
  nlohmann::json read_json() {
    std::string line;
    for (int c = std::fgetc(from_); c != EOF && c != '\n'; c = std::fgetc(from_)) {
      line.push_back(static_cast<char>(c));
    }
    if (line.empty()) throw std::runtime_error("the PyTorch baseline ended without an answer");
    return nlohmann::json::parse(line);
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  nlohmann::json hello_;
};

double process_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Per call over `iters` calls: see Timing.
Timing time_calls(const std::function<void()>& call, int iters) {
  std::vector<double> wall, cpu;
  for (int i = 0; i < iters; ++i) {
    const double cpu_start = process_cpu_seconds();
    const Clock::time_point start = Clock::now();
    call();
    wall.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    cpu.push_back(process_cpu_seconds() - cpu_start);
  }
  return {median(wall), median(cpu)};
}

struct ShapeData {
  std::vector<float> x, w_fp32, bias, w_scale, a_scale, out;
  std::vector<int8_t> w, a;
  oasr::quant::PackedInt8Weight packed;
  oasr::quant::PackedInt8WeightVnni packed_vnni;  // packed only where the CPU has VNNI
};

ShapeData make_shape(int64_t m, int64_t k, int64_t n, std::mt19937& rng) {
  ShapeData data;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> int8(-127, 127);
  data.x.resize(m * k);
  for (float& v : data.x) v = normal(rng);
  data.w_fp32.resize(n * k);
  for (float& v : data.w_fp32) v = 0.05f * normal(rng);
  data.w.resize(n * k);
  for (int8_t& v : data.w) v = static_cast<int8_t>(int8(rng));
  data.bias.resize(n);
  for (float& v : data.bias) v = normal(rng);
  data.w_scale.assign(n, 1.0f / 127.0f);
  data.a.resize(m * k);
  data.a_scale.resize(m);
  data.out.resize(m * n);
  data.packed = oasr::quant::pack_int8_weight(data.w.data(), n, k);
  if (oasr::quant::cpu_has_avx512_vnni()) {
    data.packed_vnni = oasr::quant::pack_int8_weight_vnni(data.w.data(), n, k);
  }
  oasr::quant::quantize_per_token_int8_avx2(data.x.data(), nullptr, m, k, data.a.data(),
                                            data.a_scale.data());
  return data;
}

int run(const Options& options) {
  if (!oasr::quant::cpu_has_avx2()) throw std::runtime_error("this CPU has no AVX2+FMA");
  std::unique_ptr<TorchBaseline> torch;
  if (options.baseline) {
    torch = std::make_unique<TorchBaseline>(options.baseline_python, options.baseline_script);
    std::cout << nlohmann::json({{"bench", "int8_gemm"}, {"baseline", torch->hello()}}).dump()
              << std::endl;
  }
  std::mt19937 rng(0);
  const int64_t m = options.m;
  for (const auto& [k, n] : options.shapes) {
    ShapeData data = make_shape(m, k, n, rng);
    const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * k;
    for (const int threads : options.threads) {
      oasr::ops::set_cpu_threads(threads);
      openblas_set_num_threads(threads);
      std::map<std::string, std::function<void()>> impls;
      impls["oasr_int8"] = [&] {
        oasr::quant::quantize_per_token_int8_avx2(data.x.data(), nullptr, m, k, data.a.data(),
                                                  data.a_scale.data());
        oasr::quant::scaled_mm_int8_avx2(data.a.data(), data.a_scale.data(), data.packed,
                                         data.w_scale.data(), data.bias.data(),
                                         oasr::Activation::kNone, m, data.out.data());
      };
      impls["oasr_int8_gemm"] = [&] {
        oasr::quant::scaled_mm_int8_avx2(data.a.data(), data.a_scale.data(), data.packed,
                                         data.w_scale.data(), data.bias.data(),
                                         oasr::Activation::kNone, m, data.out.data());
      };
      if (oasr::quant::cpu_has_avx512_vnni()) {
        impls["oasr_int8_vnni"] = [&] {
          oasr::quant::quantize_per_token_int8_avx2(data.x.data(), nullptr, m, k, data.a.data(),
                                                    data.a_scale.data());
          oasr::quant::scaled_mm_int8_vnni(data.a.data(), data.a_scale.data(), data.packed_vnni,
                                           data.w_scale.data(), data.bias.data(),
                                           oasr::Activation::kNone, m, data.out.data());
        };
        impls["oasr_int8_vnni_gemm"] = [&] {
          oasr::quant::scaled_mm_int8_vnni(data.a.data(), data.a_scale.data(), data.packed_vnni,
                                           data.w_scale.data(), data.bias.data(),
                                           oasr::Activation::kNone, m, data.out.data());
        };
      }
      impls["openblas_sgemm"] = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m),
                    static_cast<int>(n), static_cast<int>(k), 1.0f, data.x.data(),
                    static_cast<int>(k), data.w_fp32.data(), static_cast<int>(k), 0.0f,
                    data.out.data(), static_cast<int>(n));
      };
      // Calls per measurement: enough for target_ms at the first estimate.
      std::map<std::string, int> iters;
      for (auto& [name, call] : impls) {
        call();
        const double once = time_calls(call, 3).wall;
        iters[name] = std::clamp(static_cast<int>(options.target_ms * 1e-3 / once), 3, 1000);
      }
      // Order within a round: OpenBLAS first, then a pause, because its
      // worker threads keep spinning for a while after a multi-threaded call
      // and would take the cores from whatever runs next; PyTorch next (its
      // OpenMP threads spin only briefly), oasr last (its workers sleep at once).
      std::map<std::string, std::vector<double>> per_round, cpu_per_round;
      auto measure = [&](const std::string& name) {
        const Timing timing = time_calls(impls[name], iters[name]);
        per_round[name].push_back(timing.wall);
        cpu_per_round[name].push_back(timing.cpu);
      };
      for (int round = 0; round < options.rounds; ++round) {
        measure("openblas_sgemm");
        std::this_thread::sleep_for(std::chrono::milliseconds(kOpenBlasSettleMs));
        if (torch) {
          const int torch_iters = std::max(3, iters["oasr_int8"] / 2);
          const Timing timing = torch->time(k, n, m, threads, torch_iters);
          per_round["torch_dyn_int8"].push_back(timing.wall);
          cpu_per_round["torch_dyn_int8"].push_back(timing.cpu);
        }
        measure("oasr_int8");
        measure("oasr_int8_gemm");
        if (impls.count("oasr_int8_vnni") != 0) {
          measure("oasr_int8_vnni");
          measure("oasr_int8_vnni_gemm");
        }
      }
      std::map<std::string, double> medians, cpu_medians;
      for (const auto& [name, seconds] : per_round) {
        medians[name] = median(seconds);
        cpu_medians[name] = median(cpu_per_round[name]);
        std::cout << nlohmann::json(
                         {{"bench", "int8_gemm"},
                          {"impl", name},
                          {"m", m},
                          {"k", k},
                          {"n", n},
                          {"threads", threads},
                          {"median_us", medians[name] * 1e6},
                          {"min_us", *std::min_element(seconds.begin(), seconds.end()) * 1e6},
                          {"gops", ops / medians[name] * 1e-9},
                          {"cpu_us", cpu_medians[name] * 1e6},
                          {"rounds", options.rounds}})
                         .dump()
                  << std::endl;
      }
      nlohmann::json compare = {
          {"bench", "int8_gemm"}, {"compare", "baseline/oasr_int8"}, {"m", m}, {"k", k}, {"n", n},
          {"threads", threads}};
      compare["openblas_sgemm"] = medians["openblas_sgemm"] / medians["oasr_int8"];
      compare["openblas_sgemm_cpu"] = cpu_medians["openblas_sgemm"] / cpu_medians["oasr_int8"];
      if (torch) {
        compare["torch_dyn_int8"] = medians["torch_dyn_int8"] / medians["oasr_int8"];
        compare["torch_dyn_int8_cpu"] = cpu_medians["torch_dyn_int8"] / cpu_medians["oasr_int8"];
      }
      if (medians.count("oasr_int8_vnni") != 0) {
        compare["openblas_sgemm_vs_vnni"] = medians["openblas_sgemm"] / medians["oasr_int8_vnni"];
        compare["oasr_int8_avx2_vs_vnni"] = medians["oasr_int8"] / medians["oasr_int8_vnni"];
        if (torch) {
          compare["torch_dyn_int8_vs_vnni"] = medians["torch_dyn_int8"] / medians["oasr_int8_vnni"];
        }
      }
      std::cout << compare.dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception& error) {
    std::cerr << "oasr_bench_int8_gemm: " << error.what() << std::endl;
    return 1;
  }
}
