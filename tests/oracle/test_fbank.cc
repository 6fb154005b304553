// The audio front end against PyTorch (gen_fbank.py): files written by the
// generator are decoded with load_audio and featurised with FbankComputer;
// the features must match torchaudio.compliance.kaldi.fbank, and the decoded
// samples must match the samples the generator wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "audio/audio_file.h"
#include "audio/fbank.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using audio::DecodedAudio;
using audio::FbankComputer;
using audio::FbankOptions;
using nlohmann::json;
using testing::all_close;
using testing::bit_equal;

// Tolerance. The issue asks for 1e-3 absolute on log-mel features, and that
// is what every feature within about 60 dB of its frame's loudest mel bin
// gets. Further down it cannot hold for any float32 implementation: an FFT
// in float32 perturbs every bin by a few ulp of the frame's largest spectral
// amplitude, so a bin whose power is R times below the frame's peak has its
// log-power perturbed by about 2 ulp * sqrt(R). torchaudio's own float32
// features differ from the same definition evaluated in float64 by up to
// 0.52 on the chirp (150 dB below the peak in its quietest bins). Hence
//   |ours - torchaudio| <= 1e-3 + kUlpsOfPeak * 2^-24 * sqrt(peak / mel_b)
// (sqrt(R) becomes R for magnitude spectra, use_power = false). The largest
// multiple of 2^-24 * sqrt(R) needed across the cases is 1.9; 8 leaves
// headroom for other FFT builds, and at 60 dB adds only 5e-4.
constexpr double kLogFeatureTolerance = 1e-3;
constexpr double kUlpsOfPeak = 8.0;
constexpr double kFloatUlp = 0x1p-24;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

FbankOptions options_from_kwargs(const json& kw) {
  FbankOptions o;
  o.sample_rate = kw.at("sample_frequency").get<double>();
  o.num_mel_bins = kw.at("num_mel_bins").get<int>();
  o.frame_length_ms = kw.at("frame_length").get<double>();
  o.frame_shift_ms = kw.at("frame_shift").get<double>();
  o.dither = kw.at("dither").get<double>();
  o.energy_floor = kw.at("energy_floor").get<double>();
  o.snip_edges = kw.at("snip_edges").get<bool>();
  o.preemphasis_coefficient = kw.at("preemphasis_coefficient").get<double>();
  o.remove_dc_offset = kw.at("remove_dc_offset").get<bool>();
  o.window_type = audio::parse_fbank_window(kw.at("window_type").get<std::string>());
  o.blackman_coeff = kw.at("blackman_coeff").get<double>();
  o.round_to_power_of_two = kw.at("round_to_power_of_two").get<bool>();
  o.use_energy = kw.at("use_energy").get<bool>();
  o.raw_energy = kw.at("raw_energy").get<bool>();
  o.htk_compat = kw.at("htk_compat").get<bool>();
  o.use_log_fbank = kw.at("use_log_fbank").get<bool>();
  o.use_power = kw.at("use_power").get<bool>();
  o.low_freq = kw.at("low_freq").get<double>();
  o.high_freq = kw.at("high_freq").get<double>();
  o.waveform_scale = 32768.0f;  // the generator scales as WeNet does
  return o;
}

struct Agreement {
  double max_diff = 0;              // largest |actual - expected| (relative when linear)
  double max_diff_within_60db = 0;  // the same over features within 60 dB of the frame peak
};

// Compares features with the tolerance above; the frame's peak is taken from
// `expected`. Energy columns (time-domain sums, no FFT) get 1e-3 flat.
::testing::AssertionResult features_close(const Tensor& actual, const Tensor& expected,
                                          const FbankOptions& o, Agreement* agreement) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " != expected "
                                         << shape_str(expected.shape());
  }
  const int64_t frames = actual.size(0);
  const int64_t dim = actual.size(1);
  const int64_t energy_column = !o.use_energy ? -1 : (o.htk_compat ? o.num_mel_bins : 0);
  const int64_t first_mel = o.use_energy && !o.htk_compat ? 1 : 0;
  const float* pa = actual.data<float>();
  const float* pe = expected.data<float>();
  int64_t failures = 0;
  std::ostringstream first_failure;
  for (int64_t t = 0; t < frames; ++t) {
    const float* a = pa + t * dim;
    const float* e = pe + t * dim;
    // Mel energy of the frame's loudest bin, as a log (or as a linear value).
    double peak = -INFINITY;
    for (int64_t b = first_mel; b < first_mel + o.num_mel_bins; ++b)
      peak = std::max<double>(peak, e[b]);
    for (int64_t j = 0; j < dim; ++j) {
      double diff = std::fabs(static_cast<double>(a[j]) - e[j]);
      double allowed = kLogFeatureTolerance;
      double below_peak_db = 0;
      if (j != energy_column) {
        // Power ratio R between the frame's peak and this bin.
        const double log_ratio =
            o.use_log_fbank ? peak - e[j] : std::log(peak / std::max<double>(e[j], 1e-30));
        below_peak_db = 10.0 * log_ratio / std::log(10.0) * (o.use_power ? 1.0 : 2.0);
        const double spread =
            o.use_power ? std::exp(0.5 * log_ratio) : std::exp(log_ratio);  // sqrt(R) or R
        allowed += kUlpsOfPeak * kFloatUlp * spread;
        if (!o.use_log_fbank) diff /= std::max<double>(std::fabs(e[j]), 1e-30);
      }
      agreement->max_diff = std::max(agreement->max_diff, diff);
      if (below_peak_db <= 60.0) {
        agreement->max_diff_within_60db = std::max(agreement->max_diff_within_60db, diff);
      }
      if (!(diff <= allowed)) {
        if (failures++ == 0) {
          first_failure << "frame " << t << " column " << j << ": got " << a[j] << ", expected "
                        << e[j] << " (" << below_peak_db << " dB below the frame peak, allowed "
                        << allowed << ")";
        }
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << actual.numel()
         << " features out of tolerance; first: " << first_failure.str();
}

// Runs every fbank case of `group` (the generator's grouping) against
// torchaudio in float32 (what WeNet computes) and in float64 (the exact
// value of the same definition); returns how many ran so a test notices
// cases that went missing.
int check_fbank_group(const std::string& group) {
  int ran = 0;
  for (const json& c : oracle().cases.at("fbank")) {
    if (c.at("group") != group) continue;
    const std::string name = c.at("name");
    SCOPED_TRACE("fbank case " + name);
    ++ran;
    const DecodedAudio decoded = audio::load_audio(testing::oracle_dir() / c.at("file"), 0);
    EXPECT_EQ(decoded.sample_rate, c.at("sample_rate").get<int>());
    EXPECT_EQ(static_cast<int64_t>(decoded.samples.size()), c.at("num_samples").get<int64_t>());

    const FbankOptions options = options_from_kwargs(c.at("kwargs"));
    const FbankComputer computer(options);
    const Tensor actual = computer.compute(decoded.samples);
    EXPECT_EQ(actual.size(0), computer.num_frames(static_cast<int64_t>(decoded.samples.size())));
    if (c.at("torchaudio_refused").get<bool>()) {
      // torchaudio asserts on fewer samples than a window; Kaldi gives 0 frames.
      EXPECT_EQ(actual.shape(), (Shape{0, options.feature_dim()}));
      continue;
    }
    Agreement vs_float32, vs_float64;
    EXPECT_TRUE(features_close(actual, oracle().file.get("fbank/" + name + "/expected"), options,
                               &vs_float32));
    EXPECT_TRUE(features_close(actual, oracle().file.get("fbank/" + name + "/expected_f64"),
                               options, &vs_float64));
    std::printf(
        "  %-26s %4ld frames  max |diff| vs torchaudio f32: %.2g (%.2g within 60 dB), "
        "vs f64: %.2g (%.2g)%s\n",
        name.c_str(), static_cast<long>(actual.size(0)), vs_float32.max_diff,
        vs_float32.max_diff_within_60db, vs_float64.max_diff, vs_float64.max_diff_within_60db,
        options.use_log_fbank ? "" : " [relative]");
  }
  return ran;
}

TEST(FbankOracle, WeNetSettingsAt16kHz) {
  // sine mixture, chirp, white noise, near-silence, digital silence, clipped
  // square wave, speech-like.
  EXPECT_EQ(check_fbank_group("wenet_16k"), 7);
}

TEST(FbankOracle, InputsAroundOneFrame) {
  EXPECT_EQ(check_fbank_group("around_one_frame"), 5);  // 399, 400, 401, 480, 560 samples
}

TEST(FbankOracle, OtherSampleRates) {
  EXPECT_EQ(check_fbank_group("other_rates"), 4);  // 8 kHz twice, 22.05 kHz, 44.1 kHz
}

TEST(FbankOracle, NonDefaultOptions) {
  EXPECT_EQ(check_fbank_group("options"), 13);
}

// Digital silence: every frame is exactly zero after DC removal, so every
// feature is exactly log(FLT_EPSILON), in torchaudio and here.
TEST(FbankOracle, DigitalSilenceIsTheLogFloorExactly) {
  const DecodedAudio decoded =
      audio::load_audio(testing::oracle_dir() / "fbank_digital_silence.wav", 0);
  const Tensor actual = FbankComputer(FbankOptions{}).compute(decoded.samples);
  EXPECT_TRUE(bit_equal(actual, oracle().file.get("fbank/digital_silence/expected")));
}

// ---- decoding --------------------------------------------------------------------

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const json* find_decode_case(const std::string& name) {
  for (const json& c : oracle().cases.at("decode")) {
    if (c.at("name") == name) return &c;
  }
  return nullptr;
}

class DecodeOracle : public ::testing::TestWithParam<const char*> {};

// Integer PCM (8/16/24-bit), stereo averaging, float pass-through and FLAC:
// the decoded samples equal the generator's own, bit for bit, from a path
// and from the same bytes in memory.
TEST_P(DecodeOracle, ExactSamples) {
  const json* c = find_decode_case(GetParam());
  ASSERT_NE(c, nullptr) << "the generator wrote no case " << GetParam();
  if (c->contains("unavailable")) {
    GTEST_SKIP() << "torchaudio could not write this format here: " << c->at("unavailable");
  }
  const auto path = testing::oracle_dir() / c->at("file");
  const Tensor expected =
      oracle().file.get("decode/" + c->at("name").get<std::string>() + "/expected");
  const DecodedAudio from_file = audio::load_audio(path, 0);
  EXPECT_EQ(from_file.sample_rate, c->at("sample_rate").get<int>());
  const auto n = static_cast<int64_t>(from_file.samples.size());
  EXPECT_TRUE(bit_equal(Tensor::from_vector(from_file.samples, {n}), expected));

  const DecodedAudio from_memory = audio::load_audio_from_memory(read_bytes(path), "bytes", {});
  EXPECT_EQ(from_memory.samples, from_file.samples);
  EXPECT_EQ(from_memory.source_format, from_file.source_format);
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeOracle,
                         ::testing::Values("int16_mono", "stereo_average", "int24_mono",
                                           "uint8_mono", "float32_unclipped", "flac16"));

TEST(DecodeOracleLossy, OggVorbisMatchesLibvorbisThroughTorchaudio) {
  const json* c = find_decode_case("ogg_vorbis");
  ASSERT_NE(c, nullptr);
  if (c->contains("unavailable")) GTEST_SKIP() << c->at("unavailable");
  const DecodedAudio decoded = audio::load_audio(testing::oracle_dir() / c->at("file"), 0);
  const Tensor expected = oracle().file.get("decode/ogg_vorbis/expected");
  const auto n = static_cast<int64_t>(decoded.samples.size());
  ASSERT_EQ(n, expected.numel());
  // Both sides run libvorbis's decoder, but torchaudio's sox backend hands
  // the samples over as 16-bit integers: one int16 step (2^-15) apart at most.
  EXPECT_TRUE(all_close(Tensor::from_vector(decoded.samples, {n}), expected, 0x1p-15f, 0.0f));
}

// 8 kHz tones resampled to 16 kHz against the tones themselves evaluated at
// 16 kHz (a definition-based reference), and loosely against torchaudio's
// own (different) resampler.
TEST(DecodeOracleResample, EightToSixteenKilohertz) {
  const json* c = find_decode_case("resample_8k_16k");
  ASSERT_NE(c, nullptr);
  const DecodedAudio decoded = audio::load_audio(testing::oracle_dir() / c->at("file"), 16000);
  EXPECT_EQ(decoded.source_sample_rate, 8000);
  EXPECT_EQ(decoded.sample_rate, 16000);
  const Tensor analytic = oracle().file.get("decode/resample_8k_16k/expected");
  const Tensor torchaudio = oracle().file.get("decode/resample_8k_16k/torchaudio");
  const auto n = static_cast<int64_t>(decoded.samples.size());
  ASSERT_EQ(n, analytic.numel());  // exactly twice the input length
  ASSERT_EQ(n, torchaudio.numel());

  // Away from the ends (the tones start and stop abruptly there, which no
  // band-limited resampler reproduces), soxr's HQ passband is flat to 0.01 dB:
  // 0.12% of the 0.75 peak amplitude is 9e-4, plus 1.5e-5 for the int16
  // quantisation of the input (2e-5 observed). torchaudio's windowed-sinc
  // resampler (6 zero crossings) rolls off earlier, hence the loose 2%.
  const int64_t margin = 400;
  const Tensor ours = Tensor::from_vector(decoded.samples, {n}).slice(0, margin, n - margin);
  EXPECT_TRUE(all_close(ours, analytic.slice(0, margin, n - margin), 1e-3f, 0.0f));
  double diff2 = 0, ref2 = 0;
  const float* pt = torchaudio.data<float>();
  for (int64_t i = margin; i < n - margin; ++i) {
    diff2 += std::pow(decoded.samples[static_cast<size_t>(i)] - pt[i], 2);
    ref2 += std::pow(pt[i], 2);
  }
  const double relative_rms = std::sqrt(diff2 / ref2);
  EXPECT_LT(relative_rms, 2e-2) << "relative RMS difference from torchaudio";
  double worst_analytic = 0;
  const float* pa = analytic.data<float>();
  for (int64_t i = margin; i < n - margin; ++i) {
    worst_analytic = std::max<double>(worst_analytic,
                                      std::fabs(decoded.samples[static_cast<size_t>(i)] - pa[i]));
  }
  std::printf(
      "8k->16k: max |diff| from the analytic tones %.3g, relative RMS from torchaudio %.3g\n",
      worst_analytic, relative_rms);
}

}  // namespace
}  // namespace oasr
