// quantize_per_token_int8_avx2 (and, at the end, the static quantizer and the
// convolution gather) against DESIGN.md §3's per-token rule, bit
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

#include "core/cpu_features.h"
#include "core/hd.h"
#include "ops/cpu_threads.h"
#include "quant/kernels/cpu/im2col_quantize.h"
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

// ---- static quantization and the convolution gather ---------------------------

// §3's static rule written from the contract: q = rne(x * m_j), clamped, NaN -> 0.
int8_t definition_static(float x, float multiplier) {
  const float v = std::nearbyint(x * multiplier);
  return std::isnan(v) ? 0 : static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
}

// Values that reach every branch of the rule: ties, the clamp, infinities, NaN.
float edge_or_normal(std::mt19937& rng, std::normal_distribution<float>& normal) {
  const float edges[] = {0.5f,   -0.5f,  1.5f,   2.5f,     -2.5f,     126.5f, -126.5f,
                         127.4f, 300.0f, -1e30f, INFINITY, -INFINITY, NAN,    -0.0f};
  return rng() % 8 == 0 ? edges[rng() % (sizeof(edges) / sizeof(edges[0]))] : normal(rng);
}

TEST_F(Avx2Quantize, StaticQuantizeEqualsTheRuleAndTheReference) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  for (int64_t k : {1, 7, 8, 31, 32, 33, 64, 70, 257}) {
    const int64_t m = 37;
    std::vector<float> x(m * k), multiplier(k);
    for (float& v : x) v = edge_or_normal(rng, normal);
    for (float& v : multiplier) v = 0.5f + static_cast<float>(rng() % 100) / 64.0f;
    std::vector<int8_t> q_avx2(m * k, 99), q_reference(m * k, 98);
    quantize_static_int8_avx2(x.data(), multiplier.data(), m, k, q_avx2.data());
    quantize_static_int8_reference(x.data(), multiplier.data(), m, k, q_reference.data());
    for (int64_t i = 0; i < m * k; ++i) {
      ASSERT_EQ(q_avx2[i], definition_static(x[i], multiplier[i % k]))
          << "k " << k << " at " << i << " x " << x[i];
      ASSERT_EQ(q_avx2[i], q_reference[i]) << "k " << k << " at " << i;
    }
  }
}

// The gather by the geometry header's formula: float32 patches (zeros in the
// padding), then the static rule at one multiplier.
std::vector<int8_t> definition_patches(const std::vector<float>& x, const Im2colGeometry& g,
                                       float multiplier) {
  const int64_t patch = g.kernel_h * g.kernel_w * g.channels;
  std::vector<int8_t> out(static_cast<size_t>(g.batch * g.out_h * g.out_w * patch));
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const int64_t row = (b * g.out_h + oy) * g.out_w + ox;
        for (int64_t r = 0; r < g.kernel_h; ++r) {
          for (int64_t s = 0; s < g.kernel_w; ++s) {
            for (int64_t c = 0; c < g.channels; ++c) {
              const int64_t iy = oy * g.stride_h - g.pad_h + r;
              const int64_t ix = ox * g.stride_w - g.pad_w + s;
              const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
              const float value =
                  inside ? x[((b * g.channels + c) * g.height + iy) * g.width + ix] : 0.0f;
              out[row * patch + (r * g.kernel_w + s) * g.channels + c] =
                  definition_static(value, multiplier);
            }
          }
        }
      }
    }
  }
  return out;
}

TEST_F(Avx2Quantize, ConvolutionGatherEqualsQuantizedFloatPatches) {
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 30.0f);
  struct Shape {
    int64_t batch, channels, height, width, kernel, stride, pad;
  };
  // U2++'s second subsampling conv (3x3 / 2, no padding), padded and odd
  // widths around the eight-lane body, one channel, a 1-wide Conv1d-like row.
  for (const Shape& s :
       {Shape{2, 24, 9, 19, 3, 2, 0}, Shape{1, 5, 7, 11, 3, 2, 1}, Shape{3, 8, 6, 16, 3, 1, 1},
        Shape{1, 1, 5, 9, 3, 1, 0}, Shape{2, 3, 1, 23, 1, 1, 0}}) {
    Im2colGeometry g;
    g.batch = s.batch;
    g.channels = s.channels;
    g.height = s.height;
    g.width = s.width;
    g.kernel_h = g.kernel_w = s.kernel;
    g.stride_h = g.stride_w = s.stride;
    g.pad_h = g.pad_w = s.pad;
    g.out_h = (s.height + 2 * s.pad - s.kernel) / s.stride + 1;
    g.out_w = (s.width + 2 * s.pad - s.kernel) / s.stride + 1;
    std::vector<float> x(static_cast<size_t>(s.batch * s.channels * s.height * s.width));
    for (float& v : x) v = edge_or_normal(rng, normal);
    const float multiplier = 1.0f / 0.37f;
    const std::vector<int8_t> want = definition_patches(x, g, multiplier);
    for (CpuIsa level : {CpuIsa::kScalar, CpuIsa::kAvx2}) {
      cap_cpu_isa(level);
      std::vector<int8_t> got(want.size(), 99);
      cpu::im2col_quantize_int8(x.data(), g, multiplier, got.data());
      cap_cpu_isa(cpu_isa_detected());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << cpu_isa_name(level) << " shape c=" << s.channels
                                   << " w=" << s.width << " byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace oasr::quant
