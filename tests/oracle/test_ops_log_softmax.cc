// ops::log_softmax against PyTorch (gen_ops_log_softmax.py), on the inputs as
// stored and on a non-contiguous view of them, plus the front's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/log_softmax.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using nlohmann::json;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

// Infinite entries must match exactly (a masked logit stays -inf); finite
// ones within the tolerance below.
void expect_log_softmax_matches(const Tensor& actual, const Tensor& expected,
                                const std::string& name) {
  ASSERT_EQ(actual.shape(), expected.shape()) << name;
  const Tensor a = actual.contiguous();
  const Tensor e = expected.contiguous();
  const float* pa = a.data<float>();
  const float* pe = e.data<float>();
  // Tolerance: x - max is exact on both sides; PyTorch sums the exp() terms
  // in float32 vector lanes, whose relative error (hence the absolute error
  // of log(sum)) is bounded by about (L / 16) * 2^-24, under 2e-5 for the
  // longest row here (L = 5002) and typically far smaller; this body sums in
  // double. So: 2e-5 absolute plus 2 float32 ulps of |y|.
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::isinf(pe[i])) {
      ASSERT_EQ(pa[i], pe[i]) << name << " element " << i;
      continue;
    }
    ASSERT_NEAR(pa[i], pe[i], 2e-5 + 2.4e-7 * std::fabs(pe[i])) << name << " element " << i;
  }
}

TEST(OpsLogSoftmax, MatchesPyTorch) {
  ASSERT_FALSE(oracle().cases.empty());
  for (const json& c : oracle().cases) {
    const std::string name = c.at("name");
    const int64_t dim = c.at("dim");
    const Tensor x = oracle().file.get(name + "/x");
    const Tensor expected = oracle().file.get(name + "/expected");
    expect_log_softmax_matches(ops::log_softmax(x, dim), expected, name);
  }
}

TEST(OpsLogSoftmax, NonContiguousInputGivesTheSameBits) {
  for (const json& c : oracle().cases) {
    const std::string name = c.at("name");
    const int64_t dim = c.at("dim");
    const Tensor x = oracle().file.get(name + "/x");
    // The same values behind NaN gaps: a front that forgot contiguous() reads NaN.
    Shape padded_shape = x.shape();
    padded_shape.back() += 3;
    Tensor padded = Tensor::full(padded_shape, std::numeric_limits<float>::quiet_NaN());
    Tensor view = padded.slice(-1, 1, 1 + x.size(-1));
    view.copy_(x);
    // (A single row stays contiguous whatever its row stride.)
    if (x.numel() > x.size(-1)) {
      ASSERT_FALSE(view.is_contiguous()) << name;
    }
    EXPECT_TRUE(testing::bit_equal(ops::log_softmax(view, dim), ops::log_softmax(x, dim))) << name;
  }
}

TEST(OpsLogSoftmax, SpecialRows) {
  const float inf = std::numeric_limits<float>::infinity();
  // All -inf: log of an empty sum, NaN in PyTorch too.
  Tensor all_masked = Tensor::from_vector<float>({-inf, -inf, -inf}, {1, 3});
  Tensor y = ops::log_softmax(all_masked);
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(y.item_float({0, j})));
  // A single element row is exactly 0.
  Tensor one = Tensor::from_vector<float>({123.5f}, {1, 1});
  EXPECT_EQ(ops::log_softmax(one).item_float({0, 0}), 0.0f);
}

TEST(OpsLogSoftmax, Refusals) {
  EXPECT_THROW(ops::log_softmax(Tensor()), Error);
  EXPECT_THROW(ops::log_softmax(Tensor::zeros({2, 3}, DType::kI32)), Error);
  EXPECT_THROW(ops::log_softmax(Tensor::zeros({2, 3}, DType::kF32), 2), Error);
  EXPECT_THROW(ops::log_softmax(Tensor::zeros({2, 3}, DType::kF32), -3), Error);
}

}  // namespace
}  // namespace oasr
