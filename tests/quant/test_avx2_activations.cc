// The AVX2 epilogue activations (core/activations_avx2.h) must
// return the bits of core/activations.h's scalar functions for every input.
// Checked over strided sweeps of all 2^32 bit patterns (exp: every 257th,
// 16.7 million inputs; each activation: every 1031st, 4.2 million -- every
// sign, exponent and NaN payload class), every float in ranges around the
// branch points, and special values; the sixteen-lane AVX-512 bodies
// (core/activations_avx512.h) likewise where the CPU has them. The disabled
// test runs all 2^32 inputs through every body.
#include "core/activations_avx2.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/activations.h"
#include "core/activations_avx512.h"
#include "core/cpu_features.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"

namespace oasr::quant {
namespace {

constexpr Activation kAllActivations[] = {
    Activation::kNone,     Activation::kRelu,    Activation::kSwish, Activation::kGeluErf,
    Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh};

OASR_AVX2_TARGET void apply8(Activation activation, const float* in, float* out) {
  _mm256_storeu_ps(out, avx2::apply_ps(activation, _mm256_loadu_ps(in)));
}

OASR_AVX2_TARGET void exp8(const float* in, float* out) {
  _mm256_storeu_ps(out, avx2::exp_ps(_mm256_loadu_ps(in)));
}

// avx512::exp_ps on the eight inputs, repeated in both halves of the vector
// (each half is checked through `compare`'s eight lanes: the low half here,
// the high half by exp16_high).
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void exp16_low(const float* in, float* out) {
  const __m256 x = _mm256_loadu_ps(in);
  const __m512 y = avx512::exp_ps(_mm512_insertf32x8(_mm512_castps256_ps512(x), x, 1));
  _mm256_storeu_ps(out, _mm512_castps512_ps256(y));
}
OASR_AVX512_TARGET void exp16_high(const float* in, float* out) {
  const __m256 x = _mm256_loadu_ps(in);
  const __m512 y = avx512::exp_ps(_mm512_insertf32x8(_mm512_castps256_ps512(x), x, 1));
  _mm256_storeu_ps(out, _mm512_extractf32x8_ps(y, 1));
}
// avx512::apply_ps on sixteen inputs.
OASR_AVX512_TARGET void apply16(Activation activation, const float* in, float* out) {
  _mm512_storeu_ps(out, avx512::apply_ps(activation, _mm512_loadu_ps(in)));
}
OASR_AVX512_WARNINGS_ON

struct Mismatch {
  int64_t count = 0;
  float first_input = 0, first_vector = 0, first_scalar = 0;
};

// Compares the vector function (kLanes lanes) with the scalar one over
// `inputs` (any length).
template <size_t kLanes = 8, typename VectorFn, typename ScalarFn>
Mismatch compare(const std::vector<float>& inputs, VectorFn vector_fn, ScalarFn scalar_fn) {
  Mismatch mismatch;
  float in[kLanes], out[kLanes];
  for (size_t i = 0; i < inputs.size(); i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane)
      in[lane] = inputs[std::min(i + lane, inputs.size() - 1)];
    vector_fn(in, out);
    for (size_t lane = 0; lane < kLanes && i + lane < inputs.size(); ++lane) {
      const float scalar = scalar_fn(in[lane]);
      if (float_bits(out[lane]) != float_bits(scalar)) {
        if (mismatch.count == 0) {
          mismatch.first_input = in[lane];
          mismatch.first_vector = out[lane];
          mismatch.first_scalar = scalar;
        }
        ++mismatch.count;
      }
    }
  }
  return mismatch;
}

std::vector<float> strided_sweep(uint32_t stride) {
  std::vector<float> inputs;
  inputs.reserve(static_cast<size_t>((uint64_t{1} << 32) / stride + 1));
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += stride) {
    inputs.push_back(bits_float(static_cast<uint32_t>(bits)));
  }
  return inputs;
}

// Every float in [lo, hi] (same sign), plus the negatives of each.
std::vector<float> dense_range(float lo, float hi) {
  std::vector<float> inputs;
  for (uint32_t bits = float_bits(lo); bits <= float_bits(hi); ++bits) {
    inputs.push_back(bits_float(bits));
    inputs.push_back(-bits_float(bits));
  }
  return inputs;
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  return {0.0f,
          -0.0f,
          inf,
          -inf,
          std::numeric_limits<float>::quiet_NaN(),
          bits_float(0xffc00001u),
          bits_float(0x7f800001u),  // NaN payloads
          std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::denorm_min(),
          std::numeric_limits<float>::max(),
          -std::numeric_limits<float>::max(),
          std::numeric_limits<float>::min(),
          -104.0f,
          -103.99999f,
          -104.00001f,
          0x1.62e42ep6f,
          0x1.62e430p6f,
          -87.0f,
          -1e4f,
          -1.0001e4f,
          9.5f,
          0.625f,
          1.0f,
          3.9192f};
}

// What the CPU has, not the dispatch level (OASR_CPU_ISA may cap that; the
// bodies are called directly here).
bool has_avx512() {
  return cpu_isa_detected() >= CpuIsa::kAvx512Vnni;
}

class Avx2Activations : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  }
};

TEST_F(Avx2Activations, ExpMatchesScalarBits) {
  std::vector<float> inputs = strided_sweep(257);
  for (float x : dense_range(80.0f, 90.0f)) inputs.push_back(x);    // overflow cut
  for (float x : dense_range(100.0f, 106.0f)) inputs.push_back(x);  // underflow cut, subnormals
  for (float x : special_values()) inputs.push_back(x);
  const Mismatch mismatch = compare(inputs, exp8, act::exp_f32);
  EXPECT_EQ(mismatch.count, 0) << "first: exp(" << mismatch.first_input << ") vector "
                               << mismatch.first_vector << " scalar " << mismatch.first_scalar;
}

TEST_F(Avx2Activations, Avx512ExpMatchesScalarBits) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 (VNNI level) on this CPU";
  std::vector<float> inputs = strided_sweep(257);
  for (float x : dense_range(80.0f, 90.0f)) inputs.push_back(x);
  for (float x : dense_range(100.0f, 106.0f)) inputs.push_back(x);
  for (float x : special_values()) inputs.push_back(x);
  for (const auto half : {exp16_low, exp16_high}) {
    const Mismatch mismatch = compare(inputs, half, act::exp_f32);
    EXPECT_EQ(mismatch.count, 0) << "first: exp(" << mismatch.first_input << ") vector "
                                 << mismatch.first_vector << " scalar " << mismatch.first_scalar;
  }
}

// A strided sweep of every sign / exponent / NaN class, every float around
// each function's branch points, and the special values.
std::vector<float> activation_inputs() {
  std::vector<float> inputs = strided_sweep(1031);
  for (float x : dense_range(0.0f, 0x1p-135f)) inputs.push_back(x);    // zero, subnormals
  for (float x : dense_range(0.99f, 1.01f)) inputs.push_back(x);       // erf's cut at 1
  for (float x : dense_range(0.62f, 0.63f)) inputs.push_back(x);       // tanh's at 0.625
  for (float x : dense_range(103.9f, 104.1f)) inputs.push_back(x);     // swish's at -104
  for (float x : dense_range(3.91f, 3.93f)) inputs.push_back(x);       // erf's at 3.92
  for (float x : dense_range(9.49f, 9.51f)) inputs.push_back(x);       // tanh's at 9.5
  for (float x : dense_range(9999.0f, 10001.0f)) inputs.push_back(x);  // the GELUs' at -1e4
  for (float x : special_values()) inputs.push_back(x);
  return inputs;
}

TEST_F(Avx2Activations, EveryActivationMatchesScalarBits) {
  const std::vector<float> inputs = activation_inputs();
  for (Activation activation : kAllActivations) {
    const Mismatch mismatch = compare(
        inputs, [&](const float* in, float* out) { apply8(activation, in, out); },
        [&](float x) { return act::apply(activation, x); });
    EXPECT_EQ(mismatch.count, 0) << activation_name(activation) << "(" << mismatch.first_input
                                 << "): vector " << mismatch.first_vector << " scalar "
                                 << mismatch.first_scalar;
  }
}

TEST_F(Avx2Activations, Avx512EveryActivationMatchesScalarBits) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 (VNNI level) on this CPU";
  std::vector<float> inputs = activation_inputs();
  for (Activation activation : kAllActivations) {
    const Mismatch mismatch = compare<16>(
        inputs, [&](const float* in, float* out) { apply16(activation, in, out); },
        [&](float x) { return act::apply(activation, x); });
    EXPECT_EQ(mismatch.count, 0) << "AVX-512 " << activation_name(activation) << "("
                                 << mismatch.first_input << "): vector " << mismatch.first_vector
                                 << " scalar " << mismatch.first_scalar;
  }
}

// A wrong branch order would show on exactly these: NaN payloads must come
// back unchanged, -inf must give the scalar function's limit.
TEST_F(Avx2Activations, SpecialValuesKeepTheirBits) {
  const std::vector<float> inputs = special_values();
  for (Activation activation : kAllActivations) {
    const Mismatch mismatch = compare(
        inputs, [&](const float* in, float* out) { apply8(activation, in, out); },
        [&](float x) { return act::apply(activation, x); });
    EXPECT_EQ(mismatch.count, 0) << activation_name(activation) << "(" << mismatch.first_input
                                 << ")";
    if (has_avx512()) {
      const Mismatch wide = compare<16>(
          inputs, [&](const float* in, float* out) { apply16(activation, in, out); },
          [&](float x) { return act::apply(activation, x); });
      EXPECT_EQ(wide.count, 0) << "AVX-512 " << activation_name(activation) << "("
                               << wide.first_input << ")";
    }
  }
}

// Every one of the 2^32 inputs, every function (minutes on two cores; run by
// hand with --gtest_also_run_disabled_tests when a vector body changes).
TEST_F(Avx2Activations, DISABLED_EveryFloatEveryActivation) {
  constexpr uint64_t kChunk = uint64_t{1} << 24;
  std::vector<float> inputs(kChunk);
  for (uint64_t first = 0; first < (uint64_t{1} << 32); first += kChunk) {
    for (uint64_t i = 0; i < kChunk; ++i) inputs[i] = bits_float(static_cast<uint32_t>(first + i));
    const Mismatch exp_mismatch = compare(inputs, exp8, act::exp_f32);
    ASSERT_EQ(exp_mismatch.count, 0) << "exp(" << exp_mismatch.first_input << ")";
    if (has_avx512()) {
      for (const auto half : {exp16_low, exp16_high}) {
        const Mismatch wide = compare(inputs, half, act::exp_f32);
        ASSERT_EQ(wide.count, 0) << "AVX-512 exp(" << wide.first_input << ")";
      }
    }
    for (Activation activation : kAllActivations) {
      const Mismatch mismatch = compare(
          inputs, [&](const float* in, float* out) { apply8(activation, in, out); },
          [&](float x) { return act::apply(activation, x); });
      ASSERT_EQ(mismatch.count, 0)
          << activation_name(activation) << "(" << mismatch.first_input << "): vector "
          << mismatch.first_vector << " scalar " << mismatch.first_scalar;
      if (has_avx512()) {
        const Mismatch wide = compare<16>(
            inputs, [&](const float* in, float* out) { apply16(activation, in, out); },
            [&](float x) { return act::apply(activation, x); });
        ASSERT_EQ(wide.count, 0) << "AVX-512 " << activation_name(activation) << "("
                                 << wide.first_input << ")";
      }
    }
  }
}

}  // namespace
}  // namespace oasr::quant
