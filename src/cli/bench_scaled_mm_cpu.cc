// The CPU half of `oasr bench scaled-mm --device cpu`: every registered CPU
// int8 lane this machine runs, per shape, timed twice -- the scaled GEMM
// alone (prepared weight, float32 output) and the dynamic int8 linear a
// layer runs (per-token quantize of the float32 input, then the GEMM) --
// with steady_clock around each call, the median over --iters after
// --warmup, GOPS = 2 M N K / time. The scalar reference lane is timed only
// where it finishes in reasonable time (2 M N K <= 2^30).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "cli/bench_common.h"
#include "cli/bench_scaled_mm_problem.h"
#include "core/cpu_features.h"
#include "core/device.h"
#include "ops/cpu_threads.h"
#include "quant/lanes/scaled_mm_lane.h"

namespace oasr::cli::scaled_mm_bench {
namespace {

template <typename Fn>
double median_us(const BenchScaledMMOptions& options, const Fn& fn) {
  for (int i = 0; i < options.warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < options.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return median(times);
}

double gops(const Shape& s, double us) {
  return us > 0 ? 2.0 * static_cast<double>(s.m) * s.n * s.k / (us * 1e3) : 0.0;
}

}  // namespace

void run_oasr_cpu(const BenchScaledMMOptions& options, const std::vector<Shape>& shapes,
                  std::map<ResultKey, double>& results) {
  const quant::ScaledMMLane& chosen =
      quant::choose_lane(quant::QDType::kInt8, Device::cpu(), "auto");
  std::mt19937 rng(7);
  for (const Shape& s : shapes) {
    std::vector<float> x(static_cast<size_t>(s.m * s.k)), w_scale(static_cast<size_t>(s.n), 0.01f);
    std::vector<int8_t> w(static_cast<size_t>(s.n * s.k));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    std::vector<int8_t> q(x.size());
    std::vector<float> a_scale(static_cast<size_t>(s.m));
    std::vector<float> out(static_cast<size_t>(s.m * s.n));
    for (const quant::ScaledMMLane& lane : quant::registered_lanes()) {
      if (lane.device != DeviceType::kCPU || lane.scaled_mm_int8 == nullptr ||
          lane.quantize_per_token_int8 == nullptr) {
        continue;
      }
      nlohmann::ordered_json line;
      line["bench"] = "scaled_mm";
      line["device"] = "cpu";
      line["impl"] = "oasr";
      line["lane"] = lane.name;
      line["format"] = "int8";
      line["m"] = s.m;
      line["n"] = s.n;
      line["k"] = s.k;
      line["threads"] = ops::cpu_threads();
      line["cpu_isa"] = cpu_isa_name(cpu_isa());
      if (lane.available != nullptr && !lane.available()) {
        line["skipped"] = "needs " + lane.requirement;
        std::cout << line.dump() << std::endl;
        continue;
      }
      const bool scalar = lane.scaled_mm_int8_prepared == nullptr;
      if (scalar && 2.0 * static_cast<double>(s.m) * s.n * s.k > static_cast<double>(1 << 30)) {
        line["skipped"] = "the scalar reference is timed at 2 M N K <= 2^30 only";
        std::cout << line.dump() << std::endl;
        continue;
      }
      std::shared_ptr<const void> prepared;
      if (!scalar) prepared = lane.prepare_int8_weight(w.data(), s.n, s.k);
      const auto gemm = [&] {
        if (prepared != nullptr) {
          lane.scaled_mm_int8_prepared(q.data(), a_scale.data(), prepared.get(), w_scale.data(),
                                       nullptr, Activation::kNone, s.m, out.data());
        } else {
          lane.scaled_mm_int8(q.data(), a_scale.data(), w.data(), w_scale.data(), nullptr,
                              Activation::kNone, s.m, s.n, s.k, out.data());
        }
      };
      const auto quantize = [&] {
        lane.quantize_per_token_int8(x.data(), nullptr, s.m, s.k, q.data(), a_scale.data());
      };
      quantize();
      const double gemm_us = median_us(options, gemm);
      const double linear_us = median_us(options, [&] {
        quantize();
        gemm();
      });
      line["gemm_us"] = round3(gemm_us);
      line["gemm_gops"] = round3(gops(s, gemm_us));
      line["linear_us"] = round3(linear_us);
      line["linear_gops"] = round3(gops(s, linear_us));
      std::cout << line.dump() << std::endl;
      if (&lane == &chosen) results[{"int8", "float32", s.m, s.n, s.k}] = linear_us;
    }
  }
}

}  // namespace oasr::cli::scaled_mm_bench
