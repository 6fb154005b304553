// quantize_per_token_int8_avx2 against DESIGN.md §3's per-token rule, bit
// for bit: a definition written here (amax, m = 127 / amax, rne, clamp,
// scale = amax / 127) and the cpu_reference lane's body. Random rows of every
// tail length, smoothing on and off, and the edges: all-zero rows (amax
// floor), exact .5 ties, values at the clamp, infinities, NaN, subnormals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/hd.h"
#include "ops/cpu_threads.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"

namespace oasr::quant {
namespace {

// §3, "per token", written from the contract: fp32, each operation rounded
// once, rne via nearbyint (default rounding mode), NaN quantizes to 0.
void definition_quantize(const std::vector<float>& x, const float* smooth_inv, int64_t m, int64_t k,
                         std::vector<int8_t>& q, std::vector<float>& scale) {
  q.assign(m * k, 0);
  scale.assign(m, 0.0f);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<float> smoothed(k);
    float amax = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      smoothed[j] = smooth_inv ? x[r * k + j] * smooth_inv[j] : x[r * k + j];
      if (std::fabs(smoothed[j]) > amax) amax = std::fabs(smoothed[j]);
    }
    amax = std::max(amax, 1e-8f);
    const float multiplier = 127.0f / amax;
    for (int64_t j = 0; j < k; ++j) {
      const float v = std::nearbyint(smoothed[j] * multiplier);
      q[r * k + j] = std::isnan(v) ? 0 : static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
    scale[r] = amax / 127.0f;
  }
}

struct Case {
  int64_t m, k;
  bool smooth;
};

class Avx2Quantize : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2+FMA on this CPU";
    ops::set_cpu_threads(2);
  }
  void TearDown() override { ops::set_cpu_threads(0); }

  // Runs all three and requires identical bits.
  void expect_same(const std::vector<float>& x, const std::vector<float>* smooth_inv, int64_t m,
                   int64_t k, const std::string& what) {
    const float* smooth = smooth_inv ? smooth_inv->data() : nullptr;
    std::vector<int8_t> q_avx2(m * k, 99), q_reference(m * k), q_definition;
    std::vector<float> s_avx2(m, -1.0f), s_reference(m), s_definition;
    quantize_per_token_int8_avx2(x.data(), smooth, m, k, q_avx2.data(), s_avx2.data());
    quantize_per_token_int8_reference(x.data(), smooth, m, k, q_reference.data(),
                                      s_reference.data());
    definition_quantize(x, smooth, m, k, q_definition, s_definition);
    for (int64_t i = 0; i < m * k; ++i) {
      ASSERT_EQ(q_avx2[i], q_definition[i])
          << what << ": q at row " << i / k << " col " << i % k << " x " << x[i];
      ASSERT_EQ(q_avx2[i], q_reference[i]) << what << ": q at " << i;
    }
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_EQ(float_bits(s_avx2[r]), float_bits(s_definition[r])) << what << ": scale row " << r;
      ASSERT_EQ(float_bits(s_avx2[r]), float_bits(s_reference[r])) << what << ": scale row " << r;
    }
  }
};

TEST_F(Avx2Quantize, RandomRowsEveryTailLength) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> smooth_dist(0.05f, 4.0f);
  std::vector<Case> cases;
  for (int64_t k = 1; k <= 70; ++k) cases.push_back({3, k, k % 2 == 0});
  for (int64_t k : {255, 256, 257, 1024, 2048}) {
    cases.push_back({17, k, false});
    cases.push_back({17, k, true});
  }
  // Large enough to be split over the lane's threads (row chunks).
  cases.push_back({250, 1024, false});
  cases.push_back({250, 256, true});
  for (const Case& c : cases) {
    std::vector<float> x(c.m * c.k), smooth(c.k);
    for (float& v : x) v = normal(rng);
    for (float& v : smooth) v = smooth_dist(rng);
    expect_same(
        x, c.smooth ? &smooth : nullptr, c.m, c.k,
        "m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) + (c.smooth ? " smooth" : ""));
  }
}

// amax = 127 makes m = 1 exactly, so x itself is rounded: .5 ties must go to
// even (2.5 -> 2, 3.5 -> 4, -0.5 -> -0), and 127 stays 127.
TEST_F(Avx2Quantize, TiesRoundToEven) {
  const int64_t k = 40;
  std::vector<float> x(k);
  for (int64_t j = 0; j < k; ++j) x[j] = static_cast<float>(j - 20) + 0.5f;
  x[0] = 127.0f;
  x[1] = -127.0f;
  expect_same(x, nullptr, 1, k, "ties");
  std::vector<int8_t> q(k);
  float scale;
  quantize_per_token_int8_avx2(x.data(), nullptr, 1, k, q.data(), &scale);
  EXPECT_EQ(q[22], 2);   // 2.5
  EXPECT_EQ(q[23], 4);   // 3.5
  EXPECT_EQ(q[20], 0);   // 0.5
  EXPECT_EQ(q[19], 0);   // -0.5
  EXPECT_EQ(q[18], -2);  // -1.5
}

TEST_F(Avx2Quantize, EdgeRows) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t k = 37;  // vector body plus a scalar tail
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(k, 0.0f));      // amax floor
  rows.push_back(std::vector<float>(k, 1e-12f));    // below the floor
  rows.push_back(std::vector<float>(k, 1e-41f));    // subnormals
  rows.push_back(std::vector<float>(k, -3.0e38f));  // huge
  std::vector<float> with_inf(k, 1.0f);
  with_inf[5] = inf, with_inf[33] = -inf;  // m = 0: 0*inf = NaN -> 0
  rows.push_back(with_inf);
  std::vector<float> with_nan(k, 2.0f);
  with_nan[3] = nan, with_nan[35] = nan, with_nan[8] = -7.0f;  // NaN skipped by amax
  rows.push_back(with_nan);
  std::vector<float> signed_zero(k, -0.0f);
  signed_zero[9] = 1.0f;
  rows.push_back(signed_zero);
  for (size_t i = 0; i < rows.size(); ++i) {
    expect_same(rows[i], nullptr, 1, k, "edge row " + std::to_string(i));
    std::vector<float> smooth(k, 0.5f);
    expect_same(rows[i], &smooth, 1, k, "edge row smoothed " + std::to_string(i));
  }
}

// A NaN must not wipe out the maximum found so far (a max that returned the
// NaN would, in vector code, replace an earlier lane maximum by whatever
// follows it): the large value sits in the lane the NaNs pass through later.
TEST_F(Avx2Quantize, NanDoesNotHideAnEarlierMaximum) {
  const int64_t k = 96;
  std::vector<float> x(k, 0.5f);
  x[2] = 100.0f;
  for (int64_t j = 10; j < k; j += 8) x[j] = std::numeric_limits<float>::quiet_NaN();
  expect_same(x, nullptr, 1, k, "nan after max");
  std::vector<int8_t> q(k);
  float scale;
  quantize_per_token_int8_avx2(x.data(), nullptr, 1, k, q.data(), &scale);
  EXPECT_EQ(scale, 100.0f / 127.0f);
  EXPECT_EQ(q[2], 127);
  EXPECT_EQ(q[10], 0);
}

TEST_F(Avx2Quantize, EmptyShapesWriteNothing) {
  std::vector<float> x(4, 1.0f), scale(1, -5.0f);
  std::vector<int8_t> q(4, 9);
  quantize_per_token_int8_avx2(x.data(), nullptr, 0, 4, q.data(), scale.data());
  EXPECT_EQ(q[0], 9);
  EXPECT_EQ(scale[0], -5.0f);
  quantize_per_token_int8_avx2(x.data(), nullptr, 1, 0, q.data(), scale.data());
  EXPECT_EQ(scale[0], 1e-8f / 127.0f);  // an empty row has amax = the floor
}

}  // namespace
}  // namespace oasr::quant
