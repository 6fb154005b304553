// The native lane (quant/kernels/cuda/native/scaled_mm_native.h) on an
// sm_90 GPU; skipped elsewhere.
//   int8: every compiled configuration stores the CPU reference's bits (and
//         so the mma.sync lane's, which test_quant_scaled_mm.cu checks), for
//         every output (f32/f16/bf16, quantizing), bias or none, none/swish/
//         relu, M from 1 to 32768, N/K at the alignment edges and the
//         Conformer and Whisper-tiny shapes.
//   e4m3: every configuration stores the same bits, a row alone equals the
//         same row inside M = 32768, and the accumulator is within a derived
//         bound of the reference's K-order fp32 sum.
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
#include "core/error.h"
#include "cuda/scaled_mm_test_util.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/native/scaled_mm_native.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/numerics.h"

namespace oasr::quant {
namespace {

using cuda::NativeConfig;
using cuda::ScaledMMArgs;
using namespace scaled_mm_test;  // NOLINT: the shared test pieces

#define SKIP_WITHOUT_NATIVE(format)                                                    \
  do {                                                                                 \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible";                   \
    std::string skip_reason;                                                           \
    if (!cuda::native_supported(format, 0, &skip_reason)) GTEST_SKIP() << skip_reason; \
  } while (0)

// Runs `config`, or (null) the lane's own choice -- which for a quantizing
// output with N % 16 != 0 is the mma.sync kernel.
void run_native(const ScaledMMArgs& args, const NativeConfig* config) {
  if (config != nullptr && cuda::native_takes(args)) {
    cuda::scaled_mm_native(args, *config);
  } else {
    cuda::scaled_mm_native(args);
  }
}

// Every configuration against the reference (check_int8_outputs).
void check_int8_problem(const Int8Problem& p) {
  const std::vector<NativeConfig> configs = cuda::native_configs();
  ASSERT_FALSE(configs.empty());
  std::vector<Int8Runner> runners;
  for (const NativeConfig& config : configs) {
    runners.emplace_back(config.name(QDType::kInt8),
                         [config](const ScaledMMArgs& args) { run_native(args, &config); });
  }
  check_int8_outputs(p, runners);
}

// (K, N): alignment edges, the Conformer (d 256, FFN 2048, qkv 768) and
// Whisper-tiny (d 384, FFN 1536, qkv 1152, vocab-sized heads stay fp) shapes.
const std::pair<int64_t, int64_t> kEdgeShapes[] = {{16, 8}, {48, 24}, {272, 136}, {16, 4104}};
const std::pair<int64_t, int64_t> kModelShapes[] = {
    {256, 2048}, {2048, 256}, {256, 768}, {384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};

TEST(QuantScaledMMNative, Int8EveryConfigMatchesReferenceBitwise) {
  SKIP_WITHOUT_NATIVE(QDType::kInt8);
  std::mt19937 rng(4321);
  for (int64_t m : {1, 17, 64, 129, 250, 4096}) {
    for (const auto& shapes :
         {std::vector<std::pair<int64_t, int64_t>>(std::begin(kEdgeShapes), std::end(kEdgeShapes)),
          std::vector<std::pair<int64_t, int64_t>>(std::begin(kModelShapes),
                                                   std::end(kModelShapes))}) {
      for (const auto& [k, n] : shapes) {
        const Int8Problem p = make_int8_problem(m, n, k, rng);
        SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) +
                     " K=" + std::to_string(k));
        check_int8_problem(p);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The large batches (10 s utterances: T = 250 rows each, B = 64 and 128).
TEST(QuantScaledMMNative, Int8LargeMMatchesReferenceBitwise) {
  SKIP_WITHOUT_NATIVE(QDType::kInt8);
  std::mt19937 rng(77);
  for (int64_t m : {16000, 32768}) {
    for (const auto& [k, n] : {std::pair<int64_t, int64_t>{256, 2048}, {2048, 256}, {256, 768}}) {
      const Int8Problem p = make_int8_problem(m, n, k, rng);
      SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(k));
      check_int8_problem(p);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(QuantScaledMMNative, Int8LargestExactK) {
  SKIP_WITHOUT_NATIVE(QDType::kInt8);
  const int64_t k = kInt8MaxExactK / 16 * 16;
  std::mt19937 rng(8);
  Int8Problem p = make_int8_problem(4, 8, k, rng);
  std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
  std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
  check_int8_problem(p);
}

TEST(QuantScaledMMNative, RefusesWhatItCannotRun) {
  SKIP_WITHOUT_NATIVE(QDType::kInt8);
  DeviceBuffer buffer(1 << 16);
  ScaledMMArgs args;
  args.a = args.w = args.out = buffer.get();
  args.a_scale = args.w_scale = buffer.as<float>();
  args.m = 32;  // above the GEMV's rows (it stores any alignment)
  args.n = 8;
  args.k = 24;  // K % 16 != 0
  EXPECT_THROW(cuda::scaled_mm_native(args), Error);
  args.k = 32;
  args.n = 12;  // N % 8 != 0
  EXPECT_THROW(cuda::scaled_mm_native(args), Error);
  args.n = 8;
  args.out = buffer.as<uint8_t>() + 8;  // TMA stores need a 16-byte aligned base
  EXPECT_THROW(cuda::scaled_mm_native(args), Error);
  args.out = buffer.get();
  args.out_multiplier = buffer.as<float>();
  args.n = 24;  // quantizing, N % 16 != 0: a named configuration is refused ...
  EXPECT_FALSE(cuda::native_takes(args));
  EXPECT_THROW(cuda::scaled_mm_native(args, cuda::native_configs()[0]), Error);
  EXPECT_NO_THROW(cuda::scaled_mm_native(args));  // ... the lane runs mma.sync for it
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- e4m3 -------------------------------------------------------------------

// Rows [row0, row0 + m) of the problem through `config` (null: the lane's choice).
std::vector<uint8_t> run_fp8(const Fp8Problem& p, const Fp8Device& d, const Fp8Variant& v,
                             const NativeConfig* config, int64_t row0, int64_t m) {
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
  run_native(args, config);
  return download_rows(out.get(), 0, m, row_bytes);
}

TEST(QuantScaledMMNative, E4m3EveryConfigGivesTheSameBits) {
  SKIP_WITHOUT_NATIVE(QDType::kFp8E4M3);
  std::mt19937 rng(98);
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> shapes;
  for (int64_t m : {1, 17, 129, 250}) {
    for (const auto& shape : kEdgeShapes) shapes.push_back({m, shape});
    for (const auto& shape : kModelShapes) shapes.push_back({m, shape});
  }
  shapes.push_back({4096, {256, 768}});
  shapes.push_back({4096, {2048, 256}});
  const std::vector<NativeConfig> configs = cuda::native_configs();
  for (const auto& [m, shape] : shapes) {
    const Fp8Problem p = make_fp8_problem(m, shape.second, shape.first, rng);
    const Fp8Device d(p);
    for (const Fp8Variant& v : kFp8Variants) {
      const std::vector<uint8_t> first = run_fp8(p, d, v, &configs[0], 0, m);
      for (size_t c = 1; c < configs.size(); ++c) {
        EXPECT_TRUE(run_fp8(p, d, v, &configs[c], 0, m) == first)
            << configs[c].name(QDType::kFp8E4M3) << " differs from "
            << configs[0].name(QDType::kFp8E4M3) << " at M=" << m << " N=" << p.n << " K=" << p.k
            << " " << describe(v.mode);
      }
    }
  }
}

TEST(QuantScaledMMNative, E4m3RowDoesNotDependOnTheBatch) {
  SKIP_WITHOUT_NATIVE(QDType::kFp8E4M3);
  std::mt19937 rng(6);
  const std::vector<NativeConfig> configs = cuda::native_configs();
  constexpr int64_t kBatch = 32768;
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{2048, 256}, {256, 2048}, {272, 136}}) {
    const Fp8Problem p = make_fp8_problem(kBatch, n, k, rng);
    const Fp8Device d(p);
    for (const Fp8Variant& v : kFp8Variants) {
      const size_t row_bytes = static_cast<size_t>(n) * output_element_bytes(v.mode);
      const std::vector<uint8_t> batch = run_fp8(p, d, v, nullptr, 0, kBatch);  // the table's
      for (int64_t row : {int64_t{0}, int64_t{1}, int64_t{777}, kBatch - 1}) {
        const std::vector<uint8_t> expected(batch.begin() + row * row_bytes,
                                            batch.begin() + (row + 1) * row_bytes);
        EXPECT_TRUE(run_fp8(p, d, v, nullptr, row, 1) == expected) << "row " << row << " alone";
        for (const NativeConfig& config : configs) {
          EXPECT_TRUE(run_fp8(p, d, v, &config, row, 1) == expected)
              << "row " << row << " alone with " << config.name(QDType::kFp8E4M3);
        }
      }
      const std::vector<uint8_t> slice = run_fp8(p, d, v, nullptr, 100, 250);
      EXPECT_TRUE(std::equal(slice.begin(), slice.end(), batch.begin() + 100 * row_bytes))
          << "rows 100..349 as a batch of 250";
    }
  }
}

// With unit scales, no bias and no activation, the fp32 output is the raw
// accumulator. Bound on |gpu - reference|, with S = sum_k |a_k w_k| (e4m3
// products are exact in fp32):
//   the reference's K sequential fp32 adds:          <= K 2^-24 S
//   the kernel's K/128 fp32 adds of 128-deep partials: <= (K/128) 2^-24 S
//   each 128-deep partial on the tensor core: four k32 wgmma steps, each
//   aligning its products (and the running partial) to the largest exponent
//   with >= 13 fraction bits kept, so each of its <= 4 x 33 terms loses
//   < 2^-13 of a magnitude <= S_step:               <= 132 2^-13 S < 2^-5.9 S
// Tolerance: (2^-5.9 + 2 K 2^-24) S. A wrong pairing of elements misses by
// about S / sqrt(K) (2^-4 S at K = 256) on most outputs; the int8 test checks
// the same TMA/wgmma layouts bit for bit. The largest error seen is printed.
TEST(QuantScaledMMNative, E4m3WithinBoundOfReference) {
  SKIP_WITHOUT_NATIVE(QDType::kFp8E4M3);
  std::mt19937 rng(12);
  const std::pair<int64_t, int64_t> kn[] = {{16, 8},    {256, 2048}, {2048, 256},
                                            {256, 768}, {48, 24},    {272, 136}};
  double worst = 0.0;
  for (int64_t m : {1, 17, 129}) {
    for (const auto& shape : kn) {
      const int64_t k = shape.first;
      const int64_t n = shape.second;
      Fp8Problem p = make_fp8_problem(m, n, k, rng);
      std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
      std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
      std::vector<float> reference(static_cast<size_t>(m * n));
      scaled_mm_e4m3_reference(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), nullptr,
                               Activation::kNone, m, n, k, reference.data());
      const Fp8Device d(p);
      const Fp8Variant plain{{DType::kF32, false}, false, Activation::kNone};
      const std::vector<uint8_t> bytes = run_fp8(p, d, plain, nullptr, 0, m);
      ASSERT_EQ(bytes.size(), reference.size() * 4);
      const double relative = std::pow(2.0, -5.9) + 2.0 * static_cast<double>(k) * 0x1p-24;
      for (int64_t row = 0; row < m; ++row) {
        for (int64_t col = 0; col < n; ++col) {
          double s = 0.0;
          for (int64_t j = 0; j < k; ++j) {
            s += std::fabs(static_cast<double>(e4m3_bits_to_f32(p.a[row * k + j])) *
                           e4m3_bits_to_f32(p.w[col * k + j]));
          }
          const size_t i = static_cast<size_t>(row * n + col);
          float got;
          std::memcpy(&got, bytes.data() + i * 4, 4);
          const double error = std::fabs(static_cast<double>(got) - reference[i]);
          if (s > 0) worst = std::max(worst, error / s);
          ASSERT_LE(error, relative * s) << "M=" << m << " N=" << n << " K=" << k << " output " << i
                                         << ": got " << got << ", reference " << reference[i];
        }
      }
    }
  }
  std::printf("native e4m3: largest |gpu - reference| / sum|a w| = %.3g (2^%.1f)\n", worst,
              worst > 0 ? std::log2(worst) : -999.0);
}

}  // namespace
}  // namespace oasr::quant
