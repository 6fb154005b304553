// WhisperLogMel against Hugging Face's WhisperFeatureExtractor
// (gen_whisper_mel.py): the filterbank and window as HF builds them, and the
// features of every signal, 80 and 128 mel bins, against HF's numpy path
// (float64 FFT: our definition) and HF's default torch path (float32 STFT).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "audio/whisper_mel.h"
#include "core/error.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using audio::WhisperLogMel;

// Tolerances on the features, which lie in about [-1.5, 1.5].
// numpy path: the same double-precision arithmetic up to the FFT's
// summation order and libm's log10, then identical float32 steps. Every
// feature of every case is bit-equal today; the tolerance allows a float32
// rounding flip of log10 (1 ulp = 1.2e-7 at magnitude 1, then / 4) in case
// another libm or FFT order moves a value across a rounding boundary.
constexpr double kNumpyTolerance = 2.5e-7;
// torch path: a float32 STFT and float32 filterbank product; HF's two paths
// differ from each other by up to 4.9e-5 on these signals.
constexpr double kTorchTolerance = 1e-4;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

std::vector<float> samples_of(const std::string& name) {
  const Tensor t = oracle().file.get(name + "/samples");
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

// The generator stores float64 arrays as their raw bytes (uint8).
std::vector<double> float64_tensor(const std::string& name) {
  const Tensor t = oracle().file.get(name);
  std::vector<double> out(static_cast<size_t>(t.numel()) / sizeof(double));
  std::memcpy(out.data(), t.data<uint8_t>(), out.size() * sizeof(double));
  return out;
}

struct Diff {
  double max_abs = 0;
  int64_t exact = 0;  // bit-equal features
};

Diff compare(const Tensor& actual, const Tensor& expected) {
  Diff d;
  const float* a = actual.data<float>();
  const float* e = expected.data<float>();
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    if (std::isnan(a[i]) || std::isnan(e[i])) return Diff{INFINITY, 0};
    d.max_abs = std::max(d.max_abs, diff);
    if (a[i] == e[i]) ++d.exact;
  }
  return d;
}

TEST(WhisperMelOracle, WindowMatchesHf) {
  const std::vector<double> expected = float64_tensor("window");
  const WhisperLogMel mel(80);
  ASSERT_EQ(expected.size(), static_cast<size_t>(WhisperLogMel::kFftSize));
  double worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::fabs(mel.window()[i] - expected[i]));
  }
  EXPECT_LE(worst, 1e-15);
}

TEST(WhisperMelOracle, FiltersMatchHf) {
  for (int64_t n_mels : {80, 128}) {
    const std::vector<double> expected = float64_tensor("filters/mel" + std::to_string(n_mels));
    ASSERT_EQ(expected.size(), static_cast<size_t>(WhisperLogMel::kFrequencyBins * n_mels));
    const std::vector<double> filters = WhisperLogMel(n_mels).mel_filters();
    const double* e = expected.data();
    // Near a triangle's edge a weight is the difference of two nearby values,
    // so the last-bit differences of the oracle's float64 log/exp (numpy's
    // SIMD paths differ between CPUs) reach 1e-11 relative there while the
    // absolute error stays below 1e-16: the bound is relative to the largest
    // weight (a wrong formula is off by 1e-4 of it or more).
    const double peak = *std::max_element(expected.begin(), expected.end());
    double worst_relative = 0;
    int64_t support_mismatch = 0;
    for (size_t i = 0; i < filters.size(); ++i) {
      if ((filters[i] > 0) != (e[i] > 0)) ++support_mismatch;
      worst_relative = std::max(worst_relative, std::fabs(filters[i] - e[i]) / peak);
    }
    EXPECT_EQ(support_mismatch, 0) << n_mels << " mels";
    EXPECT_LE(worst_relative, 1e-12) << n_mels << " mels (relative to the largest weight)";
  }
}

TEST(WhisperMelOracle, FeaturesMatchHf) {
  const auto& meta = oracle().cases;
  for (const auto& note : meta.at("notes"))
    std::cout << "note: " << note.get<std::string>() << "\n";
  double worst_numpy = 0;
  double worst_torch = 0;
  for (int64_t n_mels : meta.at("mel_sizes").get<std::vector<int64_t>>()) {
    const WhisperLogMel mel(n_mels);
    for (const auto& case_name : meta.at("cases")) {
      const std::string name = case_name.get<std::string>();
      SCOPED_TRACE(name + " mel" + std::to_string(n_mels));
      const std::vector<float> samples = samples_of(name);
      const Tensor actual = mel.compute(samples);
      ASSERT_EQ(actual.shape(), (Shape{n_mels, WhisperLogMel::kFrames}));
      const std::string prefix = name + "/mel" + std::to_string(n_mels) + "/";
      const Diff numpy = compare(actual, oracle().file.get(prefix + "numpy"));
      const Diff torch = compare(actual, oracle().file.get(prefix + "torch"));
      EXPECT_LE(numpy.max_abs, kNumpyTolerance);
      EXPECT_LE(torch.max_abs, kTorchTolerance);
      std::cout << name << " mel" << n_mels << ": max |ours - HF numpy| " << numpy.max_abs << " ("
                << numpy.exact << "/" << actual.numel() << " bit-equal), max |ours - HF torch| "
                << torch.max_abs << "\n";
      worst_numpy = std::max(worst_numpy, numpy.max_abs);
      worst_torch = std::max(worst_torch, torch.max_abs);
    }
  }
  ::testing::Test::RecordProperty("max_abs_vs_hf_numpy", std::to_string(worst_numpy));
  ::testing::Test::RecordProperty("max_abs_vs_hf_torch", std::to_string(worst_torch));
  std::cout << "worst: max |ours - HF numpy| " << worst_numpy << ", max |ours - HF torch| "
            << worst_torch << "\n";
}

// HF's long-form input: the whole signal's features (no 30 s padding, the
// reflection at the signal's own end, one max - 8 clamp over all of it).
TEST(WhisperMelOracle, WholeSignalMatchesHfLongFormInput) {
  const auto& meta = oracle().cases;
  if (!meta.contains("long_cases") || meta.at("long_cases").empty()) {
    GTEST_SKIP() << "no long case: " << meta.at("notes").dump();
  }
  for (int64_t n_mels : meta.at("mel_sizes").get<std::vector<int64_t>>()) {
    const WhisperLogMel mel(n_mels);
    for (const auto& case_name : meta.at("long_cases")) {
      const std::string name = case_name.get<std::string>();
      SCOPED_TRACE(name + " mel" + std::to_string(n_mels));
      const std::vector<float> samples = samples_of(name);
      ASSERT_GT(samples.size(), static_cast<size_t>(WhisperLogMel::kChunkSamples));
      const Tensor actual = mel.compute_whole(samples);
      const auto frames = static_cast<int64_t>(samples.size()) / WhisperLogMel::kHopLength;
      ASSERT_EQ(actual.shape(), (Shape{n_mels, frames}));
      const std::string prefix = name + "/mel" + std::to_string(n_mels) + "/";
      const Diff numpy = compare(actual, oracle().file.get(prefix + "whole_numpy"));
      const Diff torch = compare(actual, oracle().file.get(prefix + "whole_torch"));
      EXPECT_LE(numpy.max_abs, kNumpyTolerance);
      EXPECT_LE(torch.max_abs, kTorchTolerance);
      std::cout << name << " mel" << n_mels << " whole: max |ours - HF numpy| " << numpy.max_abs
                << " (" << numpy.exact << "/" << actual.numel()
                << " bit-equal), max |ours - HF torch| " << torch.max_abs << "\n";
    }
  }
  // Too short for the centring reflection: refused, naming the need.
  const WhisperLogMel mel(80);
  const std::vector<float> tiny(200, 0.1f);
  EXPECT_THROW(mel.compute_whole(tiny), oasr::Error);
}

// The real-speech case must be there where CI installs the Asterisk prompts.
TEST(WhisperMelOracle, RealSpeechCasePresent) {
  bool found = false;
  for (const auto& c : oracle().cases.at("cases")) found = found || c == "speech";
  if (!found) GTEST_SKIP() << "no real-speech case: " << oracle().cases.at("notes").dump();
  const std::vector<float> speech = samples_of("speech");
  EXPECT_GT(speech.size(), static_cast<size_t>(10 * WhisperLogMel::kSampleRate));
}

}  // namespace
}  // namespace oasr
