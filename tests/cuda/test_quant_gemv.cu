// The int8 GEMV for M <= 16 (quant/kernels/cuda/scaled_mm_cuda.h) against
// the CPU reference (quant/kernels/cpu/scaled_mm_reference.h), bit for bit:
//   scaled_gemv_int8: a quantized input, every output mode, bias or none,
//     four activations, every row count 1..16 bucket;
//   quantize_gemv_int8: a float32 / float16 / bfloat16 input quantized on
//     chip (per token, per token with a smoother, static), against the
//     reference quantize followed by the reference GEMM;
//   which shapes it takes, and what it refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
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

using cuda::ScaledMMArgs;
using namespace scaled_mm_test;  // NOLINT: the shared test pieces

#define SKIP_WITHOUT_INT8()                                                                     \
  do {                                                                                          \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device visible";                            \
    std::string skip_reason;                                                                    \
    if (!cuda::mma_sync_supported(QDType::kInt8, 0, &skip_reason)) GTEST_SKIP() << skip_reason; \
  } while (0)

// (K, N): alignment edges and Whisper's decoder shapes (d 384 / 512, FFN 4 d).
const std::pair<int64_t, int64_t> kShapes[] = {{16, 8},     {48, 24},    {272, 136},  {384, 384},
                                               {384, 1536}, {1536, 384}, {512, 2048}, {2048, 512}};

TEST(QuantGemv, TakesSmallInt8ShapesOnly) {
  EXPECT_TRUE(cuda::gemv_fits(QDType::kInt8, 1, 384, 384));
  EXPECT_TRUE(cuda::gemv_fits(QDType::kInt8, 16, 384, 1536));
  EXPECT_FALSE(cuda::gemv_fits(QDType::kInt8, 0, 384, 384));
  EXPECT_FALSE(cuda::gemv_fits(QDType::kInt8, 17, 384, 384));
  EXPECT_FALSE(cuda::gemv_fits(QDType::kFp8E4M3, 4, 384, 384));  // the k32 step's bits
  EXPECT_FALSE(cuda::gemv_fits(QDType::kInt8, 4, 384, 24));      // K % 16
  EXPECT_FALSE(cuda::gemv_fits(QDType::kInt8, 4, 12, 384));      // N % 8
  // Staged rows: M rounded up to a power of two, times K, within 47 KiB.
  EXPECT_TRUE(cuda::gemv_fits(QDType::kInt8, 8, 1280, 5120));
  EXPECT_FALSE(cuda::gemv_fits(QDType::kInt8, 9, 1280, 5120));
  EXPECT_EQ(cuda::gemv_kernel_name(5), "gemv_s8_r8");
  // OASR_QUANT_GEMV decides the routing only; the value in force is restored.
  const char* before = std::getenv("OASR_QUANT_GEMV");
  const std::string saved = before != nullptr ? before : "";
  ASSERT_EQ(setenv("OASR_QUANT_GEMV", "0", 1), 0);
  EXPECT_FALSE(cuda::gemv_takes(QDType::kInt8, 1, 384, 384));
  EXPECT_TRUE(cuda::gemv_fits(QDType::kInt8, 1, 384, 384));
  ASSERT_EQ(setenv("OASR_QUANT_GEMV", "1", 1), 0);
  EXPECT_TRUE(cuda::gemv_takes(QDType::kInt8, 1, 384, 384));
  EXPECT_FALSE(cuda::gemv_takes(QDType::kInt8, 17, 384, 384));
  if (before != nullptr) {
    ASSERT_EQ(setenv("OASR_QUANT_GEMV", saved.c_str(), 1), 0);
  } else {
    ASSERT_EQ(unsetenv("OASR_QUANT_GEMV"), 0);
  }
}

TEST(QuantGemv, Int8EqualsReferenceBitwise) {
  SKIP_WITHOUT_INT8();
  std::mt19937 rng(4321);
  const std::vector<Int8Runner> runners = {
      {"scaled_gemv_int8", [](const ScaledMMArgs& args) { cuda::scaled_gemv_int8(args); }},
      // What the lane serves at these M: the GEMV, or under OASR_QUANT_GEMV=0
      // its tiled kernel.
      {"scaled_mm_mma_sync", [](const ScaledMMArgs& args) { cuda::scaled_mm_mma_sync(args); }}};
  const std::vector<Activation> acts = {Activation::kNone, Activation::kSwish, Activation::kRelu,
                                        Activation::kGeluErf};
  for (int64_t m : {1, 2, 3, 5, 8, 11, 16}) {
    for (const auto& [k, n] : kShapes) {
      const Int8Problem p = make_int8_problem(m, n, k, rng);
      SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(k));
      ASSERT_TRUE(cuda::gemv_fits(QDType::kInt8, m, n, k));
      check_int8_outputs(p, runners, acts);
      if (HasFatalFailure()) return;
    }
  }
}

// The largest |acc| the staged rows allow: K = 47 KiB at one row, +127 x -127.
TEST(QuantGemv, Int8LongestK) {
  SKIP_WITHOUT_INT8();
  std::mt19937 rng(8);
  const int64_t k = 47 * 1024;
  ASSERT_TRUE(cuda::gemv_fits(QDType::kInt8, 1, 8, k));
  Int8Problem p = make_int8_problem(1, 8, k, rng);
  std::fill(p.a_scale.begin(), p.a_scale.end(), 1.0f);
  std::fill(p.w_scale.begin(), p.w_scale.end(), 1.0f);
  check_int8_outputs(
      p, {{"scaled_gemv_int8", [](const ScaledMMArgs& args) { cuda::scaled_gemv_int8(args); }}});
}

// How quantize_gemv_int8 gets its input's quantization.
enum class InputMode { kPerToken, kSmoothed, kStatic };

const char* mode_name(InputMode mode) {
  switch (mode) {
    case InputMode::kPerToken:
      return "per token";
    case InputMode::kSmoothed:
      return "per token, smoothed";
    default:
      return "static";
  }
}

// x as the served dtype holds it: float32 values rounded to `dtype`, and the
// bytes of that dtype.
struct ServedInput {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

ServedInput served_input(int64_t m, int64_t k, DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  ServedInput x;
  for (int64_t i = 0; i < m * k; ++i) {
    float v = normal(rng);
    if (i / k == 0 && m > 1) v = 0.0f;             // an all-zero row: the amax floor
    if (i == (m > 2 ? 2 * k + 5 : 3)) v = 300.0f;  // one outlier
    uint8_t bytes[4];
    size_t size = 4;
    if (dtype == DType::kF16) {
      const uint16_t bits = f32_to_f16_bits(v);
      v = f16_bits_to_f32(bits);
      std::memcpy(bytes, &bits, 2);
      size = 2;
    } else if (dtype == DType::kBF16) {
      const uint16_t bits = f32_to_bf16_bits(v);
      v = bf16_bits_to_f32(bits);
      std::memcpy(bytes, &bits, 2);
      size = 2;
    } else {
      std::memcpy(bytes, &v, 4);
    }
    x.values.push_back(v);
    x.bytes.insert(x.bytes.end(), bytes, bytes + size);
  }
  return x;
}

TEST(QuantGemv, QuantizeFoldedInEqualsQuantizeThenReference) {
  SKIP_WITHOUT_INT8();
  std::mt19937 rng(77);
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const InputMode mode : {InputMode::kPerToken, InputMode::kSmoothed, InputMode::kStatic}) {
      for (int64_t m : {1, 3, 16}) {
        for (const auto& [k, n] : kShapes) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + mode_name(mode) + " M=" +
                       std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
          Int8Problem p = make_int8_problem(m, n, k, rng);  // w, w_scale, bias
          const ServedInput x = served_input(m, k, dtype, rng);
          std::uniform_real_distribution<float> factor(0.5f, 2.0f);
          std::vector<float> smooth_inv(static_cast<size_t>(k)), multiplier(static_cast<size_t>(k));
          for (float& v : smooth_inv) v = factor(rng);
          const float static_scale = 0.05f;
          for (int64_t j = 0; j < k; ++j) {
            multiplier[static_cast<size_t>(j)] =
                static_multiplier(static_scale, smooth_inv[static_cast<size_t>(j)]);
          }
          // The reference: quantize, then the GEMM, in float32 on the host.
          std::vector<int8_t> q(static_cast<size_t>(m * k));
          std::vector<float> scale(static_cast<size_t>(m), static_scale);
          if (mode == InputMode::kStatic) {
            quantize_static_int8_reference(x.values.data(), multiplier.data(), m, k, q.data());
          } else {
            quantize_per_token_int8_reference(
                x.values.data(), mode == InputMode::kSmoothed ? smooth_inv.data() : nullptr, m, k,
                q.data(), scale.data());
          }
          std::vector<float> reference(static_cast<size_t>(m * n));
          scaled_mm_int8_reference(q.data(), scale.data(), p.w.data(), p.w_scale.data(),
                                   p.bias.data(), Activation::kGeluErf, m, n, k, reference.data());
          const OutputMode served{dtype, false};
          std::vector<uint8_t> expected;
          for (int64_t r = 0; r < m; ++r) {
            append_expected(reference.data() + r * n, n, served, p.multiplier, false, expected);
          }

          DeviceBuffer x_device(x.bytes), w(p.w), w_scale(p.w_scale), bias(p.bias),
              smooth_device(smooth_inv), multiplier_device(multiplier);
          const size_t row_bytes = static_cast<size_t>(n) * dtype_size(dtype);
          DeviceBuffer out(static_cast<size_t>(m) * row_bytes);
          cuda::GemvInput input;
          input.x = x_device.get();
          input.x_dtype = dtype;
          if (mode == InputMode::kSmoothed) input.smooth_inv = smooth_device.as<float>();
          if (mode == InputMode::kStatic) {
            input.static_multiplier = multiplier_device.as<float>();
            input.static_scale = static_scale;
          }
          ScaledMMArgs args;
          args.format = QDType::kInt8;
          args.w = w.get();
          args.w_scale = w_scale.as<float>();
          args.bias = bias.as<float>();
          args.act = Activation::kGeluErf;
          args.m = m;
          args.n = n;
          args.k = k;
          args.served = dtype;
          args.out = out.get();
          ASSERT_TRUE(cuda::quantize_gemv_fits(input, QDType::kInt8, m, n, k));
          ASSERT_NO_THROW(cuda::quantize_gemv_int8(input, args));
          const std::vector<uint8_t> actual = download_rows(out.get(), 0, m, row_bytes);
          ASSERT_EQ(actual.size(), expected.size());
          if (std::memcmp(actual.data(), expected.data(), actual.size()) != 0) {
            size_t first = 0;
            while (actual[first] == expected[first]) ++first;
            FAIL() << "first differing byte " << first << " (row " << first / row_bytes << ")";
          }
        }
      }
    }
  }
}

TEST(QuantGemv, RefusesWhatItDoesNotTake) {
  SKIP_WITHOUT_INT8();
  DeviceBuffer buffer(1 << 16);
  ScaledMMArgs args;
  args.format = QDType::kInt8;
  args.a = args.w = args.out = buffer.get();
  args.a_scale = args.w_scale = buffer.as<float>();
  args.m = 17;
  args.n = 8;
  args.k = 32;
  EXPECT_THROW(cuda::scaled_gemv_int8(args), Error);  // M > 16
  args.m = 4;
  args.a = buffer.as<uint8_t>() + 4;  // not 16-byte aligned
  EXPECT_THROW(cuda::scaled_gemv_int8(args), Error);
  cuda::GemvInput input;
  input.x = buffer.as<uint8_t>() + 2;
  input.x_dtype = DType::kF16;
  EXPECT_FALSE(cuda::quantize_gemv_fits(input, QDType::kInt8, 4, 8, 32));
  EXPECT_THROW(cuda::quantize_gemv_int8(input, args), Error);
  input.x = buffer.get();
  input.x_dtype = DType::kI32;
  EXPECT_FALSE(cuda::quantize_gemv_fits(input, QDType::kInt8, 4, 8, 32));
  input.x_dtype = DType::kF16;
  input.static_multiplier = buffer.as<float>();
  input.smooth_inv = buffer.as<float>();
  EXPECT_THROW(cuda::quantize_gemv_int8(input, args), Error);  // one of the two
}

}  // namespace
}  // namespace oasr::quant
