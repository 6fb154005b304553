// scaled_mm_int8_avx2 against DESIGN.md §3's int8 GEMM, bit for bit: a
// definition written here (an int64 dot product, checked to fit int32, then
// t = w_scale * float(acc); t = a_scale * t; t = t + bias; act(t) with
// core/activations.h's scalar functions) and the cpu_reference lane's body.
// Shapes cover every M/N/K tail of the 6x16 tiles and the 8-wide epilogue;
// adversarial operands (+-127 and -128 everywhere, K up to the stated bound)
// reach the largest accumulators; every activation, bias on and off, 1 and 2
// threads, a packed weight reused across calls.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/activations.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/hd.h"
#include "ops/cpu_threads.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/lanes/scaled_mm_lane.h"

namespace oasr::quant {
namespace {

constexpr Activation kAllActivations[] = {
    Activation::kNone,     Activation::kRelu,    Activation::kSwish, Activation::kGeluErf,
    Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh};

struct Problem {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int8_t> a, w;
  std::vector<float> a_scale, w_scale, bias;
  bool has_bias = true;
  Activation act = Activation::kNone;
};

std::vector<float> definition_gemm(const Problem& p) {
  std::vector<float> out(p.m * p.n);
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t c = 0; c < p.n; ++c) {
      int64_t exact = 0;
      for (int64_t j = 0; j < p.k; ++j) {
        exact += int64_t{p.a[r * p.k + j]} * int64_t{p.w[c * p.k + j]};
      }
      EXPECT_LE(std::llabs(exact), int64_t{2147483647}) << "test input overflows int32";
      float t = p.w_scale[c] * static_cast<float>(exact);
      t = p.a_scale[r] * t;
      if (p.has_bias) t = t + p.bias[c];
      out[r * p.n + c] = act::apply(p.act, t);
    }
  }
  return out;
}

// Scales chosen so that t spans roughly [-40, 40]: every activation's branch
// points (swish/sigmoid around 0, tanh's 0.625 and 9.5, erf's 1 and 3.9) are
// crossed.
Problem random_problem(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  Problem p;
  p.m = m, p.n = n, p.k = k;
  std::uniform_int_distribution<int> int8(-127, 127);
  std::uniform_real_distribution<float> unit(0.5f, 1.5f), bias(-3.0f, 3.0f);
  p.a.resize(m * k);
  p.w.resize(n * k);
  for (int8_t& v : p.a) v = static_cast<int8_t>(int8(rng));
  for (int8_t& v : p.w) v = static_cast<int8_t>(int8(rng));
  const float typical =
      127.0f * 127.0f * std::sqrt(static_cast<float>(std::max<int64_t>(k, 1)) / 3);
  p.a_scale.resize(m);
  p.w_scale.resize(n);
  for (float& v : p.a_scale) v = unit(rng) * 20.0f / typical;
  for (float& v : p.w_scale) v = unit(rng);
  p.bias.resize(n);
  for (float& v : p.bias) v = bias(rng);
  return p;
}

std::string describe(const Problem& p) {
  return "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
         " act=" + activation_name(p.act) + (p.has_bias ? " bias" : " no-bias");
}

class Avx2ScaledMM : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
    ops::set_cpu_threads(2);
  }
  void TearDown() override { ops::set_cpu_threads(0); }

  // AVX2 (packed once, and the unpacked overload) == definition == reference.
  void expect_bits(const Problem& p, bool with_reference = true) {
    const float* bias = p.has_bias ? p.bias.data() : nullptr;
    const std::vector<float> expected = definition_gemm(p);
    std::vector<float> avx2(p.m * p.n, -7.0f);
    scaled_mm_int8_avx2(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), bias, p.act,
                        p.m, p.n, p.k, avx2.data());
    std::vector<float> reference(p.m * p.n);
    if (with_reference) {
      scaled_mm_int8_reference(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), bias,
                               p.act, p.m, p.n, p.k, reference.data());
    }
    int64_t mismatches = 0;
    for (int64_t i = 0; i < p.m * p.n; ++i) {
      const bool same = float_bits(avx2[i]) == float_bits(expected[i]) &&
                        (!with_reference || float_bits(reference[i]) == float_bits(avx2[i]));
      if (!same && mismatches++ == 0) {
        ADD_FAILURE() << describe(p) << ": out[" << i / p.n << ", " << i % p.n << "] avx2 "
                      << avx2[i] << " definition " << expected[i] << " reference " << reference[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << describe(p);
  }
};

TEST_F(Avx2ScaledMM, RandomShapesWithEveryTail) {
  std::mt19937 rng(11);
  const int64_t ms[] = {1, 5, 6, 7, 13, 50};
  const int64_t ns[] = {1, 7, 8, 9, 16, 17, 40, 65};
  const int64_t ks[] = {0, 1, 2, 3, 16, 31, 64, 255};
  int index = 0;
  for (int64_t m : ms) {
    for (int64_t n : ns) {
      for (int64_t k : ks) {
        Problem p = random_problem(m, n, k, rng);
        p.has_bias = index % 2 == 0;
        p.act = kAllActivations[index % std::size(kAllActivations)];
        ++index;
        expect_bits(p);
      }
    }
  }
}

TEST_F(Avx2ScaledMM, EveryActivationWithAndWithoutBias) {
  std::mt19937 rng(12);
  for (Activation act : kAllActivations) {
    for (bool has_bias : {true, false}) {
      Problem p = random_problem(29, 70, 96, rng);
      p.act = act;
      p.has_bias = has_bias;
      expect_bits(p);
    }
  }
}

// U2++-sized products (250 tokens) over several thread blocks.
TEST_F(Avx2ScaledMM, EncoderShapes) {
  std::mt19937 rng(13);
  for (auto [k, n, act] :
       {std::tuple{256, 2048, Activation::kSwish}, std::tuple{2048, 256, Activation::kNone},
        std::tuple{256, 1000, Activation::kRelu}}) {
    Problem p = random_problem(250, n, k, rng);
    p.act = act;
    expect_bits(p);
  }
}

// All operands at +-127: every product is +-16129 and the accumulators reach
// K * 16129 = 264 million at K = 16384, with mixed signs per row / column.
TEST_F(Avx2ScaledMM, SaturatedOperandsLongK) {
  const int64_t m = 7, n = 19, k = 16384;
  Problem p;
  p.m = m, p.n = n, p.k = k;
  p.a.resize(m * k);
  p.w.resize(n * k);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < k; ++j) p.a[r * k + j] = (r % 3 == 0 || j % (r + 1) == 0) ? 127 : -127;
  }
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t j = 0; j < k; ++j) p.w[c * k + j] = c % 2 == 0 ? 127 : -127;
  }
  p.a_scale.assign(m, 1.0f / 127.0f);
  p.w_scale.assign(n, 1.0f / 127.0f);
  p.bias.assign(n, 0.25f);
  expect_bits(p);
  std::vector<float> out(m * n);
  scaled_mm_int8_avx2(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), nullptr,
                      Activation::kNone, m, n, k, out.data());
  EXPECT_EQ(out[0], static_cast<float>(k));  // row 0 and column 0 are all +127: sum = K
  EXPECT_EQ(out[1], -static_cast<float>(k));
}

// The stated bound: with every operand -128 (allowed in an int8 tensor, though
// our quantizers never produce it), K = kAvx2MaxK gives the largest exact
// accumulator, (2^17 - 1) * 2^14 = 2^31 - 2^14; one more K is refused.
TEST_F(Avx2ScaledMM, LargestExactAccumulatorAndRefusalBeyond) {
  const int64_t m = 2, n = 9, k = kAvx2MaxK;
  Problem p;
  p.m = m, p.n = n, p.k = k;
  p.a.assign(m * k, -128);
  p.w.assign(n * k, -128);
  p.a_scale.assign(m, 1.0f);
  p.w_scale.assign(n, 1.0f);
  p.bias.assign(n, 0.0f);
  p.has_bias = false;
  std::vector<float> out(m * n);
  scaled_mm_int8_avx2(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), nullptr,
                      Activation::kNone, m, n, k, out.data());
  for (float v : out) EXPECT_EQ(v, static_cast<float>(int64_t{2147483648} - 16384));
  expect_bits(p, /*with_reference=*/false);  // the reference's own bound is K * 127^2

  std::vector<int8_t> w(kAvx2MaxK + 1, 1);
  try {
    pack_int8_weight(w.data(), 1, kAvx2MaxK + 1);
    FAIL() << "K beyond the exact-accumulation bound was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(error.what()).find("131071"), std::string::npos) << error.what();
  }
}

// One packed weight serves many calls and M values; 1 and 2 threads agree.
TEST_F(Avx2ScaledMM, PackedWeightReuseAndThreadCounts) {
  std::mt19937 rng(14);
  Problem p = random_problem(100, 77, 130, rng);
  p.act = Activation::kSwish;
  const PackedInt8Weight packed = pack_int8_weight(p.w.data(), p.n, p.k);
  EXPECT_EQ(packed.n(), 77);
  EXPECT_EQ(packed.k(), 130);
  const std::vector<float> expected = definition_gemm(p);
  for (int threads : {1, 2, 3, 16}) {  // 16: tasks cut finer (int8_gemm_x86.h)
    ops::set_cpu_threads(threads);
    EXPECT_EQ(ops::cpu_threads(), threads);
    for (int64_t rows : {100, 1, 37}) {
      std::vector<float> out(rows * p.n);
      scaled_mm_int8_avx2(p.a.data(), p.a_scale.data(), packed, p.w_scale.data(), p.bias.data(),
                          p.act, rows, out.data());
      for (int64_t i = 0; i < rows * p.n; ++i) {
        ASSERT_EQ(float_bits(out[i]), float_bits(expected[i]))
            << "threads " << threads << " rows " << rows << " at " << i;
      }
    }
  }
}

TEST_F(Avx2ScaledMM, EmptyShapesAndUnpackedWeightRefused) {
  std::vector<float> out(4, 3.0f);
  const std::vector<int8_t> w(8, 1);
  const std::vector<float> scales(4, 1.0f);
  scaled_mm_int8_avx2(nullptr, nullptr, w.data(), scales.data(), nullptr, Activation::kNone, 0, 2,
                      4, out.data());
  EXPECT_EQ(out[0], 3.0f);
  const PackedInt8Weight never_packed;
  EXPECT_THROW(scaled_mm_int8_avx2(w.data(), scales.data(), never_packed, scales.data(), nullptr,
                                   Activation::kNone, 1, out.data()),
               Error);
}

// The dispatch cap (OASR_CPU_ISA=scalar, cap_cpu_isa) moves auto to the
// reference lane and refuses the AVX2 lane by name, so an A/B run can force
// every lower lane; restoring the level brings the AVX2 lane back. (Capped
// at avx2 first: a CPU with AVX-512 VNNI prefers its own lane.)
TEST_F(Avx2ScaledMM, DispatchCapForcesTheReferenceLane) {
  cap_cpu_isa(CpuIsa::kAvx2);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_avx2_int8");
  cap_cpu_isa(CpuIsa::kScalar);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_reference");
  try {
    choose_lane(QDType::kInt8, Device::cpu(), "cpu_avx2_int8");
    ADD_FAILURE() << "the AVX2 lane was served below its dispatch level";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a CPU with AVX2"), std::string::npos) << e.what();
  }
  cap_cpu_isa(CpuIsa::kAvx2);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_avx2_int8");
  cap_cpu_isa(cpu_isa_detected());
}

}  // namespace
}  // namespace oasr::quant
