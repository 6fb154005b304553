// The vectorized CPU op bodies against the scalar ones, bit for bit, with
// the dispatch level forced through cap_cpu_isa (core/cpu_features.h): the
// AVX2 softmax, activation and row-dot linear must return exactly what the
// scalar loops return (each body follows the order its header defines), for
// any thread count and any batch composition. Correctness of the definitions
// themselves is checked against float64 arithmetic written here (and, for
// softmax and linear, against PyTorch in tests/oracle/test_ops_basic.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/activations.h"
#include "core/cpu_features.h"
#include "core/float_types.h"
#include "ops/activation.h"
#include "ops/cpu/conv2d.h"
#include "ops/cpu/exact_quotient.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/layer_norm.h"
#include "ops/cpu/linear_row_dot.h"
#include "ops/cpu/log_softmax.h"
#include "ops/cpu/softmax.h"
#include "ops/cpu_threads.h"
#include "ops/depthwise_conv1d.h"
#include "ops/gemm.h"
#include "ops/glu.h"

namespace oasr {
namespace {

class CpuSimdOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu_isa_detected() < CpuIsa::kAvx2) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  }
  void TearDown() override {
    cap_cpu_isa(cpu_isa_detected());
    ops::set_cpu_threads(0);
  }
};

// Every dispatch level this CPU runs (AVX2 is there: SetUp skips otherwise).
std::vector<CpuIsa> dispatch_levels() {
  std::vector<CpuIsa> levels = {CpuIsa::kScalar, CpuIsa::kAvx2};
  if (cpu_isa_detected() >= CpuIsa::kAvx512Vnni) levels.push_back(CpuIsa::kAvx512Vnni);
  // amx_int8 has no float bodies of its own: its run checks that the level
  // above AVX-512 VNNI keeps the AVX-512 ones.
  if (cpu_isa_detected() >= CpuIsa::kAmxInt8) levels.push_back(CpuIsa::kAmxInt8);
  return levels;
}

bool same_bits(float a, float b) {
  return float_bits(a) == float_bits(b);
}

std::vector<float> run_softmax(CpuIsa level, const std::vector<float>& x,
                               const std::vector<uint8_t>* keep, int64_t rows, int64_t length) {
  cap_cpu_isa(level);
  std::vector<float> out(x.size(), -1.0f);
  ops::cpu::softmax_f32(x.data(), keep == nullptr ? nullptr : keep->data(), out.data(), rows,
                        length, 1);
  return out;
}

TEST_F(CpuSimdOps, SoftmaxVectorEqualsScalarBits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t length : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 250, 1500}) {
    const int64_t rows = 12;
    std::vector<float> x(rows * length);
    for (float& v : x) v = normal(rng);
    // Rows with special values: a NaN with a payload, -inf entries, +inf, all -inf.
    x[1 * length + length / 2] = bits_float(0x7fc01234u);
    x[2 * length] = -inf;
    x[3 * length + length - 1] = inf;
    for (int64_t l = 0; l < length; ++l) x[4 * length + l] = -inf;
    x[5 * length] = -0.0f;
    // A zero maximum of both signs; exponentials that underflow to zero and
    // to subnormals.
    for (int64_t l = 0; l < length; ++l) x[8 * length + l] = -std::abs(x[8 * length + l]);
    x[8 * length] = -0.0f;
    x[8 * length + length - 1] = 0.0f;
    for (int64_t l = 0; l < length; ++l) x[9 * length + l] = l % 3 == 0 ? -200.0f : -95.0f + l % 7;
    x[9 * length + length / 2] = 0.0f;
    std::vector<uint8_t> keep(x.size());
    for (auto& k : keep) k = rng() % 4 != 0;
    for (int64_t l = 0; l < length; ++l) keep[6 * length + l] = 0;  // nothing kept
    keep[7 * length + length - 1] = 1;
    x[7 * length + length - 1] = nan;  // a kept NaN in the tail
    for (const std::vector<uint8_t>* mask : {static_cast<const std::vector<uint8_t>*>(nullptr),
                                             static_cast<const std::vector<uint8_t>*>(&keep)}) {
      const auto scalar = run_softmax(CpuIsa::kScalar, x, mask, rows, length);
      for (CpuIsa level : dispatch_levels()) {
        const auto vector = run_softmax(level, x, mask, rows, length);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_TRUE(same_bits(scalar[i], vector[i]))
              << cpu_isa_name(level) << " length " << length << (mask ? " masked" : "") << " row "
              << i / length << " col " << i % length << ": scalar " << scalar[i] << " vector "
              << vector[i];
        }
      }
    }
  }
}

// Log-softmax: every body the bits of the scalar one, on rows of every
// tail length, with NaN payloads, infinities, a zero maximum of both signs
// and exponentials that underflow; and close to float64 arithmetic.
TEST_F(CpuSimdOps, LogSoftmaxVectorEqualsScalarBits) {
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t length : {1, 7, 8, 9, 15, 16, 17, 31, 33, 250, 5002}) {
    const int64_t rows = 9;
    std::vector<float> x(rows * length);
    for (float& v : x) v = normal(rng);
    x[1 * length + length / 2] = bits_float(0x7fc01234u);
    x[1 * length + length - 1] = bits_float(0xffc00042u);  // a second NaN, later
    x[2 * length] = -inf;
    x[3 * length + length - 1] = inf;
    for (int64_t l = 0; l < length; ++l) x[4 * length + l] = -inf;
    for (int64_t l = 0; l < length; ++l) x[5 * length + l] = -std::abs(x[5 * length + l]);
    x[5 * length] = -0.0f;
    x[5 * length + length - 1] = 0.0f;
    for (int64_t l = 0; l < length; ++l) x[6 * length + l] = l % 3 == 0 ? -200.0f : -95.0f + l % 7;
    x[6 * length + length / 2] = 0.0f;
    std::vector<float> scalar(x.size());
    cap_cpu_isa(CpuIsa::kScalar);
    ops::cpu::log_softmax_f32(x.data(), scalar.data(), rows, length, 1);
    for (CpuIsa level : dispatch_levels()) {
      cap_cpu_isa(level);
      std::vector<float> vector(x.size(), -1.0f);
      ops::cpu::log_softmax_f32(x.data(), vector.data(), rows, length, 1);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(same_bits(scalar[i], vector[i]))
            << cpu_isa_name(level) << " length " << length << " row " << i / length << " col "
            << i % length << ": scalar " << scalar[i] << " vector " << vector[i];
      }
    }
    // Row 0 (plain normal values) against float64: within 2e-6 absolute.
    float m = -inf;
    double total = 0;
    for (int64_t l = 0; l < length; ++l) m = std::max(m, x[l]);
    for (int64_t l = 0; l < length; ++l) total += std::exp(static_cast<double>(x[l] - m));
    for (int64_t l = 0; l < length; ++l) {
      ASSERT_NEAR(scalar[l], static_cast<double>(x[l] - m) - std::log(total), 2e-6) << l;
    }
    ASSERT_TRUE(std::isnan(scalar[1 * length])) << "a NaN makes its row NaN";
  }
}

#if defined(__x86_64__)
// ops/cpu/exact_quotient.h on lanes of (e, total) pairs.
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void exact_quotients_avx512(const float* e, const double* total, float* out) {
  const __m512d t = _mm512_loadu_pd(total);
  const __m512d r = _mm512_div_pd(_mm512_set1_pd(1.0), t);
  const __m512d e8 = _mm512_cvtps_pd(_mm256_loadu_ps(e));
  _mm256_storeu_ps(out, _mm512_cvtpd_ps(ops::cpu::exact_quotient_pd(e8, r, t)));
}
OASR_AVX512_WARNINGS_ON
OASR_AVX2_TARGET void exact_quotients_avx2(const float* e, const double* total, float* out) {
  const __m256d t = _mm256_loadu_pd(total);
  const __m256d r = _mm256_div_pd(_mm256_set1_pd(1.0), t);
  const __m256d e4 = _mm256_cvtps_pd(_mm_loadu_ps(e));
  _mm_storeu_ps(out, _mm256_cvtpd_ps(ops::cpu::exact_quotient_pd(e4, r, t)));
}

// Softmax's quotient float(double(e) / total) by the reciprocal and the
// check, against the division, on quotients placed on, and one to four
// double ulps either side of, float rounding midpoints (where a plain
// multiply by 1 / total does round differently: counted, so the cases are
// known to be the hard ones), also between float subnormals.
TEST_F(CpuSimdOps, ExactQuotientEqualsTheDivisionAtFloatMidpoints) {
  std::mt19937_64 rng(41);
  std::vector<float> e;
  std::vector<double> total;
  for (int i = 0; i < 200000; ++i) {
    // A midpoint between a float q in [2^-40, 1) and the next one up.
    const float q = std::ldexp(1.0f + static_cast<float>(rng() % (1u << 23)) * 0x1p-23f,
                               -1 - static_cast<int>(rng() % 40));
    const double midpoint = (static_cast<double>(q) + std::nextafter(q, 2.0f)) / 2;
    // e in [q, 1], total = e / midpoint nudged by whole ulps: e / total then
    // lies on or just beside the midpoint.
    const float numerator = std::min(1.0f, q * (1.0f + static_cast<float>(rng() % 1000)));
    double t = static_cast<double>(numerator) / midpoint;
    const int nudge = static_cast<int>(rng() % 9) - 4;
    for (int k = 0; k < std::abs(nudge); ++k) t = std::nextafter(t, nudge > 0 ? 1e300 : 0.0);
    e.push_back(numerator);
    total.push_back(t);
  }
  for (int i = 0; i < 40000; ++i) {
    // Midpoints between float subnormals, (k + 1/2) 2^-149, and the smallest
    // normals: e / total placed on and beside them the same way.
    const double midpoint = (static_cast<double>(rng() % (1u << 24)) + 0.5) * 0x1p-149;
    const double scale = 1.0 + static_cast<double>(rng() % 100000) / 7.0;
    const float numerator = static_cast<float>(midpoint * scale);
    if (numerator == 0.0f) continue;
    double t = static_cast<double>(numerator) / midpoint;
    const int nudge = static_cast<int>(rng() % 9) - 4;
    for (int k = 0; k < std::abs(nudge); ++k) t = std::nextafter(t, nudge > 0 ? 1e300 : 0.0);
    e.push_back(numerator);
    total.push_back(t);
  }
  e.push_back(0.0f);
  total.push_back(3.0);
  while (e.size() % 8 != 0) {
    e.push_back(0.5f);
    total.push_back(1.5);
  }
  int64_t plain_multiply_wrong = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const float expected = static_cast<float>(static_cast<double>(e[i]) / total[i]);
    if (!same_bits(static_cast<float>(static_cast<double>(e[i]) * (1.0 / total[i])), expected)) {
      ++plain_multiply_wrong;
    }
  }
  EXPECT_GT(plain_multiply_wrong, 1000) << "the cases do not reach the midpoints";
  const auto check = [&](const char* body, size_t lanes, auto&& run) {
    std::vector<float> out(lanes);
    for (size_t i = 0; i < e.size(); i += lanes) {
      run(&e[i], &total[i], out.data());
      for (size_t j = 0; j < lanes; ++j) {
        const float expected = static_cast<float>(static_cast<double>(e[i + j]) / total[i + j]);
        ASSERT_TRUE(same_bits(out[j], expected))
            << body << ": " << e[i + j] << " / " << total[i + j] << " gave " << out[j]
            << ", the division " << expected;
      }
    }
  };
  check("avx2", 4, exact_quotients_avx2);
  if (cpu_isa_detected() >= CpuIsa::kAvx512Vnni) check("avx512", 8, exact_quotients_avx512);
}
#endif

// The definition against float64: within 2 ulps of exp(x - m) / sum, where
// x - m is the float32 difference the definition (and PyTorch) takes and
// the rest is exact (exp_f32 is within 1 ulp; sum and quotient in double).
TEST_F(CpuSimdOps, SoftmaxMatchesFloat64) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t rows = 4, length = 1500;
  std::vector<float> x(rows * length);
  for (float& v : x) v = normal(rng);
  for (CpuIsa level : dispatch_levels()) {
    const auto out = run_softmax(level, x, nullptr, rows, length);
    for (int64_t r = 0; r < rows; ++r) {
      float m = -INFINITY;
      double s = 0;
      for (int64_t l = 0; l < length; ++l) m = std::max(m, x[r * length + l]);
      for (int64_t l = 0; l < length; ++l) s += std::exp(double(x[r * length + l] - m));
      for (int64_t l = 0; l < length; ++l) {
        const double expected = std::exp(double(x[r * length + l] - m)) / s;
        const double ulp = std::ldexp(1.0, std::ilogb(float(expected)) - 23);
        ASSERT_LE(std::abs(out[r * length + l] - expected), 2 * ulp) << r << "," << l;
      }
    }
  }
}

TEST_F(CpuSimdOps, SoftmaxRowsDoNotDependOnThreadsOrNeighbours) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t rows = 64, length = 1500;
  std::vector<float> x(rows * length);
  for (float& v : x) v = normal(rng);
  ops::set_cpu_threads(1);
  const auto one = run_softmax(CpuIsa::kAvx2, x, nullptr, rows, length);
  ops::set_cpu_threads(3);
  const auto three = run_softmax(CpuIsa::kAvx2, x, nullptr, rows, length);
  const std::vector<float> row(x.begin() + 17 * length, x.begin() + 18 * length);
  const auto alone = run_softmax(CpuIsa::kAvx2, row, nullptr, 1, length);
  for (int64_t i = 0; i < rows * length; ++i) ASSERT_TRUE(same_bits(one[i], three[i])) << i;
  for (int64_t l = 0; l < length; ++l) ASSERT_TRUE(same_bits(alone[l], one[17 * length + l]));
}

TEST_F(CpuSimdOps, ActivationOpVectorEqualsScalarBits) {
  std::mt19937 rng(11);
  std::vector<float> x(100003);  // chunks over the pool plus an odd tail
  for (float& v : x) v = bits_float(static_cast<uint32_t>(rng()));
  for (size_t i = 0; i < 64; ++i) x[i] = std::ldexp(static_cast<float>(i) - 32.0f, -2);
  for (Activation activation : {Activation::kRelu, Activation::kSwish, Activation::kGeluErf,
                                Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh}) {
    // 5 and 21: a tail shorter than one vector, and one after a whole 16-lane vector.
    for (int64_t n : {int64_t{5}, int64_t{21}, static_cast<int64_t>(x.size())}) {
      const Tensor in = Tensor::from_vector(std::vector<float>(x.begin(), x.begin() + n), {n});
      cap_cpu_isa(CpuIsa::kScalar);
      const Tensor scalar = ops::activation(in, activation);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(scalar.data<float>()[i], act::apply(activation, x[i])));
      }
      for (CpuIsa level : dispatch_levels()) {
        cap_cpu_isa(level);
        const Tensor vector = ops::activation(in, activation);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(same_bits(scalar.data<float>()[i], vector.data<float>()[i]))
              << activation_name(activation) << "(" << x[i] << ") at " << cpu_isa_name(level);
        }
      }
    }
  }
}

// The conformer's GLU + depthwise convolution, channels-last, written here
// from its definition (ops/cpu/depthwise_conv1d.h: taps in increasing k from
// +0.0f, product and sum each rounded, taps on the padding skipped, bias
// last; GLU a * sigmoid(b) with the shared sigmoid).
std::vector<float> glu_depthwise_definition(const std::vector<float>& x,
                                            const std::vector<float>& w,
                                            const std::vector<float>* bias, int64_t batch,
                                            int64_t length, int64_t channels, int64_t kernel,
                                            int64_t left, int64_t out_length) {
  std::vector<float> out(batch * out_length * channels);
  auto gated = [&](int64_t b, int64_t t, int64_t c) {
    const float* row = x.data() + (b * length + t) * 2 * channels;
    return row[c] * act::sigmoid(row[channels + c]);
  };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < out_length; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        float sum = 0.0f;
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t source = t + k - left;
          if (source < 0 || source >= length) continue;
          const float product = w[c * kernel + k] * gated(b, source, c);
          sum = sum + product;
        }
        out[(b * out_length + t) * channels + c] = bias != nullptr ? sum + (*bias)[c] : sum;
      }
    }
  }
  return out;
}

TEST_F(CpuSimdOps, GluDepthwiseChannelsLastFollowsTheDefinitionAndTheComposition) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    int64_t batch, length, channels, kernel, left, right;
  };
  // Offline (symmetric) and causal padding, a channel tail past the vector
  // width, a signal shorter than the kernel, no padding at all.
  for (const Case& c : {Case{3, 53, 256, 15, 7, 7}, Case{2, 41, 13, 15, 14, 0},
                        Case{1, 5, 24, 15, 7, 7}, Case{2, 70, 9, 3, 0, 0}}) {
    std::vector<float> x(c.batch * c.length * 2 * c.channels);
    std::vector<float> w(c.channels * c.kernel);
    std::vector<float> bias(c.channels);
    for (float& v : x) v = normal(rng);
    for (float& v : w) v = normal(rng) * 0.2f;
    for (float& v : bias) v = normal(rng);
    x[3] = nan;
    x[2 * c.channels + 1] = inf;
    x[x.size() - 1] = -inf;  // a gate at -inf: sigmoid 0
    const int64_t out_length = c.length + c.left + c.right - c.kernel + 1;
    const Tensor xt = Tensor::from_vector(x, {c.batch, c.length, 2 * c.channels});
    const Tensor wt = Tensor::from_vector(w, {c.channels, 1, c.kernel});
    const Tensor bt = Tensor::from_vector(bias, {c.channels});
    for (bool with_bias : {true, false}) {
      const std::vector<float> expected =
          glu_depthwise_definition(x, w, with_bias ? &bias : nullptr, c.batch, c.length, c.channels,
                                   c.kernel, c.left, out_length);
      const Tensor b = with_bias ? bt : Tensor();
      cap_cpu_isa(CpuIsa::kScalar);
      const Tensor gated = ops::glu(xt, -1).transpose(1, 2).contiguous();
      const Tensor composed =
          ops::depthwise_conv1d(gated, wt, b, c.left, c.right).transpose(1, 2).contiguous();
      for (CpuIsa level : {CpuIsa::kScalar, CpuIsa::kAvx2}) {
        for (int threads : {1, 2}) {
          cap_cpu_isa(level);
          ops::set_cpu_threads(threads);
          const Tensor fused = ops::glu_depthwise_conv1d_channels_last(xt, wt, b, c.left, c.right);
          ASSERT_EQ(fused.shape(), (Shape{c.batch, out_length, c.channels}));
          for (size_t i = 0; i < expected.size(); ++i) {
            ASSERT_TRUE(same_bits(fused.data<float>()[i], expected[i]))
                << "element " << i << " level " << static_cast<int>(level) << " threads " << threads
                << ": " << fused.data<float>()[i] << " vs " << expected[i];
            ASSERT_TRUE(same_bits(fused.data<float>()[i], composed.data<float>()[i])) << i;
          }
        }
      }
    }
  }
}

// ops/cpu/conv2d.h's definition: each output an fma chain over (ci, i, j) in
// that order from +0 (ops/cpu/gemm.h's order over the im2col rows), taps
// outside the image contributing fma(w, +0, c); the bias added last.
std::vector<float> conv2d_definition(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& bias,
                                     const ops::cpu::Conv2dShape& s) {
  std::vector<float> out(s.batch * s.out_channels * s.out_h * s.out_w);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t co = 0; co < s.out_channels; ++co) {
      for (int64_t oy = 0; oy < s.out_h; ++oy) {
        for (int64_t ox = 0; ox < s.out_w; ++ox) {
          float c = 0.0f;
          for (int64_t ci = 0; ci < s.in_channels; ++ci) {
            for (int64_t i = 0; i < s.kernel_h; ++i) {
              for (int64_t j = 0; j < s.kernel_w; ++j) {
                const int64_t iy = oy * s.stride_h - s.pad_h + i;
                const int64_t ix = ox * s.stride_w - s.pad_w + j;
                const bool inside = iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w;
                const float v =
                    inside ? x[((n * s.in_channels + ci) * s.in_h + iy) * s.in_w + ix] : 0.0f;
                c = std::fma(w[((co * s.in_channels + ci) * s.kernel_h + i) * s.kernel_w + j], v,
                             c);
              }
            }
          }
          out[((n * s.out_channels + co) * s.out_h + oy) * s.out_w + ox] =
              bias.empty() ? c : c + bias[co];
        }
      }
    }
  }
  return out;
}

TEST_F(CpuSimdOps, Conv2dFollowsTheDefinitionBitForBit) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto shape = [](int64_t batch, int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t kernel,
                  int64_t stride, int64_t pad) {
    ops::cpu::Conv2dShape s{batch, cin, h, w, cout, kernel, kernel, stride, stride, pad, pad, 0, 0};
    s.out_h = (h + 2 * pad - kernel) / stride + 1;
    s.out_w = (w + 2 * pad - kernel) / stride + 1;
    return s;
  };
  // The U2++ subsampling's second conv (3x3 / 2, 256 channels: K = 2304, so
  // 200 input rows need two im2col bands), a padded odd shape whose pixels
  // end mid-panel, one input channel, and a 1x1 kernel read in place.
  for (const ops::cpu::Conv2dShape& s :
       {shape(1, 256, 200, 39, 4, 3, 2, 0), shape(2, 3, 11, 9, 5, 3, 1, 1),
        shape(2, 1, 40, 80, 7, 3, 2, 0), shape(1, 6, 5, 7, 3, 1, 1, 0)}) {
    std::vector<float> x(s.batch * s.in_channels * s.in_h * s.in_w);
    std::vector<float> w(s.out_channels * s.in_channels * s.kernel_h * s.kernel_w);
    std::vector<float> bias(s.out_channels);
    for (float& v : x) v = normal(rng);
    for (float& v : w) v = normal(rng);
    for (float& v : bias) v = normal(rng);
    for (bool with_bias : {true, false}) {
      const std::vector<float> no_bias;
      const std::vector<float> expected = conv2d_definition(x, w, with_bias ? bias : no_bias, s);
      for (CpuIsa level : dispatch_levels()) {
        for (int threads : {1, 2}) {
          cap_cpu_isa(level);
          ops::set_cpu_threads(threads);
          std::vector<float> out(expected.size(), -1.0f);
          ops::cpu::conv2d_f32(x.data(), w.data(), with_bias ? bias.data() : nullptr, out.data(),
                               s);
          for (size_t i = 0; i < expected.size(); ++i) {
            ASSERT_TRUE(same_bits(out[i], expected[i]))
                << "output " << i << " of conv " << s.in_channels << "x" << s.in_h << "x" << s.in_w
                << " level " << static_cast<int>(level) << " threads " << threads;
          }
        }
      }
    }
  }
}

// ops/cpu/layer_norm.cc's definition, one row: double sums in order, one
// rounding at the end.
void layer_norm_definition(const float* x, const float* w, const float* b, float* out,
                           int64_t features, float eps) {
  double sum = 0.0;
  for (int64_t d = 0; d < features; ++d) sum += static_cast<double>(x[d]);
  const double mean = sum / static_cast<double>(features);
  double squares = 0.0;
  for (int64_t d = 0; d < features; ++d) {
    const double centered = static_cast<double>(x[d]) - mean;
    squares += centered * centered;
  }
  const double rstd =
      1.0 / std::sqrt(squares / static_cast<double>(features) + static_cast<double>(eps));
  for (int64_t d = 0; d < features; ++d) {
    out[d] =
        static_cast<float>(((static_cast<double>(x[d]) - mean) * rstd) * static_cast<double>(w[d]) +
                           static_cast<double>(b[d]));
  }
}

TEST_F(CpuSimdOps, LayerNormRowsFollowTheDefinitionWhateverTheSplit) {
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(3.0f, 2.0f);
  for (const auto& [rows, features] :
       std::vector<std::pair<int64_t, int64_t>>{{1003, 256}, {7, 5}, {66, 384}, {19, 37}}) {
    std::vector<float> x(rows * features), residual(rows * features), w(features), b(features);
    for (float& v : x) v = normal(rng);
    for (float& v : residual) v = normal(rng);
    for (float& v : w) v = normal(rng);
    for (float& v : b) v = normal(rng);
    const float alpha = 0.5f;
    std::vector<float> expected(x.size()), expected_sum(x.size()), expected_added(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      layer_norm_definition(&x[r * features], w.data(), b.data(), &expected[r * features], features,
                            1e-5f);
      for (int64_t d = 0; d < features; ++d) {
        const float scaled = alpha * x[r * features + d];
        expected_sum[r * features + d] = residual[r * features + d] + scaled;
      }
      layer_norm_definition(&expected_sum[r * features], w.data(), b.data(),
                            &expected_added[r * features], features, 1e-5f);
    }
    std::vector<std::pair<CpuIsa, int>> runs;
    for (CpuIsa level : dispatch_levels()) runs.emplace_back(level, 1);
    runs.emplace_back(cpu_isa_detected(), 2);
    for (const auto& [level, threads] : runs) {
      cap_cpu_isa(level);
      ops::set_cpu_threads(threads);
      SCOPED_TRACE(cpu_isa_name(level));
      std::vector<float> out(x.size()), sum(x.size()), added(x.size());
      ops::cpu::layer_norm_f32(x.data(), w.data(), b.data(), out.data(), rows, features, 1e-5f);
      ops::cpu::add_scaled_layer_norm_f32(x.data(), residual.data(), alpha, w.data(), b.data(),
                                          sum.data(), added.data(), rows, features, 1e-5f);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(same_bits(out[i], expected[i])) << "element " << i << " threads " << threads;
        ASSERT_TRUE(same_bits(sum[i], expected_sum[i])) << i;
        ASSERT_TRUE(same_bits(added[i], expected_added[i])) << i;
      }
    }
  }
}

// Rows whose sums are order-sensitive: +2^60 and -2^60 at row-dependent
// features among small values, so that the definition's feature order
// (small values before the +2^60 absorbed, later ones kept) decides the mean,
// and with unit weight and zero bias the outputs show it.
TEST_F(CpuSimdOps, LayerNormSumsKeepFeatureOrder) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 16, features = 40;
  std::vector<float> x(rows * features), w(features, 1.0f), b(features, 0.0f);
  for (float& v : x) v = normal(rng);
  for (int64_t r = 0; r < rows; ++r) {
    x[r * features + 3 + r % 5] = 0x1p60f;
    x[r * features + 11 + r % 7] = -0x1p60f;
  }
  std::vector<float> expected(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    layer_norm_definition(&x[r * features], w.data(), b.data(), &expected[r * features], features,
                          1e-5f);
  }
  for (CpuIsa level : dispatch_levels()) {
    cap_cpu_isa(level);
    std::vector<float> out(x.size());
    ops::cpu::layer_norm_f32(x.data(), w.data(), b.data(), out.data(), rows, features, 1e-5f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(same_bits(out[i], expected[i]))
          << cpu_isa_name(level) << " row " << i / features << " feature " << i % features;
    }
  }
}

struct LinearCase {
  int64_t rows, n, k;
  std::vector<float> x, w, bias;
};

LinearCase random_linear(int64_t rows, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  LinearCase c{rows, n, k, {}, {}, {}};
  c.x.resize(rows * k);
  c.w.resize(n * k);
  c.bias.resize(n);
  for (float& v : c.x) v = normal(rng);
  for (float& v : c.w) v = normal(rng);
  for (float& v : c.bias) v = normal(rng);
  return c;
}

std::vector<float> row_dot(CpuIsa level, const LinearCase& c, bool bias) {
  cap_cpu_isa(level);
  std::vector<float> out(c.rows * c.n);
  ops::cpu::linear_row_dot_f32(c.x.data(), c.w.data(), bias ? c.bias.data() : nullptr, out.data(),
                               c.rows, c.n, c.k);
  return out;
}

TEST_F(CpuSimdOps, RowDotLinearVectorEqualsScalarBits) {
  std::mt19937 rng(13);
  for (auto [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                            {1, 3, 7},
                            {2, 5, 8},
                            {3, 257, 9},
                            {4, 64, 384},
                            {5, 300, 1536},
                            {9, 513, 383}}) {
    const LinearCase c = random_linear(rows, n, k, rng);
    for (bool bias : {false, true}) {
      const auto scalar = row_dot(CpuIsa::kScalar, c, bias);
      const auto vector = row_dot(CpuIsa::kAvx2, c, bias);
      for (size_t i = 0; i < scalar.size(); ++i) {
        ASSERT_TRUE(same_bits(scalar[i], vector[i]))
            << rows << "x" << n << "x" << k << " output " << i << ": " << scalar[i] << " vs "
            << vector[i];
      }
      // The definition is a float32 dot product: within a few ulps of float64
      // relative to the sum of |products|.
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double exact = bias ? c.bias[j] : 0.0, magnitude = std::abs(exact);
          for (int64_t i = 0; i < k; ++i) {
            exact += double(c.x[r * k + i]) * c.w[j * k + i];
            magnitude += std::abs(double(c.x[r * k + i]) * c.w[j * k + i]);
          }
          ASSERT_NEAR(vector[r * n + j], exact, 1e-6 * magnitude + 1e-30);
        }
      }
    }
  }
}

TEST_F(CpuSimdOps, RowDotLinearRowsAreIndependentOfTheBatch) {
  std::mt19937 rng(17);
  const LinearCase batch = random_linear(7, 1000, 384, rng);
  ops::set_cpu_threads(2);
  const auto together = row_dot(CpuIsa::kAvx2, batch, true);
  ops::set_cpu_threads(1);
  for (int64_t r = 0; r < batch.rows; ++r) {
    LinearCase one = batch;
    one.rows = 1;
    one.x.assign(batch.x.begin() + r * batch.k, batch.x.begin() + (r + 1) * batch.k);
    const auto alone = row_dot(CpuIsa::kAvx2, one, true);
    for (int64_t j = 0; j < batch.n; ++j) {
      ASSERT_TRUE(same_bits(alone[j], together[r * batch.n + j])) << "row " << r << " col " << j;
    }
  }
}

// A float16-stored weight gives the bits of the float32 weight with the same
// values (each weight widens exactly before its fma), on both bodies;
// prepare_row_dot_weight takes float16 only when every value is exact.
TEST_F(CpuSimdOps, RowDotLinearFloat16WeightsGiveTheFloat32Bits) {
  std::mt19937 rng(19);
  for (auto [rows, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 7},
                            {3, 257, 9},
                            {5, 300, 384},
                            {2, 33, 1539}}) {
    LinearCase c = random_linear(rows, n, k, rng);
    for (float& v : c.w) v = f16_bits_to_f32(f32_to_f16_bits(v));  // representable
    const Tensor w = Tensor::from_vector(c.w, {n, k});
    const Tensor prepared = ops::prepare_row_dot_weight(w);
    ASSERT_EQ(prepared.dtype(), DType::kF16);
    const Tensor x = Tensor::from_vector(c.x, {rows, k});
    const Tensor bias = Tensor::from_vector(c.bias, {n});
    for (CpuIsa level : {CpuIsa::kScalar, CpuIsa::kAvx2}) {
      const auto reference = row_dot(level, c, true);
      const Tensor half = ops::linear_row_dot(x, prepared, bias);
      const Tensor full = ops::linear_row_dot(x, w, bias);
      for (int64_t i = 0; i < rows * n; ++i) {
        ASSERT_TRUE(same_bits(half.data<float>()[i], reference[i])) << i;
        ASSERT_TRUE(same_bits(full.data<float>()[i], reference[i])) << i;
      }
    }
  }
  std::vector<float> inexact = {1.0f, 0.1f};  // 0.1 is no float16
  EXPECT_EQ(ops::prepare_row_dot_weight(Tensor::from_vector(inexact, {1, 2})).dtype(), DType::kF32);
}

// ---- the float32 GEMM (ops/cpu/gemm.h) ------------------------------------

// The order gemm.h defines, written here as the plain loop: c = +0, then
// c = fma(a[m, k], b[k, n], c) for k = 0 .. K - 1.
std::vector<float> gemm_by_definition(const std::vector<float>& a, const std::vector<float>& b,
                                      bool transpose_b, int64_t m, int64_t n, int64_t k) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t t = 0; t < k; ++t) {
        sum = std::fma(a[i * k + t], transpose_b ? b[j * k + t] : b[t * n + j], sum);
      }
      c[i * n + j] = sum;
    }
  }
  return c;
}

std::vector<float> run_gemm(CpuIsa level, const std::vector<float>& a, const std::vector<float>& b,
                            bool transpose_b, int64_t m, int64_t n, int64_t k) {
  cap_cpu_isa(level);
  std::vector<float> c(static_cast<size_t>(m * n), -7.0f);
  ops::cpu::gemm_f32(a.data(), k, b.data(), transpose_b ? k : n, transpose_b, c.data(), n, m, n, k);
  return c;
}

// Both bodies give the definition's bits, for every edge of the tiling.
TEST_F(CpuSimdOps, GemmBodiesFollowTheDefinitionBitForBit) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
        {1, 17, 3},
        {5, 15, 0},
        {6, 16, 64},
        {7, 33, 257},
        {13, 31, 256},
        {64, 100, 1100},
        // AVX-512's 12 x 32 blocks: row and two-panel tails (a partial second panel)
        {25, 50, 300},
        {12, 32, 40},
        // a [K, N] b past the whole-pack cap (ops/cpu/gemm.cc): packed per block
        {7, 2000, 2100},
        // one row tile or less: b packed per block, transposed or not (a
        // decode step's attention, one query against 1500 keys), and just
        // past one tile (packed whole)
        {1, 1500, 64},
        {1, 64, 1500},
        {48, 40, 300},
        {49, 40, 300},
        {13, 2002, 2100},
        // a U2++ FFN's w_2 at B = 1: wide row tiles, cut finer on many threads
        {250, 256, 2048}}) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& v : a) v = normal(rng);
    for (float& v : b) v = normal(rng);
    for (bool transpose_b : {false, true}) {
      const auto want = gemm_by_definition(a, b, transpose_b, m, n, k);
      for (CpuIsa level : dispatch_levels()) {
        // 16 threads: the tiles shrink until each thread has two (gemm.cc).
        for (int threads : {level == CpuIsa::kScalar ? 1 : 2, 16}) {
          ops::set_cpu_threads(threads);
          const auto got = run_gemm(level, a, b, transpose_b, m, n, k);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_TRUE(same_bits(got[i], want[i]))
                << cpu_isa_name(level) << " " << m << "x" << n << "x" << k << " t=" << transpose_b
                << " threads " << threads << " output " << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

// Batch invariance: a row's bits are the same computed alone or among 40
// rows, and zero-weight keys past its length (a padded probs x values
// product) leave them as they are.
TEST_F(CpuSimdOps, GemmRowsIgnoreTheirNeighboursAndZeroPadding) {
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 40, n = 64, k = 410, padded = 550;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(padded * n));
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  const auto together = run_gemm(CpuIsa::kAvx2, a, b, false, m, n, k);
  std::vector<float> a_padded(static_cast<size_t>(m * padded), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    std::copy(a.begin() + i * k, a.begin() + (i + 1) * k, a_padded.begin() + i * padded);
  }
  ops::set_cpu_threads(2);
  const auto padded_out = run_gemm(CpuIsa::kAvx2, a_padded, b, false, m, n, padded);
  for (int64_t r : {0, 7, 39}) {
    const std::vector<float> row(a.begin() + r * k, a.begin() + (r + 1) * k);
    ops::set_cpu_threads(1);
    const auto alone = run_gemm(CpuIsa::kAvx2, row, b, false, 1, n, k);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(same_bits(alone[j], together[r * n + j])) << "row " << r << " col " << j;
      ASSERT_TRUE(same_bits(alone[j], padded_out[r * n + j])) << "padded row " << r << " col " << j;
    }
  }
}

TEST_F(CpuSimdOps, DispatchCapIsRefusedAboveTheCpu) {
  cap_cpu_isa(CpuIsa::kScalar);
  EXPECT_EQ(cpu_isa(), CpuIsa::kScalar);
  EXPECT_FALSE(cpu_has(CpuIsa::kAvx2));
  cap_cpu_isa(cpu_isa_detected());
  EXPECT_EQ(cpu_isa(), cpu_isa_detected());
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAvx2), "avx2");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAvxVnni), "avx_vnni");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAvx512Vnni), "avx512_vnni");
  EXPECT_STREQ(cpu_isa_name(CpuIsa::kAmxInt8), "amx_int8");
  // The AVX-VNNI level keeps the AVX2 bodies and never the AVX-512 ones; a
  // CPU without AVX-VNNI refuses it, whatever its level (Zen 4 has AVX-512
  // VNNI and no AVX-VNNI).
  if (cpu_reports_avx_vnni()) {
    cap_cpu_isa(CpuIsa::kAvxVnni);
    EXPECT_TRUE(cpu_has(CpuIsa::kAvx2));
    EXPECT_FALSE(cpu_has(CpuIsa::kAvx512Vnni));
    cap_cpu_isa(cpu_isa_detected());
  } else {
    EXPECT_THROW(cap_cpu_isa(CpuIsa::kAvxVnni), Error);
  }
  if (cpu_isa_detected() < CpuIsa::kAvx512Vnni) {
    EXPECT_THROW(cap_cpu_isa(CpuIsa::kAvx512Vnni), Error);
  }
  if (cpu_isa_detected() < CpuIsa::kAmxInt8) {
    EXPECT_THROW(cap_cpu_isa(CpuIsa::kAmxInt8), Error);
  }
}

}  // namespace
}  // namespace oasr
