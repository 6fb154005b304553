// The basic full-precision ops (src/ops: gemm, layer_norm, softmax, glu,
// elementwise, embedding) against PyTorch (gen_ops_basic.py), plus the
// refusals of their fronts. Each oracle test runs every case of its op twice:
// on the inputs as stored, and on non-contiguous views of the same values
// whose gaps hold NaN (so a front that forgot contiguous() poisons the
// result); the two results must be bitwise equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "ops/layer_norm.h"
#include "ops/rms_norm.h"
#include "ops/rotary_embedding.h"
#include "ops/softmax.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using nlohmann::json;
using testing::all_close;
using testing::bit_equal;

constexpr double kUnitRoundoff = 0x1p-24;  // float32: half an ulp of 1

// ---- oracle data ---------------------------------------------------------------

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

std::vector<json> cases_of(const std::string& op) {
  std::vector<json> selected;
  for (const json& c : oracle().cases) {
    if (c.at("op") == op) selected.push_back(c);
  }
  return selected;
}

bool has_role(const json& c, const std::string& role) {
  return oracle().file.contains(c.at("name").get<std::string>() + "/" + role);
}

Tensor role(const json& c, const std::string& name) {
  return oracle().file.get(c.at("name").get<std::string>() + "/" + name);
}

Tensor optional_role(const json& c, const std::string& name) {
  return has_role(c, name) ? role(c, name) : Tensor();
}

// The same values as `t` (float32) in a non-contiguous view: the last
// dimension is followed by two NaN gap elements in every row.
Tensor with_gaps(const Tensor& t) {
  if (!t.defined() || t.dim() == 0) return t;
  Shape padded_shape = t.shape();
  padded_shape.back() += 2;
  Tensor padded = Tensor::full(padded_shape, std::numeric_limits<float>::quiet_NaN());
  Tensor view = padded.slice(-1, 0, t.size(-1));
  view.copy_(t);
  return view;
}

// ---- definition-based magnitudes for the tolerances ---------------------------

// max over outputs of sum_k |a_mk * b_kn| (+ |bias_n|), in double: the scale
// of the rounding error any summation order can make (see Linear below).
double product_magnitude(const Tensor& a_in, const Tensor& b_in, const Tensor& bias_in,
                         bool b_is_nk) {
  const Tensor a = a_in.contiguous();
  const Tensor b = b_in.contiguous();
  const int64_t k = a.size(-1);
  const int64_t m = a.dim() >= 2 ? a.size(-2) : 1;
  const int64_t n = b_is_nk ? b.size(-2) : b.size(-1);
  const int64_t batch = a.numel() == 0 ? 0 : a.numel() / std::max<int64_t>(m * k, 1);
  const bool batched_b = b.dim() == a.dim() && a.dim() > 2;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  double worst = 0.0;
  for (int64_t s = 0; s < batch; ++s) {
    const float* as = pa + s * m * k;
    const float* bs = batched_b ? pb + s * k * n : pb;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double total = bias_in.defined() ? std::fabs(bias_in.item_float({j})) : 0.0;
        for (int64_t l = 0; l < k; ++l) {
          const double bv = b_is_nk ? bs[j * k + l] : bs[l * n + j];
          total += std::fabs(static_cast<double>(as[i * k + l]) * bv);
        }
        worst = std::max(worst, total);
      }
    }
  }
  if (batch == 0 && bias_in.defined()) {  // K = 0 rows still produce the bias
    for (int64_t j = 0; j < bias_in.numel(); ++j) {
      worst = std::max(worst, static_cast<double>(std::fabs(bias_in.item_float({j}))));
    }
  }
  return worst;
}

double max_abs(const Tensor& t) {
  if (!t.defined()) return 0.0;
  const Tensor c = t.contiguous();
  double worst = 0.0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(c.data<float>()[i])));
  }
  return worst;
}

// max over rows of max_d |x_d| / sqrt(var + eps): how much a float32 rounding
// of size u * |x| is amplified by the normalization.
double layer_norm_condition(const Tensor& x_in, double eps) {
  const Tensor x = x_in.contiguous();
  const int64_t d = x.size(-1);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  const float* p = x.data<float>();
  double worst = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0;
    double largest = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      mean += p[r * d + j];
      largest = std::max(largest, std::fabs(static_cast<double>(p[r * d + j])));
    }
    mean /= static_cast<double>(d);
    double var = 0.0;
    for (int64_t j = 0; j < d; ++j) var += (p[r * d + j] - mean) * (p[r * d + j] - mean);
    var /= static_cast<double>(d);
    worst = std::max(worst, largest / std::sqrt(var + eps));
  }
  return worst;
}

// ---- oracle comparisons ----------------------------------------------------------

// Tolerance: each side sums K products in float32 in its own order (OpenBLAS
// here, PyTorch's BLAS there). Any order errs by at most K * u * S, where S is
// sum_k |x_k * w_k| (+ |b|) — that bound is exact for K <= 16. For a random
// walk of rounding errors the typical error of a sequential sum is about
// 0.6 * u * S and blocked sums do better, so 16 * u * S is > 20 standard
// deviations while a dropped bias (|b| ~ 1) or a wrong index is far outside.
TEST(OpsOracle, Linear) {
  const std::vector<json> cases = cases_of("linear");
  ASSERT_GE(cases.size(), 8u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Tensor x = role(c, "x");
    const Tensor weight = role(c, "weight");
    const Tensor bias = optional_role(c, "bias");
    const Tensor out = ops::linear(x, weight, bias);
    const double atol = 16 * kUnitRoundoff * product_magnitude(x, weight, bias, true);
    EXPECT_TRUE(all_close(out, role(c, "expected"), static_cast<float>(atol), 0.0f));
    EXPECT_TRUE(bit_equal(ops::linear(with_gaps(x), with_gaps(weight), with_gaps(bias)), out));
  }
}

TEST(OpsOracle, Matmul) {
  const std::vector<json> cases = cases_of("matmul");
  ASSERT_GE(cases.size(), 6u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const bool transpose_b = c.at("transpose_b").get<bool>();
    const Tensor a = role(c, "a");
    const Tensor b = role(c, "b");
    const Tensor out = ops::matmul(a, b, transpose_b);
    // Same argument and bound as Linear.
    const double atol = 16 * kUnitRoundoff * product_magnitude(a, b, Tensor(), transpose_b);
    EXPECT_TRUE(all_close(out, role(c, "expected"), static_cast<float>(atol), 0.0f));
    EXPECT_TRUE(bit_equal(ops::matmul(with_gaps(a), with_gaps(b), transpose_b), out));
  }
}

// Tolerance: oasr normalizes in double and rounds once; PyTorch accumulates
// mean and variance in float32 and applies y = x * (rstd * w) + (b - mean *
// rstd * w), whose roundings are of size u * |x| * rstd * |w| (large when a
// row has a big common offset) plus u * |b|. 32 * u * (kappa * max|w| +
// max|b|) with kappa = max |x| * rstd covers them with a wide margin; it is
// still ~1e-5 for ordinary rows, where an unbiased variance (a 1/D relative
// change) or a missing bias is far outside.
double layer_norm_atol(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const double weight_scale = weight.defined() ? max_abs(weight) : 1.0;
  return 32 * kUnitRoundoff * (layer_norm_condition(x, eps) * weight_scale + max_abs(bias));
}

TEST(OpsOracle, LayerNorm) {
  const std::vector<json> cases = cases_of("layer_norm");
  ASSERT_GE(cases.size(), 8u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const float eps = c.at("eps").get<float>();
    const Tensor x = role(c, "x");
    const Tensor weight = optional_role(c, "weight");
    const Tensor bias = optional_role(c, "bias");
    const Tensor out = ops::layer_norm(x, weight, bias, eps);
    const double atol = layer_norm_atol(x, weight, bias, eps);
    EXPECT_TRUE(all_close(out, role(c, "expected"), static_cast<float>(atol), 0.0f));
    EXPECT_TRUE(
        bit_equal(ops::layer_norm(with_gaps(x), with_gaps(weight), with_gaps(bias), eps), out));
  }
}

// The CPU body sums the squares in double and rounds once; PyTorch rounds
// the float32 sum, the normalized value and the weighted one: a few ulps of
// each row's largest output, so 64 ulps of the case's largest output bound
// them. Without the weight, with a mean subtracted (LayerNorm) or with the
// square root missing, the offset row alone is off by orders of magnitude.
TEST(OpsOracle, RmsNorm) {
  const std::vector<json> cases = cases_of("rms_norm");
  ASSERT_GE(cases.size(), 9u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const float eps = c.at("eps").get<float>();
    const Tensor x = role(c, "x");
    const Tensor weight = optional_role(c, "weight");
    const Tensor expected = role(c, "expected");
    const Tensor out = ops::rms_norm(x, weight, eps);
    const double atol = 64 * kUnitRoundoff * max_abs(expected);
    EXPECT_TRUE(all_close(out, expected, static_cast<float>(atol), 0.0f));
    EXPECT_TRUE(bit_equal(ops::rms_norm(with_gaps(x), with_gaps(weight), eps), out));
  }
}

// The angle is the same float32 product as PyTorch's; cos / sin are rounded
// from double here and come from PyTorch's float32 kernels there (about an
// ulp apart), so 16 ulps of the case's largest input bound the difference
// (1e-6 measured), while a wrong pairing (adjacent pairs instead of halves),
// a sign or a position off by one is O(1). The frequencies are transformers'
// to two ulps.
TEST(OpsOracle, RotaryEmbedding) {
  const std::vector<json> cases = cases_of("rotary_embedding");
  ASSERT_GE(cases.size(), 4u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Tensor x = role(c, "x");
    const Tensor positions = role(c, "positions");
    const Tensor inv_freq = role(c, "inv_freq");
    const Tensor ours = ops::rotary_inv_freq(x.size(3), c.at("theta").get<float>());
    EXPECT_TRUE(all_close(ours, inv_freq, 0.0f, 2 * kUnitRoundoff));
    const Tensor out = ops::rotary_embedding(x, positions, ours);
    const float tolerance = static_cast<float>(16 * kUnitRoundoff * max_abs(x));
    EXPECT_TRUE(all_close(out, role(c, "expected"), tolerance, 0.0f));
    EXPECT_TRUE(bit_equal(ops::rotary_embedding(with_gaps(x), positions, ours), out));
  }
}

// The sum is plain float32 arithmetic (residual + x, or residual + alpha * x
// with the product rounded first), so it must equal PyTorch's bit for bit;
// the normalized output gets the LayerNorm tolerance, computed on the sum.
TEST(OpsOracle, AddLayerNorm) {
  const std::vector<json> cases = cases_of("add_layer_norm");
  ASSERT_GE(cases.size(), 4u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const float eps = c.at("eps").get<float>();
    const Tensor x = role(c, "x");
    const Tensor residual = role(c, "residual");
    const Tensor weight = role(c, "weight");
    const Tensor bias = role(c, "bias");
    const bool scaled = c.contains("alpha");
    const float alpha = scaled ? c.at("alpha").get<float>() : 1.0f;
    const auto run = [&](const Tensor& xs, const Tensor& rs, const Tensor& ws, const Tensor& bs) {
      return scaled ? ops::add_scaled_layer_norm(xs, rs, alpha, ws, bs, eps)
                    : ops::add_layer_norm(xs, rs, ws, bs, eps);
    };
    const ops::AddLayerNormResult result = run(x, residual, weight, bias);
    const Tensor expected_sum = role(c, "expected_sum");
    EXPECT_TRUE(bit_equal(result.sum, expected_sum));
    const double atol = layer_norm_atol(expected_sum, weight, bias, eps);
    EXPECT_TRUE(all_close(result.normalized, role(c, "expected"), static_cast<float>(atol), 0.0f));
    // The fused result is the unfused pair, bit for bit.
    EXPECT_TRUE(bit_equal(result.normalized, ops::layer_norm(result.sum, weight, bias, eps)));
    const ops::AddLayerNormResult strided =
        run(with_gaps(x), with_gaps(residual), with_gaps(weight), with_gaps(bias));
    EXPECT_TRUE(bit_equal(strided.sum, result.sum));
    EXPECT_TRUE(bit_equal(strided.normalized, result.normalized));
  }
}

// Tolerance: both sides compute exp(x - max) and normalize in float32 (oasr
// sums in double). Measured against a float64 softmax, PyTorch's
// probabilities are within 3.5 u for values above 1e-15, but its vectorized
// exp loses accuracy near underflow (up to ~66 u relative below 1e-15).
// rtol = 16 u (1e-6) keeps a 4x margin above the first; atol = 1e-18 absorbs
// the second (66 u of 1e-15 is 4e-21) and matters for nothing a model sees.
// A 1e-5 relative error in the normalizer, say, is far outside.
constexpr float kSoftmaxRtol = static_cast<float>(16 * kUnitRoundoff);
constexpr float kSoftmaxAtol = 1e-18f;

TEST(OpsOracle, Softmax) {
  const std::vector<json> cases = cases_of("softmax");
  ASSERT_GE(cases.size(), 8u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const int64_t dim = c.at("dim").get<int64_t>();
    const Tensor x = role(c, "x");
    const Tensor out = ops::softmax(x, dim);
    EXPECT_TRUE(all_close(out, role(c, "expected"), kSoftmaxAtol, kSoftmaxRtol));
    EXPECT_TRUE(bit_equal(ops::softmax(with_gaps(x), dim), out));
  }
}

TEST(OpsOracle, MaskedSoftmax) {
  const std::vector<json> cases = cases_of("masked_softmax");
  ASSERT_GE(cases.size(), 5u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const int64_t dim = c.at("dim").get<int64_t>();
    const Tensor x = role(c, "x");
    const Tensor mask = role(c, "mask");
    const Tensor out = ops::masked_softmax(x, mask, dim);
    const Tensor expected = role(c, "expected");
    EXPECT_TRUE(all_close(out, expected, kSoftmaxAtol, kSoftmaxRtol));
    // Masked positions and fully masked rows are exactly 0 in the oracle (no
    // kept probability underflows at these magnitudes), so they must be
    // exactly 0 here too, not merely tiny.
    const float* po = out.data<float>();
    const Tensor expected_c = expected.contiguous();
    const float* pe = expected_c.data<float>();
    int64_t zeros = 0;
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (pe[i] != 0.0f) continue;
      ++zeros;
      EXPECT_EQ(po[i], 0.0f) << "at flat index " << i;
    }
    EXPECT_GT(zeros, 0);
    EXPECT_TRUE(bit_equal(ops::masked_softmax(with_gaps(x), mask, dim), out));
  }
}

// Tolerance: sigmoid = 1 / (1 + exp(-b)) to a few ulp on both sides (each
// side's exp is within ~1 ulp), times a; rtol = 16 * u (1e-6). The atol of
// 1e-30 forgives only underflowed products at saturated gates.
TEST(OpsOracle, Glu) {
  const std::vector<json> cases = cases_of("glu");
  ASSERT_GE(cases.size(), 4u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const int64_t dim = c.at("dim").get<int64_t>();
    const Tensor x = role(c, "x");
    const Tensor out = ops::glu(x, dim);
    EXPECT_TRUE(
        all_close(out, role(c, "expected"), 1e-30f, static_cast<float>(16 * kUnitRoundoff)));
    EXPECT_TRUE(bit_equal(ops::glu(with_gaps(x), dim), out));
  }
}

// Elementwise results are one correctly rounded float32 operation per
// written operation on both sides: bitwise equality is the only tolerance.
TEST(OpsOracle, Elementwise) {
  int64_t seen = 0;
  for (const std::string op : {"add", "mul", "add_scaled", "scale"}) {
    for (const json& c : cases_of(op)) {
      SCOPED_TRACE(c.at("name").get<std::string>());
      ++seen;
      const Tensor expected = role(c, "expected");
      if (op == "scale") {
        const float factor = c.at("factor").get<float>();
        const Tensor x = role(c, "x");
        EXPECT_TRUE(bit_equal(ops::scale(x, factor), expected));
        EXPECT_TRUE(bit_equal(ops::scale(with_gaps(x), factor), expected));
        continue;
      }
      const Tensor a = role(c, "a");
      const Tensor b = role(c, "b");
      const auto run = [&](const Tensor& as, const Tensor& bs) {
        if (op == "add") return ops::add(as, bs);
        if (op == "mul") return ops::mul(as, bs);
        return ops::add_scaled(as, bs, c.at("alpha").get<float>());
      };
      EXPECT_TRUE(bit_equal(run(a, b), expected));
      EXPECT_TRUE(bit_equal(run(with_gaps(a), with_gaps(b)), expected));
    }
  }
  EXPECT_GE(seen, 12);
}

TEST(OpsOracle, Embedding) {
  const std::vector<json> cases = cases_of("embedding");
  ASSERT_GE(cases.size(), 4u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Tensor ids = role(c, "ids");
    const Tensor table = role(c, "table");
    const Tensor expected = role(c, "expected");
    EXPECT_TRUE(bit_equal(ops::embedding(ids, table), expected));
    EXPECT_TRUE(bit_equal(ops::embedding(ids, with_gaps(table)), expected));
  }
}

// ---- refusals (no oracle data needed) ---------------------------------------------

// Runs fn, expects an oasr::Error with `code` whose message contains every fragment.
template <typename Fn>
void expect_error(Fn&& fn, ErrorCode code, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an oasr::Error (" << error_code_name(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message '" << e.what() << "' lacks '" << fragment << "'";
    }
  }
}

Tensor f32(const Shape& shape) {
  return Tensor::full(shape, 0.5f);
}

TEST(OpsRefusals, RmsNorm) {
  expect_error(
      [] {
        ops::rms_norm(f32({2, 4}), f32({3}), 1e-6f);
      },
      ErrorCode::kInvalidArgument, {"rms_norm", "weight must be [4]", "[3]"});
  expect_error(
      [] {
        ops::rms_norm(f32({2, 4}), f32({4}), -1.0f);
      },
      ErrorCode::kInvalidArgument, {"rms_norm", "eps"});
}

TEST(OpsRefusals, RotaryEmbedding) {
  const Tensor positions = Tensor::zeros({2, 3}, DType::kI64);
  const Tensor inv_freq = ops::rotary_inv_freq(4, 10000.0f);
  expect_error(
      [&] {
        ops::rotary_embedding(f32({2, 3, 1, 5}), positions, inv_freq);
      },
      ErrorCode::kInvalidArgument, {"rotary_embedding", "head_dim must be even"});
  expect_error(
      [&] {
        ops::rotary_embedding(f32({2, 3, 4}), positions, inv_freq);
      },
      ErrorCode::kInvalidArgument, {"rotary_embedding", "[B, T, heads, head_dim]"});
  expect_error(
      [&] {
        ops::rotary_embedding(f32({2, 4, 1, 4}), positions, inv_freq);
      },
      ErrorCode::kInvalidArgument, {"positions must be int64 [2, 4]"});
  expect_error(
      [&] {
        ops::rotary_embedding(f32({2, 3, 1, 8}), positions, inv_freq);
      },
      ErrorCode::kInvalidArgument, {"inv_freq must be float32 [4]"});
  expect_error([] { ops::rotary_inv_freq(6, -1.0f); }, ErrorCode::kInvalidArgument, {"rope_theta"});
}

TEST(OpsRefusals, Linear) {
  expect_error(
      [] {
        ops::linear(f32({2, 3}), f32({4, 5}));
      },
      ErrorCode::kInvalidArgument, {"linear", "[2, 3]", "[4, 5]"});
  expect_error(
      [] {
        ops::linear(f32({2, 3}), f32({4, 3}), f32({3}));
      },
      ErrorCode::kInvalidArgument, {"linear", "bias", "[4]", "[3]"});
  expect_error(
      [] {
        ops::linear(f32({2, 3}), f32({12}));
      },
      ErrorCode::kInvalidArgument, {"linear", "weight", "2-d"});
  expect_error(
      [] {
        ops::linear(Tensor(), f32({4, 3}));
      },
      ErrorCode::kInvalidArgument, {"linear", "'x'", "undefined"});
  expect_error(
      [] {
        ops::linear(f32({2, 3}).to(DType::kF16), f32({4, 3}));
      },
      ErrorCode::kUnsupported, {"linear", "float16", "float32"});
  expect_error(
      [] {
        ops::linear(f32({2, 3}), f32({4, 3}).to(DType::kI32));
      },
      ErrorCode::kInvalidArgument, {"linear", "weight", "int32"});
}

TEST(OpsRefusals, Matmul) {
  expect_error(
      [] {
        ops::matmul(f32({2, 3}), f32({2, 3, 4}));
      },
      ErrorCode::kInvalidArgument, {"matmul", "[2, 3]", "[2, 3, 4]"});
  expect_error(
      [] {
        ops::matmul(f32({2, 3, 4}), f32({3, 4, 5}));
      },
      ErrorCode::kInvalidArgument, {"matmul", "batch"});
  expect_error(
      [] {
        ops::matmul(f32({3, 4}), f32({5, 3}), /*transpose_b=*/true);
      },
      ErrorCode::kInvalidArgument, {"matmul", "K=4", "K=3"});
  expect_error([] { ops::matmul(f32({3}), f32({3})); }, ErrorCode::kInvalidArgument,
               {"matmul", "rank"});
}

TEST(OpsRefusals, LayerNorm) {
  expect_error(
      [] {
        ops::layer_norm(f32({2, 4}), f32({3}), Tensor(), 1e-5f);
      },
      ErrorCode::kInvalidArgument, {"layer_norm", "weight", "[4]", "[3]"});
  expect_error(
      [] {
        ops::layer_norm(f32({2, 4}), Tensor(), f32({4, 1}), 1e-5f);
      },
      ErrorCode::kInvalidArgument, {"layer_norm", "bias", "[4, 1]"});
  expect_error(
      [] {
        ops::layer_norm(f32({2, 4}).to(DType::kBF16), Tensor(), Tensor(), 1e-5f);
      },
      ErrorCode::kUnsupported, {"layer_norm", "bfloat16", "float32"});
  expect_error(
      [] {
        ops::add_layer_norm(f32({2, 4}), f32({3, 4}), Tensor(), Tensor(), 1e-5f);
      },
      ErrorCode::kInvalidArgument, {"add_layer_norm", "residual", "[3, 4]", "[2, 4]"});
  expect_error(
      [] {
        ops::add_scaled_layer_norm(f32({2, 4}), Tensor(), 0.5f, Tensor(), Tensor(), 1e-5f);
      },
      ErrorCode::kInvalidArgument, {"add_scaled_layer_norm", "residual", "undefined"});
}

TEST(OpsRefusals, Softmax) {
  expect_error(
      [] {
        ops::softmax(f32({2, 3}), 2);
      },
      ErrorCode::kInvalidArgument, {"softmax", "dim 2"});
  const Tensor keep = Tensor::full({2, 3}, 1.0f, DType::kU8);
  expect_error(
      [&] {
        ops::masked_softmax(f32({2, 3}), keep.to(DType::kF32));
      },
      ErrorCode::kInvalidArgument, {"masked_softmax", "uint8", "float32"});
  expect_error(
      [&] {
        ops::masked_softmax(f32({2, 4}), keep);
      },
      ErrorCode::kInvalidArgument, {"masked_softmax", "[2, 3]", "[2, 4]"});
  expect_error([&] { ops::masked_softmax(f32({3}), keep); }, ErrorCode::kInvalidArgument,
               {"masked_softmax", "[2, 3]", "[3]"});
  expect_error([] { ops::masked_softmax(f32({3}), Tensor()); }, ErrorCode::kInvalidArgument,
               {"masked_softmax", "mask", "undefined"});
}

TEST(OpsRefusals, Glu) {
  expect_error(
      [] {
        ops::glu(f32({2, 5}), -1);
      },
      ErrorCode::kInvalidArgument, {"glu", "odd", "5", "[2, 5]"});
  expect_error([] { ops::glu(f32({2, 4}), 3); }, ErrorCode::kInvalidArgument, {"glu", "dim 3"});
}

TEST(OpsRefusals, Elementwise) {
  expect_error(
      [] {
        ops::add(f32({2, 3}), f32({2}));
      },
      ErrorCode::kInvalidArgument, {"add", "[2]", "[2, 3]"});
  expect_error(
      [] {
        ops::mul(f32({2, 3}), f32({4, 2, 3}));
      },
      ErrorCode::kInvalidArgument, {"mul", "[4, 2, 3]", "[2, 3]"});
  expect_error(
      [] {
        ops::add_scaled(f32({2, 3}), f32({3, 1}), 0.5f);
      },
      ErrorCode::kInvalidArgument, {"add_scaled", "[3, 1]", "[2, 3]"});
  expect_error([] { ops::scale(f32({2}).to(DType::kI64), 2.0f); }, ErrorCode::kInvalidArgument,
               {"scale", "int64"});
}

TEST(OpsRefusals, Embedding) {
  const Tensor table = f32({5, 3});
  expect_error(
      [&] {
        ops::embedding(Tensor::from_vector<int64_t>({0, 5}, {2}), table);
      },
      ErrorCode::kInvalidArgument, {"embedding", "id 5", "5 rows"});
  expect_error([&] { ops::embedding(Tensor::from_vector<int32_t>({-1}, {1}), table); },
               ErrorCode::kInvalidArgument, {"embedding", "id -1", "5 rows"});
  expect_error([&] { ops::embedding(f32({2}), table); }, ErrorCode::kInvalidArgument,
               {"embedding", "ids", "float32"});
  expect_error([] { ops::embedding(Tensor::from_vector<int64_t>({0}, {1}), f32({5})); },
               ErrorCode::kInvalidArgument, {"embedding", "table", "2-d"});
}

// Mixed devices and CUDA tensors need a GPU to construct; on a machine
// without one this is skipped (the refusal then cannot arise).
TEST(OpsRefusals, MixedDevicesAreRefused) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor x = f32({2, 3}).to(Device::cuda());
  expect_error(
      [&] {
        ops::linear(x, f32({4, 3}));
      },
      ErrorCode::kInvalidArgument, {"linear", "different devices"});
}

}  // namespace
}  // namespace oasr
