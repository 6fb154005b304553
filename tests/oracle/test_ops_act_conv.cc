// ops/activation, ops/conv2d and ops/depthwise_conv1d against PyTorch
// (gen_ops_act_conv.py), plus definition-based checks written here (the
// activation op returns exactly core/activations.h's bits; the depthwise conv
// follows its documented summation order bit for bit) and the fronts'
// refusals. Conv cases also run on non-contiguous views whose gaps hold NaN
// (a front that forgot contiguous() would poison the result); both runs must
// agree bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/activations.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/activation.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv1d.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using nlohmann::json;
using testing::all_close;
using testing::bit_equal;

constexpr double kEps = 0x1p-23;  // float32 machine epsilon
constexpr float kInf = std::numeric_limits<float>::infinity();

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

Tensor get(const std::string& name) {
  return oracle().file.get(name);
}
Tensor get_optional(const std::string& name) {
  return oracle().file.contains(name) ? get(name) : Tensor();
}

// The same float32 values in a non-contiguous view: each row of the last
// dimension is followed by three NaN elements.
Tensor with_nan_gaps(const Tensor& t) {
  if (!t.defined()) return t;
  Shape wide = t.shape();
  wide.back() += 3;
  Tensor storage = Tensor::full(wide, std::numeric_limits<float>::quiet_NaN());
  Tensor view = storage.slice(-1, 0, t.size(-1));
  view.copy_(t);
  return view;
}

// Spacing of float32 numbers at |v| (2^-149 for subnormals).
double ulp32(double v) {
  const double a = std::fabs(v);
  if (a < 0x1p-126) return 0x1p-149;
  int exponent;
  std::frexp(a, &exponent);
  return std::ldexp(1.0, exponent - 24);
}

// ---- activations ----------------------------------------------------------------

// |ours - torch| <= ulps * ulp(torch) + tail * |x| + atol, elementwise.
// Each bound is ours plus PyTorch's own error (both measured against exact
// references: ours in tests/unit/test_activations.cc, PyTorch's CPU kernels
// from float64 at the generator's inputs):
//   sigmoid  2 + 2.3 ulp                -> 5 ulp
//   tanh     1.5 + 1.0 ulp              -> 3 ulp
//   swish    2 + 2.3 ulp                -> 5 ulp
//   gelu, gelu_tanh: 3-4 ulp each, plus an absolute error in the negative
//            tail where 1 + erf (1 + tanh) cancels: ours <= |x| 2^-23,
//            PyTorch's up to |x| 2^-22            -> 8 ulp + |x| 2^-21
//   relu     exact.
// atol covers, below atol_below_x, where ours returns the limit (sigmoid +0,
// swish -0 for x < -86, core/activations.h) while PyTorch keeps the tiny
// result down to x = -88.72 (then flushes to 0 itself): there sigmoid <
// e^-86 < 2^-124 and |swish| < 86.01 e^-86 < 2^-117.
struct ActivationTolerance {
  double ulps;
  double tail;  // times |x|
  double atol;
  double atol_below_x = 0;  // atol applies where x < this
};

ActivationTolerance tolerance_for(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return {0, 0, 0};
    case Activation::kSigmoid:
      return {5, 0, 0x1p-124, -act::detail::kSigmoidArgLimit};
    case Activation::kTanh:
      return {3, 0, 0};
    case Activation::kSwish:
      return {5, 0, 0x1p-117, -act::detail::kSigmoidArgLimit};
    case Activation::kGeluErf:
    case Activation::kGeluTanh:
      return {8, 0x1p-21, 0};
    case Activation::kNone:
      break;
  }
  return {0, 0, 0};
}

TEST(ActivationOracle, MatchesPyTorchWithinStatedUlps) {
  const Tensor x = get("act/x");
  const float* px = x.data<float>();
  for (const auto& name_json : oracle().cases.at("activations")) {
    const std::string name = name_json.get<std::string>();
    const Activation activation = parse_activation(name);
    const ActivationTolerance tol = tolerance_for(activation);
    const Tensor expected = get("act/" + name);
    const Tensor got = ops::activation(x, activation);
    ASSERT_EQ(got.shape(), expected.shape());
    const float* pg = got.data<float>();
    const float* pe = expected.data<float>();
    int64_t failures = 0;
    double worst_ratio = 0;  // error / allowed
    int64_t worst = -1;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (std::isnan(px[i])) {
        EXPECT_TRUE(std::isnan(pg[i]) && std::isnan(pe[i])) << name << " of NaN";
        continue;
      }
      if (px[i] == -kInf && std::isnan(pe[i])) {
        // PyTorch computes -inf * 0 here; ours returns the limit, -0
        // (documented in core/activations.h).
        EXPECT_EQ(float_bits(pg[i]), float_bits(-0.0f)) << name << "(-inf)";
        continue;
      }
      if (pg[i] == pe[i]) continue;  // includes equal infinities
      const double error = std::fabs(static_cast<double>(pg[i]) - pe[i]);
      const double allowed = tol.ulps * ulp32(pe[i]) + tol.tail * std::fabs(px[i]) +
                             (px[i] < tol.atol_below_x ? tol.atol : 0.0);
      if (!(error <= allowed)) {
        ++failures;
        if (worst < 0 || error / allowed > worst_ratio) {
          worst_ratio = error / allowed;
          worst = i;
        }
      }
    }
    double max_ratio = 0;  // over all elements, for the log
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (std::isnan(px[i]) || std::isnan(pe[i]) || pg[i] == pe[i]) continue;
      const double allowed = tol.ulps * ulp32(pe[i]) + tol.tail * std::fabs(px[i]) +
                             (px[i] < tol.atol_below_x ? tol.atol : 0.0);
      max_ratio = std::max(max_ratio, std::fabs(static_cast<double>(pg[i]) - pe[i]) / allowed);
    }
    std::printf("  %-10s largest error / allowed = %.3f\n", name.c_str(), max_ratio);
    EXPECT_EQ(failures, 0) << name << ": worst at x=" << (worst >= 0 ? px[worst] : 0.0f) << ": got "
                           << (worst >= 0 ? pg[worst] : 0.0f) << ", PyTorch "
                           << (worst >= 0 ? pe[worst] : 0.0f);
  }
}

TEST(ActivationOp, ReturnsExactlyTheSharedImplementation) {
  // The op's loop (an FMA-compiled clone where the CPU has FMA) must give
  // the bits of core/activations.h evaluated here, element by element.
  const Tensor x = get("act/x");
  for (Activation activation :
       {Activation::kNone, Activation::kRelu, Activation::kSwish, Activation::kGeluErf,
        Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh}) {
    const Tensor got = ops::activation(x, activation);
    std::vector<float> want(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) want[i] = act::apply(activation, x.data<float>()[i]);
    EXPECT_TRUE(bit_equal(got, Tensor::from_vector(want, x.shape())))
        << activation_name(activation);
  }
}

TEST(ActivationOp, ViewsInPlaceAndRefusals) {
  const Tensor x = get("act/x").narrow(0, 0, 3000).view({30, 100});
  const Tensor reference = ops::activation(x, Activation::kGeluErf);
  EXPECT_TRUE(bit_equal(ops::activation(with_nan_gaps(x), Activation::kGeluErf), reference));

  Tensor in_place = x.clone();
  ops::activation_inplace(in_place, Activation::kGeluErf);
  EXPECT_TRUE(bit_equal(in_place, reference));

  try {
    ops::activation_inplace(with_nan_gaps(x), Activation::kRelu);
    FAIL() << "expected a refusal of a non-contiguous in-place activation";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("contiguous"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ops::activation(Tensor::zeros({4}, DType::kI32), Activation::kRelu), Error);
  EXPECT_THROW(ops::activation(Tensor(), Activation::kRelu), Error);
  // An empty tensor is served.
  EXPECT_EQ(ops::activation(Tensor::zeros({0, 5}, DType::kF32), Activation::kTanh).numel(), 0);
}

// ---- conv2d -----------------------------------------------------------------------

// Both sides sum fan_in products in different orders (OpenBLAS blocks vs
// PyTorch's kernels). With inputs N(0,1) and weights U(+-1/sqrt(fan_in)) the
// partial sums are O(1), so each rounding error is O(eps) and the difference
// grows like sqrt(fan_in) * eps; 4x that (plus 4 eps relative) is the bound.
double conv_atol(int64_t fan_in) {
  return 4.0 * std::sqrt(static_cast<double>(fan_in)) * kEps;
}

// Logs the largest |got - expected| in units of sqrt(fan_in) * eps.
void log_conv_error(const std::string& name, const Tensor& got, const Tensor& expected,
                    int64_t fan_in) {
  double largest = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    largest = std::max(
        largest, std::fabs(static_cast<double>(got.data<float>()[i]) - expected.data<float>()[i]));
  }
  std::printf("  %-26s max |diff| = %.3f sqrt(fan_in) eps\n", name.c_str(),
              largest / (std::sqrt(static_cast<double>(fan_in)) * kEps));
}

TEST(Conv2dOracle, MatchesPyTorch) {
  for (const auto& [name, c] : oracle().cases.at("conv2d").items()) {
    SCOPED_TRACE(name);
    const std::string prefix = "conv2d/" + name + "/";
    const Tensor x = get(prefix + "x");
    const Tensor weight = get(prefix + "weight");
    const Tensor bias = get_optional(prefix + "bias");
    ops::Conv2dOptions options;
    options.stride_h = c.at("stride")[0];
    options.stride_w = c.at("stride")[1];
    options.padding_h = c.at("padding")[0];
    options.padding_w = c.at("padding")[1];
    const Tensor got = ops::conv2d(x, weight, bias, options);
    const int64_t fan_in = c.at("fan_in");
    log_conv_error(name, got, get(prefix + "expected"), fan_in);
    EXPECT_TRUE(all_close(got, get(prefix + "expected"), static_cast<float>(conv_atol(fan_in)),
                          static_cast<float>(4 * kEps)));
    EXPECT_TRUE(bit_equal(
        ops::conv2d(with_nan_gaps(x), with_nan_gaps(weight), with_nan_gaps(bias), options), got));
  }
}

TEST(Conv2dOp, RefusesWhatItCannotServe) {
  const Tensor x = Tensor::zeros({1, 4, 8, 8}, DType::kF32);
  const Tensor weight = Tensor::zeros({6, 4, 3, 3}, DType::kF32);
  ops::Conv2dOptions grouped;
  grouped.groups = 2;
  try {
    ops::conv2d(x, Tensor::zeros({6, 2, 3, 3}, DType::kF32), Tensor(), grouped);
    FAIL() << "expected a refusal of groups=2";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(error.what()).find("groups=2"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ops::conv2d(x, Tensor::zeros({6, 3, 3, 3}, DType::kF32), Tensor()), Error);
  EXPECT_THROW(ops::conv2d(x, Tensor::zeros({6, 4, 9, 3}, DType::kF32), Tensor()), Error);
  EXPECT_THROW(ops::conv2d(x, weight, Tensor::zeros({5}, DType::kF32)), Error);
  EXPECT_THROW(ops::conv2d(x.view({4, 8, 8}), weight, Tensor()), Error);
  ops::Conv2dOptions zero_stride;
  zero_stride.stride_h = 0;
  EXPECT_THROW(ops::conv2d(x, weight, Tensor(), zero_stride), Error);
  ops::Conv2dOptions negative_padding;
  negative_padding.padding_w = -1;
  EXPECT_THROW(ops::conv2d(x, weight, Tensor(), negative_padding), Error);
  // With padding the 9-row kernel fits: (8 + 2 - 9) + 1 = 2 rows.
  ops::Conv2dOptions padded;
  padded.padding_h = 1;
  EXPECT_EQ(ops::conv2d(x, Tensor::zeros({6, 4, 9, 3}, DType::kF32), Tensor(), padded).shape(),
            (Shape{1, 6, 2, 6}));
}

// ---- depthwise conv1d -------------------------------------------------------------

// The documented order, written from the definition: for each output, start
// from +0, add w[k] * xpad[t + k] for k ascending skipping padding, then bias.
Tensor depthwise_reference(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t left,
                           int64_t right) {
  const int64_t batch = x.size(0), channels = x.size(1), length = x.size(2);
  const int64_t kernel = weight.size(2);
  const int64_t out_length = length + left + right - kernel + 1;
  std::vector<float> out;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t t = 0; t < out_length; ++t) {
        float sum = 0.0f;
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t source = t + k - left;
          if (source < 0 || source >= length) continue;
          const float product = weight.item_float({c, 0, k}) * x.item_float({b, c, source});
          sum = sum + product;
        }
        if (bias.defined()) sum = sum + bias.item_float({c});
        out.push_back(sum);
      }
    }
  }
  return Tensor::from_vector(out, {batch, channels, out_length});
}

TEST(DepthwiseConv1dOracle, MatchesPyTorchAndItsDocumentedOrder) {
  for (const auto& [name, c] : oracle().cases.at("dwconv1d").items()) {
    SCOPED_TRACE(name);
    const std::string prefix = "dwconv1d/" + name + "/";
    const Tensor x = get(prefix + "x");
    const Tensor weight = get(prefix + "weight");
    const Tensor bias = get_optional(prefix + "bias");
    const int64_t left = c.at("pad_left");
    const int64_t right = c.at("pad_right");
    const Tensor got = ops::depthwise_conv1d(x, weight, bias, left, right);
    log_conv_error(name, got, get(prefix + "expected"), c.at("fan_in"));
    EXPECT_TRUE(all_close(got, get(prefix + "expected"),
                          static_cast<float>(conv_atol(c.at("fan_in"))),
                          static_cast<float>(4 * kEps)));
    EXPECT_TRUE(bit_equal(got, depthwise_reference(x, weight, bias, left, right)));
    EXPECT_TRUE(bit_equal(ops::depthwise_conv1d(with_nan_gaps(x), with_nan_gaps(weight),
                                                with_nan_gaps(bias), left, right),
                          got));
  }
}

TEST(DepthwiseConv1dOp, RefusesWhatItCannotServe) {
  const Tensor x = Tensor::zeros({2, 4, 10}, DType::kF32);
  const Tensor weight = Tensor::zeros({4, 1, 5}, DType::kF32);
  EXPECT_EQ(ops::depthwise_conv1d(x, weight, Tensor(), 4, 0).shape(), (Shape{2, 4, 10}));
  EXPECT_THROW(ops::depthwise_conv1d(x, Tensor::zeros({4, 2, 5}, DType::kF32), Tensor(), 4, 0),
               Error);
  EXPECT_THROW(ops::depthwise_conv1d(x, Tensor::zeros({3, 1, 5}, DType::kF32), Tensor(), 4, 0),
               Error);
  EXPECT_THROW(ops::depthwise_conv1d(x, weight, Tensor(), -1, 0), Error);
  EXPECT_THROW(ops::depthwise_conv1d(x, weight, Tensor::zeros({5}, DType::kF32), 4, 0), Error);
  try {
    ops::depthwise_conv1d(x, Tensor::zeros({4, 1, 15}, DType::kF32), Tensor(), 2, 2);
    FAIL() << "expected a refusal of a kernel longer than the padded input";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("kernel size 15"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace oasr
