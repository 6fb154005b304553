// The CUDA scaled GEMMs (quant/kernels/cuda/scaled_mm_cuda.h) against the CPU
// reference (quant/kernels/cpu/scaled_mm_reference.h):
//   int8: every mma.sync configuration and the cublaslt lane store the
//         reference's bits (fp32 reference, rounded once on the host to the
//         served dtype, or quantized with the consumer multiplier).
//   e4m3: every configuration stores the same bits, a row's result does not
//         depend on the batch around it, and the accumulator is within a
//         stated bound of the reference's K-order fp32 sum.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "core/error.h"
#include "core/float_types.h"
#include "cuda/scaled_mm_test_util.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/numerics.h"

namespace oasr::quant {
namespace {

using cuda::MmaSyncConfig;
using cuda::ScaledMMArgs;
using namespace scaled_mm_test;  // NOLINT: the shared test pieces

// A lane under test: an mma.sync configuration, or cuBLASLt.
struct Lane {
  std::string name;
  bool cublaslt;
  MmaSyncConfig config;
};

std::vector<Lane> int8_lanes() {
  std::vector<Lane> lanes;
  for (const MmaSyncConfig& config : cuda::mma_sync_configs(QDType::kInt8)) {
    lanes.push_back({config.name(), false, config});
  }
  std::string why;
  if (cuda::cublaslt_supported(QDType::kInt8, 0, &why)) lanes.push_back({"cublaslt", true, {}});
  return lanes;
}

void run_lane(const Lane& lane, const ScaledMMArgs& args) {
  if (lane.cublaslt) {
    cuda::scaled_mm_cublaslt(args);
  } else {
    cuda::scaled_mm_mma_sync(args, lane.config);
  }
}

#define SKIP_WITHOUT(format)                                                             \
  do {                                                                                   \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible";                     \
    std::string skip_reason;                                                             \
    if (!cuda::mma_sync_supported(format, 0, &skip_reason)) GTEST_SKIP() << skip_reason; \
  } while (0)

// Every lane against the reference (check_int8_outputs).
void check_int8_problem(const Int8Problem& p, const std::vector<Lane>& lanes) {
  std::vector<Int8Runner> runners;
  for (const Lane& lane : lanes) {
    runners.emplace_back(lane.name, [lane](const ScaledMMArgs& args) { run_lane(lane, args); });
  }
  check_int8_outputs(p, runners);
}

TEST(QuantScaledMMCuda, Int8EveryConfigAndCublasLtMatchReferenceBitwise) {
  SKIP_WITHOUT(QDType::kInt8);
  const std::vector<Lane> lanes = int8_lanes();
  std::mt19937 rng(1234);
  const std::pair<int64_t, int64_t> kn[] = {{16, 8},    {256, 2048}, {2048, 256},
                                            {256, 768}, {48, 24},    {272, 136}};
  for (int64_t m : {1, 17, 64, 129, 4096}) {
    for (const auto& [k, n] : kn) {
      const Int8Problem p = make_int8_problem(m, n, k, rng);
      SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(k));
      check_int8_problem(p, lanes);
      if (HasFatalFailure()) return;
    }
  }
}

// K at the exact-int32 limit: the +127 x -127 row reaches |acc| = K * 16129,
// just below 2^31.
TEST(QuantScaledMMCuda, Int8LargestExactK) {
  SKIP_WITHOUT(QDType::kInt8);
  const int64_t k = kInt8MaxExactK / 16 * 16;
  std::mt19937 rng(7);
  Int8Problem p = make_int8_problem(4, 8, k, rng);
  std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
  std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
  check_int8_problem(p, int8_lanes());
}

TEST(QuantScaledMMCuda, RefusesUnalignedShapes) {
  SKIP_WITHOUT(QDType::kInt8);
  DeviceBuffer buffer(4096);
  ScaledMMArgs args;
  args.a = args.w = args.out = buffer.get();
  args.a_scale = args.w_scale = buffer.as<float>();
  args.m = 4;
  args.n = 8;
  args.k = 24;  // K % 16 != 0
  EXPECT_THROW(cuda::scaled_mm_mma_sync(args), Error);
  EXPECT_THROW(cuda::scaled_mm_cublaslt(args), Error);
  args.k = 32;
  args.n = 12;  // N % 8 != 0
  EXPECT_THROW(cuda::scaled_mm_mma_sync(args), Error);
}

// ---- e4m3 -------------------------------------------------------------------

// Runs rows [row0, row0 + m) of the problem through `config`; returns the bytes.
std::vector<uint8_t> run_fp8(const Fp8Problem& p, const Fp8Device& d, const Fp8Variant& v,
                             const MmaSyncConfig* config, int64_t row0, int64_t m) {
  const size_t row_bytes = static_cast<size_t>(p.n) * output_element_bytes(v.mode);
  DeviceBuffer out(static_cast<size_t>(m) * row_bytes);
  ScaledMMArgs args;
  args.format = QDType::kFp8E4M3;
  args.a = d.a.as<uint8_t>() + row0 * p.k;
  args.a_scale = d.a_scale.as<float>() + row0;
  args.w = d.w.get();
  args.w_scale = d.w_scale.as<float>();
  args.bias = v.with_bias ? d.bias.as<float>() : nullptr;
  args.act = v.act;
  args.m = m;
  args.n = p.n;
  args.k = p.k;
  args.served = v.mode.served;
  args.out = out.get();
  args.out_multiplier = v.mode.quantize ? d.multiplier.as<float>() : nullptr;
  if (config != nullptr) {
    cuda::scaled_mm_mma_sync(args, *config);
  } else {
    cuda::scaled_mm_mma_sync(args);
  }
  return download_rows(out.get(), 0, m, row_bytes);
}

TEST(QuantScaledMMCuda, E4m3EveryConfigGivesTheSameBits) {
  SKIP_WITHOUT(QDType::kFp8E4M3);
  std::mt19937 rng(99);
  const std::pair<int64_t, int64_t> kn[] = {{16, 8},    {256, 2048}, {2048, 256},
                                            {256, 768}, {48, 24},    {272, 136}};
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> shapes;
  for (int64_t m : {1, 17, 129}) {
    for (const auto& shape : kn) shapes.push_back({m, shape});
  }
  shapes.push_back({4096, {256, 768}});
  const std::vector<MmaSyncConfig> configs = cuda::mma_sync_configs(QDType::kFp8E4M3);
  for (const auto& [m, shape] : shapes) {
    const Fp8Problem p = make_fp8_problem(m, shape.second, shape.first, rng);
    const Fp8Device d(p);
    for (const Fp8Variant& v : kFp8Variants) {
      const std::vector<uint8_t> first = run_fp8(p, d, v, &configs[0], 0, m);
      for (size_t c = 1; c < configs.size(); ++c) {
        EXPECT_TRUE(run_fp8(p, d, v, &configs[c], 0, m) == first)
            << configs[c].name() << " differs from " << configs[0].name() << " at M=" << m
            << " N=" << p.n << " K=" << p.k << " " << describe(v.mode);
      }
    }
  }
}

TEST(QuantScaledMMCuda, E4m3RowDoesNotDependOnTheBatch) {
  SKIP_WITHOUT(QDType::kFp8E4M3);
  std::mt19937 rng(5);
  const std::vector<MmaSyncConfig> configs = cuda::mma_sync_configs(QDType::kFp8E4M3);
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{2048, 256}, {272, 136}}) {
    const Fp8Problem p = make_fp8_problem(4096, n, k, rng);
    const Fp8Device d(p);
    for (const Fp8Variant& v : kFp8Variants) {
      const size_t row_bytes = static_cast<size_t>(n) * output_element_bytes(v.mode);
      const std::vector<uint8_t> batch = run_fp8(p, d, v, nullptr, 0, 4096);  // heuristic
      for (int64_t row : {0, 1, 777, 4095}) {
        const std::vector<uint8_t> expected(batch.begin() + row * row_bytes,
                                            batch.begin() + (row + 1) * row_bytes);
        EXPECT_TRUE(run_fp8(p, d, v, nullptr, row, 1) == expected) << "row " << row << " alone";
        for (const MmaSyncConfig& config : configs) {
          EXPECT_TRUE(run_fp8(p, d, v, &config, row, 1) == expected)
              << "row " << row << " alone with " << config.name();
        }
      }
      const std::vector<uint8_t> slice = run_fp8(p, d, v, nullptr, 100, 17);
      EXPECT_TRUE(std::equal(slice.begin(), slice.end(), batch.begin() + 100 * row_bytes))
          << "rows 100..116 as a batch of 17";
    }
  }
}

// With unit scales, no bias and no activation, the fp32 output is the raw
// accumulator. Bound on |gpu - reference|, with S = sum_k |a_k w_k| (e4m3
// products are exact in fp32):
//   the reference's K sequential fp32 adds:        <= K 2^-24 S
//   the kernel's K/32 fp32 adds of k32 partials:   <= (K/32) 2^-24 S
//   each tensor-core k32 partial sum: fp8 MMAs align the products to the
//   largest exponent and keep >= 13 fraction bits (about 14 measured on
//   Hopper), so each of its <= 32 products loses < 2^-13 of the step's
//   largest |product| <= S_step:                  <= 32 2^-13 S = 2^-8 S
// Tolerance: (2^-8 + 2 K 2^-24) S. A fragment-layout bug pairs the wrong
// elements and misses by about S / sqrt(K) >= 2^-6 S here (the int8 tests,
// which share the fragments, check layouts bit for bit).
TEST(QuantScaledMMCuda, E4m3WithinBoundOfReference) {
  SKIP_WITHOUT(QDType::kFp8E4M3);
  std::mt19937 rng(11);
  std::string why;
  const bool with_cublaslt = cuda::cublaslt_supported(QDType::kFp8E4M3, 0, &why);
  const std::pair<int64_t, int64_t> kn[] = {{16, 8},    {256, 2048}, {2048, 256},
                                            {256, 768}, {48, 24},    {272, 136}};
  for (int64_t m : {1, 17, 129}) {
    for (const auto& shape : kn) {
      const int64_t k = shape.first;  // plain locals: the check lambda captures them
      const int64_t n = shape.second;
      Fp8Problem p = make_fp8_problem(m, n, k, rng);
      std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
      std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
      std::vector<float> reference(static_cast<size_t>(m * n));
      scaled_mm_e4m3_reference(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), nullptr,
                               Activation::kNone, m, n, k, reference.data());
      std::vector<double> magnitude(static_cast<size_t>(m * n), 0.0);
      for (int64_t row = 0; row < m; ++row) {
        for (int64_t col = 0; col < n; ++col) {
          double s = 0.0;
          for (int64_t j = 0; j < k; ++j) {
            s += std::fabs(static_cast<double>(e4m3_bits_to_f32(p.a[row * k + j])) *
                           e4m3_bits_to_f32(p.w[col * k + j]));
          }
          magnitude[static_cast<size_t>(row * n + col)] = s;
        }
      }
      const double relative = std::ldexp(1.0, -8) + 2.0 * static_cast<double>(k) * 0x1p-24;
      const Fp8Device d(p);
      const Fp8Variant plain{{DType::kF32, false}, false, Activation::kNone};
      auto check = [&](const std::vector<uint8_t>& bytes, const std::string& lane) {
        ASSERT_EQ(bytes.size(), reference.size() * 4);
        for (size_t i = 0; i < reference.size(); ++i) {
          float got;
          std::memcpy(&got, bytes.data() + i * 4, 4);
          const double bound = relative * magnitude[i];
          ASSERT_LE(std::fabs(static_cast<double>(got) - reference[i]), bound)
              << lane << " M=" << m << " N=" << n << " K=" << k << " output " << i << ": got "
              << got << ", reference " << reference[i];
        }
      };
      check(run_fp8(p, d, plain, nullptr, 0, m), "mma_sync");
      if (with_cublaslt) {
        DeviceBuffer out(reference.size() * 4);
        ScaledMMArgs args;
        args.format = QDType::kFp8E4M3;
        args.a = d.a.get();
        args.a_scale = d.a_scale.as<float>();
        args.w = d.w.get();
        args.w_scale = d.w_scale.as<float>();
        args.m = m;
        args.n = n;
        args.k = k;
        args.out = out.get();
        ASSERT_NO_THROW(cuda::scaled_mm_cublaslt(args));
        check(download_rows(out.get(), 0, m, static_cast<size_t>(n) * 4), "cublaslt");
      }
    }
  }
}

}  // namespace
}  // namespace oasr::quant
