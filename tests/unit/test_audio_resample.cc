// Resampling (audio/resample.h) against its definition: a band-limited
// signal resampled must equal the same signal evaluated at the new sample
// times, and content above the new Nyquist frequency must be gone.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "audio/resample.h"
#include "unit/test_audio_util.h"

namespace oasr {
namespace {

using audio::resample;
using audio::resampled_length;
using testing::expect_error;
using testing::Tone;
using testing::tones;

std::vector<float> to_float(const std::vector<double>& x) {
  return {x.begin(), x.end()};
}

// Largest |out - expected| away from both ends: the tones start and stop
// abruptly, which no band-limited resampler reproduces, so the filter's
// length (a few ms for soxr HQ) is skipped at each end.
double interior_max_error(const std::vector<float>& out, const std::vector<double>& expected,
                          size_t margin) {
  EXPECT_EQ(out.size(), expected.size());
  double worst = 0;
  for (size_t i = margin; i + margin < std::min(out.size(), expected.size()); ++i) {
    worst = std::max(worst, std::fabs(out[i] - expected[i]));
  }
  return worst;
}

TEST(Resample, LengthIsTheRoundedRatio) {
  EXPECT_EQ(resampled_length(4000, 8000, 16000), 8000);
  EXPECT_EQ(resampled_length(441, 44100, 16000), 160);
  EXPECT_EQ(resampled_length(1000, 16000, 44100), 2756);  // 2756.25
  EXPECT_EQ(resampled_length(3, 2, 3), 5);                // 4.5 rounds up
  EXPECT_EQ(resampled_length(1, 3, 1), 0);                // 0.33
  EXPECT_EQ(resampled_length(0, 8000, 16000), 0);
  // No overflow for two hours at 48 kHz going to 192 kHz.
  EXPECT_EQ(resampled_length(int64_t{48000} * 7200, 48000, 192000), int64_t{192000} * 7200);
  // resample() delivers exactly that many samples, at every ratio and length.
  const std::pair<int, int> rates[] = {{8000, 16000},  {16000, 8000},  {44100, 16000},
                                       {16000, 44100}, {22050, 16000}, {48000, 16000},
                                       {11025, 16000}, {16000, 22050}};
  for (const auto& [from, to] : rates) {
    for (int64_t n : {1, 2, 3, 7, 100, 1001, 12345}) {
      const std::vector<float> x(static_cast<size_t>(n), 0.1f);
      EXPECT_EQ(static_cast<int64_t>(resample(x, from, to).size()), resampled_length(n, from, to))
          << from << " -> " << to << " Hz, " << n << " samples";
    }
  }
}

TEST(Resample, SameRateIsACopyAndEmptyStaysEmpty) {
  const std::vector<float> x = {0.5f, -0.25f, 0.125f};
  EXPECT_EQ(resample(x, 16000, 16000), x);
  EXPECT_TRUE(resample({}, 8000, 16000).empty());
}

// soxr HQ: 20-bit precision and a passband flat to 0.01 dB up to 91.3% of
// the lower Nyquist. Tones well inside it come through almost untouched
// (3e-7 observed); 1e-4 of a 0.75 peak is -80 dB.
TEST(Resample, UpsamplingReproducesTonesInThePassband) {
  const std::vector<Tone> parts = {{300, 0.3, 0.2}, {1000, 0.25, 1.1}, {3500, 0.2, 2.3}};
  const std::vector<float> out = resample(to_float(tones(parts, 8000, 8000)), 8000, 16000);
  EXPECT_LT(interior_max_error(out, tones(parts, 16000, 16000), 400), 1e-4);
}

// 7 kHz sits near the passband's end (7.3 kHz at 16 kHz), where the 0.01 dB
// allowance applies: 1.2e-3 relative of the 0.6 total amplitude is 7e-4
// (7.5e-5 observed).
TEST(Resample, NonIntegerRatioReproducesTonesInThePassband) {
  const std::vector<Tone> parts = {{440, 0.3}, {3000, 0.2, 0.7}, {7000, 0.1, 1.9}};
  const std::vector<float> out = resample(to_float(tones(parts, 44100, 44100)), 44100, 16000);
  EXPECT_LT(interior_max_error(out, tones(parts, 16000, 16000), 400), 7e-4);
}

// 6 kHz cannot exist at 8 kHz; without the anti-aliasing filter it would
// fold to 2 kHz with its full 0.3 amplitude.
TEST(Resample, DownsamplingRemovesContentAboveTheNewNyquist) {
  const std::vector<float> in = to_float(tones({{1000, 0.5, 0.3}, {6000, 0.3, 0.9}}, 16000, 16000));
  const std::vector<float> out = resample(in, 16000, 8000);
  EXPECT_LT(interior_max_error(out, tones({{1000, 0.5, 0.3}}, 8000, 8000), 200), 1e-4);
}

TEST(Resample, RefusesNonPositiveRates) {
  const std::vector<float> x(10, 0.0f);
  expect_error([&] { resample(x, 0, 16000); }, ErrorCode::kInvalidArgument, {"from_rate=0"});
  expect_error([&] { resample(x, 16000, -8000); }, ErrorCode::kInvalidArgument, {"to_rate=-8000"});
  expect_error([&] { audio::StreamResampler(0, 16000); }, ErrorCode::kInvalidArgument,
               {"from_rate=0"});
}

// A stream resampled piece by piece equals the whole input resampled at
// once, bit for bit and length for length, whatever the piece sizes (the
// server's WebSocket streams at other rates rely on it).
TEST(Resample, StreamInPiecesEqualsTheWholeBitForBit) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-0.9f, 0.9f);
  const std::vector<std::pair<int, int>> rates = {
      {16000, 8000}, {8000, 16000}, {44100, 16000}, {48000, 8000}, {22050, 16000}};
  const std::vector<size_t> lengths = {1, 17, 160, 4001, 48000 + 13};
  for (const auto& [from, to] : rates) {
    for (const size_t length : lengths) {
      std::vector<float> x(length);
      for (float& v : x) v = value(rng);
      const std::vector<float> whole = resample(x, from, to);
      for (const size_t piece : {size_t{1}, size_t{333}, size_t{4097}, length}) {
        audio::StreamResampler stream(from, to);
        std::vector<float> joined;
        for (size_t at = 0; at < length; at += piece) {
          const size_t count = std::min(piece, length - at);
          const std::vector<float> out =
              stream.process(std::span<const float>(x).subspan(at, count));
          joined.insert(joined.end(), out.begin(), out.end());
        }
        const std::vector<float> tail = stream.finish();
        joined.insert(joined.end(), tail.begin(), tail.end());
        ASSERT_EQ(joined.size(), whole.size())
            << from << "->" << to << " n=" << length << " piece=" << piece;
        EXPECT_EQ(std::memcmp(joined.data(), whole.data(), whole.size() * sizeof(float)), 0)
            << from << "->" << to << " n=" << length << " piece=" << piece;
      }
    }
  }
}

}  // namespace
}  // namespace oasr
