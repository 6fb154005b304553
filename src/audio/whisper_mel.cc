// Whisper log-mel (see whisper_mel.h for the definition and precision).
#include "audio/whisper_mel.h"

#include <kissfft/kissfft.hh>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>

#include "core/error.h"

namespace oasr::audio {

namespace {

constexpr int kPad = WhisperLogMel::kFftSize / 2;  // centred frames: reflect by n_fft / 2
constexpr double kMelFloor = 1e-10;                // HF's mel_floor
constexpr double kMaxFrequencyHz = 8000.0;         // HF passes max_frequency=8000
constexpr int64_t kMaxMels = 1024;

// Slaney's mel scale (librosa / HF mel_scale="slaney"): linear below 1 kHz,
// logarithmic above, 27 mels per factor of 6.4.
double hertz_to_mel_slaney(double hz) {
  constexpr double kMinLogHz = 1000.0;
  constexpr double kMinLogMel = 15.0;
  const double logstep = 27.0 / std::log(6.4);
  if (hz >= kMinLogHz) return kMinLogMel + std::log(hz / kMinLogHz) * logstep;
  return 3.0 * hz / 200.0;
}

double mel_to_hertz_slaney(double mel) {
  constexpr double kMinLogHz = 1000.0;
  constexpr double kMinLogMel = 15.0;
  const double logstep = std::log(6.4) / 27.0;
  if (mel >= kMinLogMel) return kMinLogHz * std::exp(logstep * (mel - kMinLogMel));
  return 200.0 * mel / 3.0;
}

// numpy.linspace(start, stop, num): start + i * step, the last point exactly stop.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> out(static_cast<size_t>(num));
  const double step = (stop - start) / (num - 1);
  for (int i = 0; i < num; ++i) out[static_cast<size_t>(i)] = i * step + start;
  out.back() = stop;
  return out;
}

// Reflect an index of the centred (padded) signal back into [0, n), without
// repeating the edge sample (numpy.pad mode="reflect"); n > kPad here.
int64_t reflect(int64_t index, int64_t n) {
  if (index < 0) return -index;
  if (index >= n) return 2 * (n - 1) - index;
  return index;
}

}  // namespace

// kissfft's C++ template in double precision: a real FFT of 400 points is a
// complex FFT of 200 = 4 * 2 * 5 * 5 (radix 2, 4 and 5 butterflies, none of
// which touch the plan's mutable scratch, so transform_real is re-entrant).
struct WhisperLogMel::Plan {
  Plan() : fft(kFftSize / 2, /*inverse=*/false) {}
  kissfft<double> fft;
};

WhisperLogMel::WhisperLogMel(int64_t n_mels) : n_mels_(n_mels) {
  OASR_CHECK(n_mels >= 1 && n_mels <= kMaxMels, kInvalidArgument,
             "WhisperLogMel: n_mels must be in [1, ", kMaxMels, "] (Whisper uses 80 or 128), got ",
             n_mels);

  // numpy.hanning(401)[:-1], numpy's own formula: 0.5 + 0.5 cos(pi n / (M - 1)),
  // n = 1 - M, 3 - M, ..., M - 1.
  window_.resize(kFftSize);
  for (int i = 0; i < kFftSize; ++i) {
    const double n = 2.0 * i - kFftSize;  // 1 - M + 2 i with M = kFftSize + 1
    window_[static_cast<size_t>(i)] = 0.5 + 0.5 * std::cos(std::numbers::pi * n / kFftSize);
  }

  // HF's mel_filter_bank: triangles between consecutive filter edges spaced
  // evenly on the Slaney mel scale, evaluated at the FFT bin frequencies,
  // each scaled by 2 / (its width in Hz) (Slaney area normalisation).
  const int edges_count = static_cast<int>(n_mels_) + 2;
  const std::vector<double> mels =
      linspace(hertz_to_mel_slaney(0.0), hertz_to_mel_slaney(kMaxFrequencyHz), edges_count);
  std::vector<double> edges(mels.size());
  for (size_t i = 0; i < mels.size(); ++i) edges[i] = mel_to_hertz_slaney(mels[i]);
  const std::vector<double> bin_hz = linspace(0.0, kSampleRate / 2, kFrequencyBins);

  filters_.resize(static_cast<size_t>(n_mels_));
  for (size_t b = 0; b < filters_.size(); ++b) {
    const double lower_width = edges[b + 1] - edges[b];
    const double upper_width = edges[b + 2] - edges[b + 1];
    const double enorm = 2.0 / (edges[b + 2] - edges[b]);
    Filter& filter = filters_[b];
    int first = -1;
    for (int k = 0; k < kFrequencyBins; ++k) {
      const double f = bin_hz[static_cast<size_t>(k)];
      const double down = -(edges[b] - f) / lower_width;   // rising edge
      const double up = (edges[b + 2] - f) / upper_width;  // falling edge
      const double weight = std::max(0.0, std::min(down, up)) * enorm;
      if (weight > 0.0) {
        if (first < 0) first = k;
        filter.weights.resize(static_cast<size_t>(k - first + 1), 0.0);
        filter.weights.back() = weight;
      }
    }
    // A filter narrower than one FFT bin has no weight (HF warns; its
    // output is the floor).
    filter.first_bin = std::max(first, 0);
  }
  plan_ = std::make_shared<const Plan>();
}

std::vector<double> WhisperLogMel::mel_filters() const {
  std::vector<double> out(static_cast<size_t>(kFrequencyBins * n_mels_), 0.0);
  for (size_t b = 0; b < filters_.size(); ++b) {
    const Filter& filter = filters_[b];
    for (size_t j = 0; j < filter.weights.size(); ++j) {
      out[(filter.first_bin + j) * static_cast<size_t>(n_mels_) + b] = filter.weights[j];
    }
  }
  return out;
}

Tensor WhisperLogMel::compute(std::span<const float> samples) const {
  OASR_CHECK(samples.size() <= static_cast<size_t>(kChunkSamples), kInvalidArgument,
             "WhisperLogMel: got ", samples.size(), " samples (",
             static_cast<double>(samples.size()) / kSampleRate,
             " s); Whisper featurises at most 30 s (", kChunkSamples,
             " samples at 16 kHz) at a time: split longer audio into 30 s windows, or take "
             "compute_whole()");
  return compute_padded(samples, kChunkSamples);
}

Tensor WhisperLogMel::compute_whole(std::span<const float> samples) const {
  OASR_CHECK(samples.size() > static_cast<size_t>(kPad), kInvalidArgument,
             "WhisperLogMel: the whole-signal log-mel needs more than ", kPad,
             " samples (the centring reflection), got ", samples.size());
  return compute_padded(samples, static_cast<int64_t>(samples.size()));
}

Tensor WhisperLogMel::compute_padded(std::span<const float> samples, int64_t padded_length) const {
  for (size_t i = 0; i < samples.size(); ++i) {
    OASR_CHECK(std::isfinite(samples[i]), kInvalidArgument, "WhisperLogMel: sample ", i,
               " is not finite (", samples[i], ")");
  }

  // The signal after HF's zero padding to padded_length; the centring
  // reflection is applied by index while gathering frames. 1 + n / hop
  // centred frames, the last one dropped.
  const int64_t n = padded_length;
  const int64_t frames = n / kHopLength;
  const auto given = static_cast<int64_t>(samples.size());
  auto sample_at = [&](int64_t padded_index) -> double {
    const int64_t i = reflect(padded_index - kPad, n);
    return i < given ? static_cast<double>(samples[static_cast<size_t>(i)]) : 0.0;
  };

  const int mels = static_cast<int>(n_mels_);
  // log10 of the mel energies, float32 as HF casts them, [mels][kFrames].
  Tensor out = Tensor::empty({n_mels_, frames}, DType::kF32);
  float* log_mel = out.data<float>();

  std::vector<double> frame(kFftSize);
  std::vector<std::complex<double>> spectrum(kFftSize / 2);
  std::vector<double> power(kFrequencyBins);
  const float silent_log = static_cast<float>(std::log10(kMelFloor));
  float peak = -std::numeric_limits<float>::infinity();

  for (int64_t t = 0; t < frames; ++t) {
    const int64_t start = t * kHopLength;
    // Frames entirely inside the zero padding (most of them for short
    // clips) have zero power: skip their FFT.
    const bool inside = start - kPad >= 0 && start - kPad + kFftSize <= n;
    if (inside && start - kPad >= given) {
      for (int b = 0; b < mels; ++b) log_mel[static_cast<int64_t>(b) * frames + t] = silent_log;
      peak = std::max(peak, silent_log);
      continue;
    }
    const int64_t first = start - kPad;  // first sample of the frame, unpadded
    if (first >= 0 && first + kFftSize <= given) {
      const float* x = samples.data() + first;
      for (int j = 0; j < kFftSize; ++j) frame[j] = static_cast<double>(x[j]) * window_[j];
    } else {  // the frame reaches into the zero padding or the reflection
      for (int j = 0; j < kFftSize; ++j) frame[j] = sample_at(start + j) * window_[j];
    }
    plan_->fft.transform_real(frame.data(), spectrum.data());
    // transform_real packs DC and Nyquist (both real) into element 0.
    // HF stores the FFT as complex64 before taking |.|^2 in double: round
    // the same way so both see the same spectrum.
    auto power_of = [](double re, double im) {
      const double r = static_cast<float>(re);
      const double i = static_cast<float>(im);
      return r * r + i * i;
    };
    power[0] = power_of(spectrum[0].real(), 0.0);
    power[kFrequencyBins - 1] = power_of(spectrum[0].imag(), 0.0);
    for (int k = 1; k < kFrequencyBins - 1; ++k) {
      power[static_cast<size_t>(k)] = power_of(spectrum[k].real(), spectrum[k].imag());
    }
    for (int b = 0; b < mels; ++b) {
      const Filter& filter = filters_[static_cast<size_t>(b)];
      const double* bins = power.data() + filter.first_bin;
      double energy = 0.0;
      for (size_t j = 0; j < filter.weights.size(); ++j) energy += filter.weights[j] * bins[j];
      const auto value = static_cast<float>(std::log10(std::max(kMelFloor, energy)));
      log_mel[static_cast<int64_t>(b) * frames + t] = value;
      peak = std::max(peak, value);
    }
  }

  // Dynamic range limited to 8 (80 dB) below the loudest feature of the
  // signal, then scaled to about [-1, 1]; float32 steps as numpy does them.
  const float floor = peak - 8.0f;
  for (int64_t i = 0; i < out.numel(); ++i) {
    log_mel[i] = (std::max(log_mel[i], floor) + 4.0f) / 4.0f;
  }
  return out;
}

}  // namespace oasr::audio
