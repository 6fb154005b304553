// decode::CtcEndpoint against the WeNet runtime's rules (ctc_endpoint.h
// states them): frames whose blank probability is above 0.8 are silence;
// rule 1 ends after 5 s of silence, rule 2 after 1 s of silence once
// something was decoded, rule 3 once the segment is 20 s long.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "decode/ctc_endpoint.h"

namespace oasr::decode {
namespace {

constexpr double kShift = 0.04;  // U2++: 4 x 10 ms per encoder frame

// `frames` frames of 3 labels whose blank probability is `blank_probability`.
Tensor frames(int64_t count, float blank_probability) {
  std::vector<float> values;
  for (int64_t t = 0; t < count; ++t) {
    const float rest = (1.0f - blank_probability) / 2.0f;
    values.insert(values.end(), {std::log(blank_probability), std::log(rest), std::log(rest)});
  }
  return Tensor::from_vector<float>(values, {count, 3});
}

TEST(CtcEndpoint, Rule2EndsAfterOneSecondOfSilenceOnceSomethingWasDecoded) {
  CtcEndpoint endpoint(EndpointConfig{}, kShift);
  EXPECT_FALSE(endpoint.accept(frames(10, 0.1f), true));   // speech
  EXPECT_FALSE(endpoint.accept(frames(24, 0.95f), true));  // 0.96 s of silence
  EXPECT_TRUE(endpoint.accept(frames(1, 0.95f), true));    // 1.00 s
  EXPECT_DOUBLE_EQ(endpoint.trailing_silence_seconds(), 25 * kShift);
}

TEST(CtcEndpoint, SilenceWithNothingDecodedNeedsFiveSeconds) {
  CtcEndpoint endpoint(EndpointConfig{}, kShift);
  EXPECT_FALSE(endpoint.accept(frames(124, 0.95f), false));  // 4.96 s
  EXPECT_TRUE(endpoint.accept(frames(1, 0.95f), false));     // 5.00 s: rule 1
}

TEST(CtcEndpoint, ABlankAtTheThresholdIsNotSilenceAndSpeechResetsTheCount) {
  CtcEndpoint endpoint(EndpointConfig{}, kShift);
  EXPECT_FALSE(endpoint.accept(frames(20, 0.95f), true));
  EXPECT_FALSE(endpoint.accept(frames(1, 0.8f), true));  // not above 0.8: speech
  EXPECT_DOUBLE_EQ(endpoint.trailing_silence_seconds(), 0.0);
  EXPECT_FALSE(endpoint.accept(frames(24, 0.95f), true));
  EXPECT_TRUE(endpoint.accept(frames(1, 0.95f), true));
}

TEST(CtcEndpoint, Rule3EndsATwentySecondSegmentWhateverElse) {
  CtcEndpoint endpoint(EndpointConfig{}, kShift);
  EXPECT_FALSE(endpoint.accept(frames(499, 0.1f), true));  // 19.96 s of speech
  EXPECT_TRUE(endpoint.accept(frames(1, 0.1f), true));     // 20 s
  endpoint.reset();
  EXPECT_DOUBLE_EQ(endpoint.segment_seconds(), 0.0);
  EXPECT_FALSE(endpoint.accept(frames(1, 0.1f), true));
}

TEST(CtcEndpoint, TheRulesAreSettableAndBadInputIsRefused) {
  EndpointConfig config;
  config.rule2.min_trailing_silence_s = 0.4;
  CtcEndpoint endpoint(config, kShift);
  EXPECT_FALSE(endpoint.accept(frames(9, 0.95f), true));
  EXPECT_TRUE(endpoint.accept(frames(1, 0.95f), true));
  EXPECT_THROW(CtcEndpoint(config, 0.0), oasr::Error);
  EXPECT_THROW(endpoint.accept(Tensor::from_vector<float>({0.0f}, {1}), true), oasr::Error);
}

}  // namespace
}  // namespace oasr::decode
