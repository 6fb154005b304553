// The vectorized CPU op bodies against the scalar ones, bit for bit, with
// the dispatch level forced through cap_cpu_isa (core/cpu_features.h): the
// activation, GLU, convolution, LayerNorm, row-dot linear and GEMM bodies
// (softmax and log-softmax: test_cpu_softmax_ops.cc) must return exactly what the
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
#include "ops/cpu/gemm.h"
#include "ops/cpu/layer_norm.h"
#include "ops/cpu/linear_row_dot.h"
#include "ops/cpu_threads.h"
#include "ops/depthwise_conv1d.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "unit/cpu_simd_test_util.h"

namespace oasr {
namespace {

using testing::CpuSimdOps;
using testing::dispatch_levels;
using testing::same_bits;

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
