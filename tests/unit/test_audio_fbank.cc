// FbankComputer (audio/fbank.h) without Python: option validation, frame
// geometry, a frame checked against a direct double-precision evaluation of
// the Kaldi definition (plain DFT, no FFT), the streaming property, thread
// safety and speed. Agreement with torchaudio is tests/oracle/test_fbank.cc.
#include <gtest/gtest.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <numbers>
#include <random>
#include <thread>

#include "audio/fbank.h"
#include "support/test_support.h"
#include "unit/test_audio_util.h"

namespace oasr {
namespace {

using audio::FbankComputer;
using audio::FbankOptions;
using audio::FbankWindow;
using testing::bit_equal;
using testing::expect_error;

std::vector<float> noise(size_t n, float amplitude, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-amplitude, amplitude);
  std::vector<float> x(n);
  for (float& v : x) v = std::round(u(rng) * 32768.0f) / 32768.0f;  // int16 values
  return x;
}

// ---- options ---------------------------------------------------------------------

TEST(FbankOptions, DefaultsAreWeNets) {
  const FbankOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.window_size(), 400);
  EXPECT_EQ(o.window_shift(), 160);
  EXPECT_EQ(o.padded_window_size(), 512);
  EXPECT_EQ(o.feature_dim(), 80);
  EXPECT_EQ(o.energy_floor, 0.0);
  EXPECT_EQ(o.dither, 0.0);
  EXPECT_EQ(o.waveform_scale, 32768.0f);
  EXPECT_NE(o.dump().find("window_type=povey"), std::string::npos) << o.dump();
}

TEST(FbankOptions, GeometryFollowsTheSampleRate) {
  FbankOptions o;
  o.sample_rate = 8000;
  EXPECT_EQ(o.window_size(), 200);
  EXPECT_EQ(o.window_shift(), 80);
  EXPECT_EQ(o.padded_window_size(), 256);
  o.sample_rate = 22050;  // int(551.25)
  EXPECT_EQ(o.window_size(), 551);
  EXPECT_EQ(o.window_shift(), 220);
  EXPECT_EQ(o.padded_window_size(), 1024);
  o.round_to_power_of_two = false;  // 551 is odd: no real FFT of that size
  expect_error([&] { o.validate(); }, ErrorCode::kInvalidArgument,
               {"FFT size 551", "round_to_power_of_two"});
}

TEST(FbankOptions, EachBadFieldIsNamed) {
  struct Case {
    const char* field;
    void (*mutate)(FbankOptions&);
    ErrorCode code;
  };
  const Case cases[] = {
      {"sample_rate", [](FbankOptions& o) { o.sample_rate = 0; }, ErrorCode::kInvalidArgument},
      {"num_mel_bins", [](FbankOptions& o) { o.num_mel_bins = 3; }, ErrorCode::kInvalidArgument},
      {"frame_length_ms", [](FbankOptions& o) { o.frame_length_ms = 0.1; },
       ErrorCode::kInvalidArgument},
      {"frame_shift_ms", [](FbankOptions& o) { o.frame_shift_ms = 0.01; },
       ErrorCode::kInvalidArgument},
      {"preemphasis_coefficient", [](FbankOptions& o) { o.preemphasis_coefficient = 1.5; },
       ErrorCode::kInvalidArgument},
      {"dither", [](FbankOptions& o) { o.dither = 1.0; }, ErrorCode::kUnsupported},
      {"energy_floor", [](FbankOptions& o) { o.energy_floor = -1; }, ErrorCode::kInvalidArgument},
      {"waveform_scale", [](FbankOptions& o) { o.waveform_scale = 0; },
       ErrorCode::kInvalidArgument},
      {"low_freq", [](FbankOptions& o) { o.low_freq = 8000; }, ErrorCode::kInvalidArgument},
      {"high_freq", [](FbankOptions& o) { o.high_freq = 9000; }, ErrorCode::kInvalidArgument},
      {"high_freq", [](FbankOptions& o) { o.high_freq = -8000; }, ErrorCode::kInvalidArgument},
      {"low_freq", [](FbankOptions& o) { o.low_freq = 4000, o.high_freq = 3000; },
       ErrorCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    FbankOptions o;
    c.mutate(o);
    expect_error([&] { o.validate(); }, c.code, {c.field});
    expect_error([&] { FbankComputer computer(o); }, c.code, {c.field});
  }
}

TEST(FbankOptions, WindowNamesRoundTrip) {
  for (FbankWindow w : {FbankWindow::kPovey, FbankWindow::kHanning, FbankWindow::kHamming,
                        FbankWindow::kRectangular, FbankWindow::kBlackman}) {
    EXPECT_EQ(audio::parse_fbank_window(audio::fbank_window_name(w)), w);
  }
  expect_error([] { audio::parse_fbank_window("hann"); }, ErrorCode::kInvalidArgument,
               {"'hann'", "povey"});
}

// ---- frames ----------------------------------------------------------------------

TEST(Fbank, FrameCounts) {
  const FbankComputer snip(FbankOptions{});
  EXPECT_EQ(snip.num_frames(0), 0);
  EXPECT_EQ(snip.num_frames(399), 0);
  EXPECT_EQ(snip.num_frames(400), 1);
  EXPECT_EQ(snip.num_frames(559), 1);
  EXPECT_EQ(snip.num_frames(560), 2);
  EXPECT_EQ(snip.num_frames(160000), 998);  // 10 s
  FbankOptions centred;
  centred.snip_edges = false;
  const FbankComputer edges(centred);
  EXPECT_EQ(edges.num_frames(79), 0);  // (N + 80) / 160
  EXPECT_EQ(edges.num_frames(80), 1);
  EXPECT_EQ(edges.num_frames(160000), 1000);
}

TEST(Fbank, FewerSamplesThanOneWindowGiveNoFrames) {
  const FbankComputer computer(FbankOptions{});
  EXPECT_EQ(computer.compute({}).shape(), (Shape{0, 80}));
  EXPECT_EQ(computer.compute(noise(399, 0.3f, 1)).shape(), (Shape{0, 80}));
  FbankOptions with_energy;
  with_energy.use_energy = true;
  EXPECT_EQ(FbankComputer(with_energy).compute(noise(10, 0.3f, 1)).shape(), (Shape{0, 81}));
  // snip_edges = false reflects at the edges: 100 samples (at least half a
  // 160-sample shift) already make one frame, as in Kaldi.
  FbankOptions centred;
  centred.snip_edges = false;
  const Tensor short_centred = FbankComputer(centred).compute(noise(100, 0.3f, 2));
  EXPECT_EQ(short_centred.shape(), (Shape{1, 80}));
  for (int64_t j = 0; j < 80; ++j) EXPECT_TRUE(std::isfinite(short_centred.item_float({0, j})));
}

// One frame of the Kaldi definition evaluated directly in double precision
// with a plain DFT, from the formula (not from the code under test).
std::vector<double> reference_frame(const std::vector<float>& samples, int64_t start) {
  const int window = 400, fft = 512, bins = 80;
  const double rate = 16000, low = 20, high = 8000;
  std::vector<double> x(fft, 0.0);
  double mean = 0;
  for (int j = 0; j < window; ++j) mean += samples[start + j] * 32768.0;
  mean /= window;
  std::vector<double> d(window);
  for (int j = 0; j < window; ++j) d[j] = samples[start + j] * 32768.0 - mean;
  for (int j = 0; j < window; ++j) {
    const double pre = d[j] - 0.97 * d[j > 0 ? j - 1 : 0];
    const double hann = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * j / (window - 1));
    x[j] = pre * std::pow(hann, 0.85);
  }
  std::vector<double> power(fft / 2 + 1);
  for (int k = 0; k <= fft / 2; ++k) {
    double re = 0, im = 0;
    for (int j = 0; j < fft; ++j) {
      re += x[j] * std::cos(2 * std::numbers::pi * k * j / fft);
      im -= x[j] * std::sin(2 * std::numbers::pi * k * j / fft);
    }
    power[k] = re * re + im * im;
  }
  auto mel = [](double hz) { return 1127.0 * std::log(1.0 + hz / 700.0); };
  const double delta = (mel(high) - mel(low)) / (bins + 1);
  std::vector<double> out(bins);
  for (int b = 0; b < bins; ++b) {
    const double left = mel(low) + b * delta, center = left + delta, right = center + delta;
    double energy = 0;
    for (int k = 0; k < fft / 2; ++k) {  // the Nyquist bin carries no weight
      const double m = mel(rate / fft * k);
      energy +=
          std::max(0.0, std::min((m - left) / (center - left), (right - m) / (right - center))) *
          power[k];
    }
    out[b] = std::log(std::max(energy, static_cast<double>(FLT_EPSILON)));
  }
  return out;
}

// White noise keeps every mel bin within ~20 dB of the loudest, where float32
// rounding is ~1e-5 in the log; 1e-3 is the tolerance.
TEST(Fbank, MatchesTheDefinitionEvaluatedInDouble) {
  const std::vector<float> x = noise(1200, 0.4f, 7);
  const Tensor features = FbankComputer(FbankOptions{}).compute(x);
  ASSERT_EQ(features.shape(), (Shape{6, 80}));
  for (int64_t t : {0, 3, 5}) {
    const std::vector<double> expected = reference_frame(x, t * 160);
    for (int64_t b = 0; b < 80; ++b) {
      EXPECT_NEAR(features.item_float({t, b}), expected[static_cast<size_t>(b)], 1e-3)
          << "frame " << t << " bin " << b;
    }
  }
}

TEST(Fbank, EnergyColumnIsFirstOrLastAndLeavesTheMelColumnsAlone) {
  const std::vector<float> x = noise(4000, 0.3f, 3);
  const Tensor mel = FbankComputer(FbankOptions{}).compute(x);
  FbankOptions o;
  o.use_energy = true;
  const Tensor kaldi_layout = FbankComputer(o).compute(x);
  o.htk_compat = true;
  const Tensor htk_layout = FbankComputer(o).compute(x);
  ASSERT_EQ(kaldi_layout.shape(), (Shape{mel.size(0), 81}));
  EXPECT_TRUE(bit_equal(kaldi_layout.slice(1, 1, 81).contiguous(), mel));
  EXPECT_TRUE(bit_equal(htk_layout.slice(1, 0, 80).contiguous(), mel));
  EXPECT_TRUE(bit_equal(htk_layout.slice(1, 80, 81).contiguous(),
                        kaldi_layout.slice(1, 0, 1).contiguous()));
  // Raw energy of frame 0: log of the sum of squares after DC removal.
  double mean = 0, energy = 0;
  for (int j = 0; j < 400; ++j) mean += x[j] * 32768.0;
  mean /= 400;
  for (int j = 0; j < 400; ++j) energy += std::pow(x[j] * 32768.0 - mean, 2);
  EXPECT_NEAR(kaldi_layout.item_float({0, 0}), std::log(energy), 1e-5);
}

// Frames are independent: featurising audio in pieces (keeping the samples
// from num_frames * shift on) gives the same bits as featurising it whole.
TEST(Fbank, PiecewiseEqualsWhole) {
  const std::vector<float> x = noise(16000, 0.3f, 4);
  const FbankComputer computer(FbankOptions{});
  const Tensor whole = computer.compute(x);
  std::vector<float> pending;
  std::vector<float> rows;
  size_t offset = 0;
  for (size_t piece : {100u, 350u, 1600u, 7u, 5000u, 3943u, 5000u}) {
    pending.insert(pending.end(), x.begin() + offset, x.begin() + offset + piece);
    offset += piece;
    const Tensor part = computer.compute(pending);
    rows.insert(rows.end(), part.data<float>(), part.data<float>() + part.numel());
    pending.erase(pending.begin(), pending.begin() + part.size(0) * 160);
  }
  ASSERT_EQ(offset, x.size());
  EXPECT_TRUE(bit_equal(Tensor::from_vector(rows, {whole.size(0), 80}), whole));
}

TEST(Fbank, ConcurrentCallsAgreeBitwise) {
  const std::vector<float> x = noise(48000, 0.3f, 5);
  const FbankComputer computer(FbankOptions{});
  const Tensor expected = computer.compute(x);
  std::vector<Tensor> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = computer.compute(x); });
  }
  for (std::thread& t : threads) t.join();
  for (const Tensor& r : results) EXPECT_TRUE(bit_equal(r, expected));
}

TEST(Fbank, MelFiltersAreTriangles) {
  const FbankComputer computer(FbankOptions{});
  int previous_peak = -1;
  for (size_t b = 0; b < 80; ++b) {
    const std::vector<float>& w = computer.mel_weights()[b];
    ASSERT_FALSE(w.empty()) << "bin " << b;
    const auto peak = std::max_element(w.begin(), w.end()) - w.begin();
    for (size_t k = 0; k < w.size(); ++k) {
      EXPECT_GT(w[k], 0.0f);
      EXPECT_LE(w[k], 1.0f);
      if (k > 0 && static_cast<int64_t>(k) <= peak) {
        EXPECT_GE(w[k], w[k - 1]);
      }
      if (static_cast<int64_t>(k) > peak) {
        EXPECT_LE(w[k], w[k - 1]);
      }
    }
    const int peak_bin = computer.mel_first_bin()[b] + static_cast<int>(peak);
    EXPECT_GE(peak_bin, previous_peak);
    EXPECT_LT(computer.mel_first_bin()[b] + static_cast<int>(w.size()), 257);
    previous_peak = peak_bin;
  }
  // 20 Hz is FFT bin 0.64: the first filter cannot start below bin 1.
  EXPECT_GE(computer.mel_first_bin()[0], 1);
  EXPECT_FLOAT_EQ(computer.window()[0], 0.0f);  // povey goes to zero at the edges
  EXPECT_FLOAT_EQ(computer.window()[399], 0.0f);
}

// Not a benchmark: a guard against a pathological slowdown (e.g. planning
// or allocating per frame). 10 s takes a few ms; the bound leaves 50x room
// for a loaded 2-core CI machine.
TEST(Fbank, TenSecondsTakeMilliseconds) {
  const std::vector<float> x = noise(160000, 0.3f, 6);
  const FbankComputer computer(FbankOptions{});
  computer.compute(x);  // warm caches
  double best_ms = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Tensor f = computer.compute(x);
    const auto stop = std::chrono::steady_clock::now();
    ASSERT_EQ(f.size(0), 998);
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(stop - start).count());
  }
  std::printf("fbank of 10 s at 16 kHz: %.2f ms (best of 5)\n", best_ms);
  EXPECT_LT(best_ms, 250.0);
}

}  // namespace
}  // namespace oasr
