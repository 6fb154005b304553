// audio::deviation_rms_dbfs / is_silent against closed forms: a constant
// signal has no deviation (-inf dBFS); a sine of amplitude A has RMS A / sqrt 2
// about its mean whatever its offset.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "audio/silence.h"

namespace oasr::audio {
namespace {

std::vector<float> sine(double amplitude, double offset, size_t n = 8000) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(offset + amplitude * std::sin(2.0 * M_PI * 440.0 * i / 8000.0));
  }
  return x;
}

TEST(AudioSilence, ConstantSignalsAreSilence) {
  EXPECT_TRUE(std::isinf(deviation_rms_dbfs(std::vector<float>(800, 0.0f))));
  EXPECT_TRUE(is_silent(std::vector<float>(800, 0.0f)));
  EXPECT_TRUE(is_silent(std::vector<float>(800, 0.25f)));  // DC
  EXPECT_TRUE(is_silent(std::vector<float>{}));
}

TEST(AudioSilence, ASineIsMeasuredAboutItsMean) {
  const double amplitude = 1e-3;  // -63.0 dBFS RMS
  const double expected = 20.0 * std::log10(amplitude / std::sqrt(2.0));
  EXPECT_NEAR(deviation_rms_dbfs(sine(amplitude, 0.0)), expected, 0.01);
  EXPECT_NEAR(deviation_rms_dbfs(sine(amplitude, 0.5)), expected, 0.01);
  EXPECT_FALSE(is_silent(sine(amplitude, 0.5)));
}

TEST(AudioSilence, OneStepDitherIsSilenceAndATwoStepToneIsNot) {
  std::vector<float> dither(8000);
  for (size_t i = 0; i < dither.size(); ++i) dither[i] = (i % 2 ? 1.0f : -1.0f) / 32768.0f;
  EXPECT_NEAR(deviation_rms_dbfs(dither), 20.0 * std::log10(1.0 / 32768.0), 0.01);  // -90.3
  EXPECT_TRUE(is_silent(dither));
  EXPECT_FALSE(is_silent(sine(8.0 / 32768.0, 0.0)));  // -75.3 dBFS
}

}  // namespace
}  // namespace oasr::audio
