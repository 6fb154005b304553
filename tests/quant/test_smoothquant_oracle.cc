// SmoothQuant's per-channel scales and the static clip search against an
// independent NumPy oracle (tests/quant/gen_smoothquant.py, written from the
// spec's formulas): the scales to float32 precision, the clamps and the
// never-active channels exactly; the histogram clip search against a
// brute-force search over the raw samples.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/calibration/observers.h"
#include "quantize/smoothquant.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

std::vector<float> floats(const std::string& name) {
  const Tensor t = oracle().file.get(name).to(DType::kF32).contiguous();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(SmoothQuantOracle, ScalesMatchTheSpecFormulaWithClampsAndInactiveChannels) {
  int compared = 0;
  for (const auto& [name, alpha_json] : oracle().cases.at("scales").items()) {
    SCOPED_TRACE(name);
    const std::string prefix = "scales/" + name + "/";
    const std::vector<float> act = floats(prefix + "act");
    const std::vector<float> weight = floats(prefix + "weight");
    const std::vector<float> producer = oracle().file.contains(prefix + "producer")
                                            ? floats(prefix + "producer")
                                            : std::vector<float>{};
    const std::vector<float> expected = floats(prefix + "s");
    const SmoothingScales got = smoothing_scales(act, weight, alpha_json.get<double>(), producer);
    ASSERT_EQ(got.s.size(), expected.size());
    int64_t inactive = 0;
    for (size_t j = 0; j < expected.size(); ++j) {
      if (!(act[j] > 0.0f && weight[j] > 0.0f)) {
        ++inactive;
        EXPECT_EQ(got.s[j], 1.0f) << "channel " << j << " was never active";
      }
      EXPECT_NEAR(got.s[j], expected[j], 2e-6 * std::fabs(expected[j])) << "channel " << j;
      ++compared;
    }
    EXPECT_EQ(got.inactive, inactive);
    if (name == "clamped") {
      EXPECT_GT(got.clamped, 0);
      for (size_t j = 0; j < expected.size(); ++j) {
        EXPECT_LE(weight[j] * got.s[j], kFp16Max * (1 + 1e-6f)) << j;
        if (!producer.empty()) {
          EXPECT_LE(producer[j] / got.s[j], kFp16Max * (1 + 1e-6f)) << j;
        }
      }
    }
  }
  EXPECT_GE(compared, 5 * 256);
}

TEST(SmoothQuantOracle, HistogramClipSearchIsWithinOnePercentOfTheBruteForceOptimum) {
  int compared = 0;
  for (const auto& [name, unused] : oracle().cases.at("clip").items()) {
    SCOPED_TRACE(name);
    const std::vector<float> samples = floats("clip/" + name + "/samples");
    const std::vector<float> error = floats("clip/" + name + "/error");  // i = 16..256
    ASSERT_EQ(error.size(), 241u);
    AbsHistogram histogram;
    // In pieces, so the range grows and bins merge on the way.
    const size_t piece = samples.size() / 7 + 1;
    for (size_t start = 0; start < samples.size(); start += piece) {
      histogram.update(samples.data() + start,
                       static_cast<int64_t>(std::min(piece, samples.size() - start)));
    }
    EXPECT_EQ(histogram.count(), static_cast<int64_t>(samples.size()));
    float amax = 0.0f;
    for (float v : samples) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(histogram.max(), amax);
    EXPECT_EQ(histogram.choose_clip("minmax", QDType::kInt8), amax);

    const float clip = histogram.choose_clip("mse", QDType::kInt8);
    const double ratio_index = static_cast<double>(clip) / amax * 256.0;
    const auto index = static_cast<int64_t>(std::lround(ratio_index));
    ASSERT_NEAR(ratio_index, static_cast<double>(index), 1e-3) << "clip is not a grid point";
    ASSERT_GE(index, 16);
    ASSERT_LE(index, 256);
    const double best = *std::min_element(error.begin(), error.end());
    const double chosen = error[static_cast<size_t>(index - 16)];
    EXPECT_LE(chosen, best * 1.01)
        << "chose i=" << index << " (error " << chosen << "), brute force best " << best;
    // The search is worth having: it beats the maximum everywhere here, by
    // 40 % on the heavy-tailed Student t (brute force: 0.58 of the max's error).
    EXPECT_LT(chosen, error.back());
    if (name == "student_t3") {
      EXPECT_LT(chosen, error.back() * 0.7f);
    }
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

TEST(SmoothQuantOracle, RefusesAlphaOutsideTheUnitInterval) {
  EXPECT_THROW(smoothing_scales({1.0f}, {1.0f}, 1.5), Error);
  EXPECT_THROW(smoothing_scales({1.0f}, {1.0f}, -0.1), Error);
}

}  // namespace
}  // namespace oasr::quant
