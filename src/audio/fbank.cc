// Kaldi / torchaudio fbank. Arithmetic mirrors torchaudio's float32 steps
// (pre-emphasis as a float multiply then a float subtract, window product,
// squared magnitude, log) so the two agree to float rounding; sums that
// torchaudio leaves to a float reduction (frame mean, energy, filterbank
// dot products) are accumulated in double here, which is never less accurate.
#include "audio/fbank.h"

#include <kissfft/kiss_fftr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

#include "core/error.h"

namespace oasr::audio {

namespace {

constexpr float kLogFloor = std::numeric_limits<float>::epsilon();  // torchaudio's EPSILON

double mel_scale(double hz) {
  return 1127.0 * std::log(1.0 + hz / 700.0);
}

int next_power_of_two(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Kaldi's effective upper edge: a non-positive high_freq is an offset from Nyquist.
double effective_high_freq(const FbankOptions& o) {
  const double nyquist = 0.5 * o.sample_rate;
  return o.high_freq <= 0.0 ? o.high_freq + nyquist : o.high_freq;
}

std::vector<float> make_window(FbankWindow type, int size, double blackman_coeff) {
  std::vector<float> window(static_cast<size_t>(size));
  const double a = 2.0 * std::numbers::pi / (size - 1);  // symmetric (non-periodic) windows
  for (int n = 0; n < size; ++n) {
    const double c = std::cos(a * n);
    double w = 1.0;
    switch (type) {
      case FbankWindow::kHanning:
        w = 0.5 - 0.5 * c;
        break;
      case FbankWindow::kPovey:
        w = std::pow(0.5 - 0.5 * c, 0.85);
        break;
      case FbankWindow::kHamming:
        w = 0.54 - 0.46 * c;
        break;
      case FbankWindow::kRectangular:
        w = 1.0;
        break;
      case FbankWindow::kBlackman:
        w = blackman_coeff - 0.5 * c + (0.5 - blackman_coeff) * std::cos(2.0 * a * n);
        break;
    }
    window[static_cast<size_t>(n)] = static_cast<float>(w);
  }
  return window;
}

// Reflects an out-of-range sample index back into [0, n) the way Kaldi does
// for snip_edges = false (the edge sample is repeated: -1 -> 0, n -> n-1).
int64_t reflect_index(int64_t index, int64_t n) {
  while (index < 0 || index >= n) index = index < 0 ? -index - 1 : 2 * n - 1 - index;
  return index;
}

}  // namespace

const char* fbank_window_name(FbankWindow window) {
  switch (window) {
    case FbankWindow::kPovey:
      return "povey";
    case FbankWindow::kHanning:
      return "hanning";
    case FbankWindow::kHamming:
      return "hamming";
    case FbankWindow::kRectangular:
      return "rectangular";
    case FbankWindow::kBlackman:
      return "blackman";
  }
  return "?";
}

FbankWindow parse_fbank_window(const std::string& name) {
  for (FbankWindow w : {FbankWindow::kPovey, FbankWindow::kHanning, FbankWindow::kHamming,
                        FbankWindow::kRectangular, FbankWindow::kBlackman}) {
    if (name == fbank_window_name(w)) return w;
  }
  OASR_THROW(kInvalidArgument, "unknown fbank window type '", name,
             "'; expected povey, hanning, hamming, rectangular or blackman");
}

int FbankOptions::window_size() const {
  // Evaluated as torchaudio does: int(rate * ms * 0.001), truncating.
  return static_cast<int>(sample_rate * frame_length_ms * 0.001);
}

int FbankOptions::window_shift() const {
  return static_cast<int>(sample_rate * frame_shift_ms * 0.001);
}

int FbankOptions::padded_window_size() const {
  return round_to_power_of_two ? next_power_of_two(window_size()) : window_size();
}

void FbankOptions::validate() const {
  OASR_CHECK(std::isfinite(sample_rate) && sample_rate > 0, kInvalidArgument,
             "FbankOptions: sample_rate must be positive, got ", sample_rate);
  OASR_CHECK(num_mel_bins > 3, kInvalidArgument, "FbankOptions: num_mel_bins must be > 3, got ",
             num_mel_bins);
  OASR_CHECK(std::isfinite(frame_length_ms) && window_size() >= 2, kInvalidArgument,
             "FbankOptions: frame_length_ms=", frame_length_ms, " at ", sample_rate,
             " Hz gives a window of ", window_size(), " samples; need at least 2");
  OASR_CHECK(std::isfinite(frame_shift_ms) && window_shift() > 0, kInvalidArgument,
             "FbankOptions: frame_shift_ms=", frame_shift_ms, " at ", sample_rate,
             " Hz gives a shift of ", window_shift(), " samples; need at least 1");
  OASR_CHECK(padded_window_size() % 2 == 0, kInvalidArgument, "FbankOptions: the FFT size ",
             padded_window_size(),
             " is odd; set round_to_power_of_two or choose a frame_length_ms giving an even "
             "window");
  OASR_CHECK(preemphasis_coefficient >= 0.0 && preemphasis_coefficient <= 1.0, kInvalidArgument,
             "FbankOptions: preemphasis_coefficient must be in [0, 1], got ",
             preemphasis_coefficient);
  OASR_CHECK(dither == 0.0, kUnsupported, "FbankOptions: dither=", dither,
             " is a training-time augmentation; oasr computes inference features, set dither "
             "to 0");
  OASR_CHECK(std::isfinite(energy_floor) && energy_floor >= 0.0, kInvalidArgument,
             "FbankOptions: energy_floor must be >= 0, got ", energy_floor);
  OASR_CHECK(std::isfinite(blackman_coeff), kInvalidArgument,
             "FbankOptions: blackman_coeff must be finite");
  OASR_CHECK(std::isfinite(waveform_scale) && waveform_scale > 0.0f, kInvalidArgument,
             "FbankOptions: waveform_scale must be positive, got ", waveform_scale);
  const double nyquist = 0.5 * sample_rate;
  const double high = effective_high_freq(*this);
  OASR_CHECK(std::isfinite(low_freq) && std::isfinite(high_freq) && low_freq >= 0.0 &&
                 low_freq < nyquist && high > 0.0 && high <= nyquist && low_freq < high,
             kInvalidArgument, "FbankOptions: need 0 <= low_freq < high_freq <= Nyquist (", nyquist,
             " Hz); got low_freq=", low_freq, " high_freq=", high_freq, " (effective ", high,
             " Hz)");
}

std::string FbankOptions::dump() const {
  std::ostringstream out;
  auto flag = [](bool b) { return b ? "true" : "false"; };
  out << "sample_rate=" << sample_rate << " num_mel_bins=" << num_mel_bins
      << " frame_length_ms=" << frame_length_ms << " frame_shift_ms=" << frame_shift_ms
      << " snip_edges=" << flag(snip_edges) << " dither=" << dither
      << " preemphasis_coefficient=" << preemphasis_coefficient
      << " remove_dc_offset=" << flag(remove_dc_offset)
      << " window_type=" << fbank_window_name(window_type) << " blackman_coeff=" << blackman_coeff
      << " round_to_power_of_two=" << flag(round_to_power_of_two)
      << " use_energy=" << flag(use_energy) << " raw_energy=" << flag(raw_energy)
      << " htk_compat=" << flag(htk_compat) << " energy_floor=" << energy_floor
      << " use_log_fbank=" << flag(use_log_fbank) << " use_power=" << flag(use_power)
      << " low_freq=" << low_freq << " high_freq=" << high_freq
      << " waveform_scale=" << waveform_scale;
  return out.str();
}

FbankComputer::FbankComputer(const FbankOptions& options) : options_(options) {
  options_.validate();
  window_size_ = options_.window_size();
  window_shift_ = options_.window_shift();
  padded_size_ = options_.padded_window_size();
  window_ = make_window(options_.window_type, window_size_, options_.blackman_coeff);

  // Triangles equally spaced on Kaldi's mel scale between low and high
  // frequency, over FFT bins 0 .. padded/2 - 1 (the Nyquist bin gets no
  // weight). The edges come from double-precision scalars, but the weights
  // are evaluated in float32 step by step as torchaudio's get_mel_banks does:
  // (mel - left) / (center - left) cancels digits, so float32 weights differ
  // from exact ones by up to ~1e-5 relative, and WeNet's features carry that.
  const int num_fft_bins = padded_size_ / 2;
  const auto bin_width_hz = static_cast<float>(options_.sample_rate / padded_size_);
  const double mel_low = mel_scale(options_.low_freq);
  const double mel_high = mel_scale(effective_high_freq(options_));
  const auto mel_low_f = static_cast<float>(mel_low);
  const auto mel_delta_f = static_cast<float>((mel_high - mel_low) / (options_.num_mel_bins + 1));
  std::vector<float> fft_bin_mel(static_cast<size_t>(num_fft_bins));
  for (int k = 0; k < num_fft_bins; ++k) {
    const float hz = bin_width_hz * static_cast<float>(k);
    const float ratio = 1.0f + hz / 700.0f;
    fft_bin_mel[static_cast<size_t>(k)] = 1127.0f * std::log(ratio);
  }
  mel_first_bin_.assign(static_cast<size_t>(options_.num_mel_bins), 0);
  mel_weights_.assign(static_cast<size_t>(options_.num_mel_bins), {});
  for (int b = 0; b < options_.num_mel_bins; ++b) {
    const auto index = static_cast<float>(b);
    const float left = index * mel_delta_f + mel_low_f;
    const float center = (index + 1.0f) * mel_delta_f + mel_low_f;
    const float right = (index + 2.0f) * mel_delta_f + mel_low_f;
    int first = -1;
    std::vector<float> weights;
    for (int k = 0; k < num_fft_bins; ++k) {
      const float mel = fft_bin_mel[static_cast<size_t>(k)];
      const float up = (mel - left) / (center - left);
      const float down = (right - mel) / (right - center);
      const float w = std::max(0.0f, std::min(up, down));
      if (w > 0.0f) {
        if (first < 0) first = k;
        weights.resize(static_cast<size_t>(k - first + 1), 0.0f);
        weights.back() = w;
      }
    }
    // A bin narrower than one FFT bin has no weight at all; its output is the
    // log floor, as in torchaudio.
    mel_first_bin_[static_cast<size_t>(b)] = std::max(first, 0);
    mel_weights_[static_cast<size_t>(b)] = std::move(weights);
  }
}

int64_t FbankComputer::num_frames(int64_t num_samples) const {
  if (num_samples <= 0) return 0;
  if (options_.snip_edges) {
    return num_samples < window_size_ ? 0 : 1 + (num_samples - window_size_) / window_shift_;
  }
  return (num_samples + window_shift_ / 2) / window_shift_;
}

Tensor FbankComputer::compute(std::span<const float> samples) const {
  const auto n = static_cast<int64_t>(samples.size());
  const int64_t frames = num_frames(n);
  const int dim = feature_dim();
  Tensor out = Tensor::empty({frames, dim}, DType::kF32);
  if (frames == 0) return out;

  // A plan per call keeps compute() re-entrant: kiss_fftr writes scratch
  // inside its state. The caller-supplied block needs no kiss-side free.
  size_t plan_bytes = 0;
  kiss_fftr_alloc(padded_size_, 0, nullptr, &plan_bytes);
  std::vector<unsigned char> plan_memory(plan_bytes);
  kiss_fftr_cfg plan = kiss_fftr_alloc(padded_size_, 0, plan_memory.data(), &plan_bytes);
  OASR_CHECK(plan != nullptr, kInternal, "kissfft could not plan a real FFT of size ",
             padded_size_);

  const FbankOptions& o = options_;
  const float scale = o.waveform_scale;
  const auto preemph = static_cast<float>(o.preemphasis_coefficient);
  const float log_energy_floor =
      o.energy_floor > 0.0 ? std::log(static_cast<float>(o.energy_floor)) : 0.0f;
  const int energy_column = o.htk_compat ? o.num_mel_bins : 0;
  const int mel_column = o.use_energy && !o.htk_compat ? 1 : 0;
  const int num_spectrum_bins = padded_size_ / 2 + 1;

  std::vector<float> frame(static_cast<size_t>(padded_size_), 0.0f);
  std::vector<kiss_fft_cpx> fft(static_cast<size_t>(num_spectrum_bins));
  std::vector<float> spectrum(static_cast<size_t>(num_spectrum_bins));
  float* features = out.data<float>();

  auto log_energy_of = [&](int count) {
    double energy = 0.0;
    for (int j = 0; j < count; ++j) energy += static_cast<double>(frame[j]) * frame[j];
    float value = std::log(std::max(static_cast<float>(energy), kLogFloor));
    if (o.energy_floor > 0.0) value = std::max(value, log_energy_floor);
    return value;
  };

  for (int64_t t = 0; t < frames; ++t) {
    // Gather the frame (reflecting at the edges when frames may overhang).
    const int64_t start =
        o.snip_edges ? t * window_shift_ : t * window_shift_ + window_shift_ / 2 - window_size_ / 2;
    const bool inside = start >= 0 && start + window_size_ <= n;
    for (int j = 0; j < window_size_; ++j) {
      const int64_t index = inside ? start + j : reflect_index(start + j, n);
      frame[static_cast<size_t>(j)] = samples[static_cast<size_t>(index)] * scale;
    }
    std::fill(frame.begin() + window_size_, frame.end(), 0.0f);

    if (o.remove_dc_offset) {
      double sum = 0.0;
      for (int j = 0; j < window_size_; ++j) sum += frame[j];
      const auto mean = static_cast<float>(sum / window_size_);
      for (int j = 0; j < window_size_; ++j) frame[j] -= mean;
    }
    float log_energy = 0.0f;
    if (o.use_energy && o.raw_energy) log_energy = log_energy_of(window_size_);
    if (preemph != 0.0f) {
      // Back to front so each step reads the not-yet-filtered neighbour; the
      // first sample uses itself (torchaudio's replicate padding).
      for (int j = window_size_ - 1; j > 0; --j) {
        const float product = preemph * frame[j - 1];
        frame[j] = frame[j] - product;
      }
      const float product = preemph * frame[0];
      frame[0] = frame[0] - product;
    }
    for (int j = 0; j < window_size_; ++j) frame[j] *= window_[static_cast<size_t>(j)];
    if (o.use_energy && !o.raw_energy) log_energy = log_energy_of(padded_size_);

    kiss_fftr(plan, frame.data(), fft.data());
    for (int k = 0; k < num_spectrum_bins; ++k) {
      const float re = fft[k].r;
      const float im = fft[k].i;
      spectrum[k] = o.use_power ? re * re + im * im : std::hypot(re, im);
    }

    float* row = features + t * dim;
    for (int b = 0; b < o.num_mel_bins; ++b) {
      const std::vector<float>& weights = mel_weights_[static_cast<size_t>(b)];
      const float* bins = spectrum.data() + mel_first_bin_[static_cast<size_t>(b)];
      double energy = 0.0;
      for (size_t k = 0; k < weights.size(); ++k) {
        energy += static_cast<double>(weights[k]) * bins[k];
      }
      float value = static_cast<float>(energy);
      if (o.use_log_fbank) value = std::log(std::max(value, kLogFloor));
      row[mel_column + b] = value;
    }
    if (o.use_energy) row[energy_column] = log_energy;
  }
  return out;
}

Tensor compute_fbank(std::span<const float> samples, const FbankOptions& options) {
  return FbankComputer(options).compute(samples);
}

}  // namespace oasr::audio
