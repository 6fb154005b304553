// NeMo's FilterbankFeatures at inference (see nemo_mel.h for the definition).
//
// Precision, step by step against NeMo's float32 torch graph:
// - pre-emphasis: a float multiply then a float subtract, as torch does
//   (the 0.97 is rounded to float first, as torch rounds a Python scalar
//   for a float32 tensor);
// - the window product in float (torch.stft multiplies before its FFT);
// - the FFT in double (kissfft's C++ template), its output rounded to
//   float32 where torch.stft returns complex64: a double FFT is the exact
//   spectrum up to ~1e-16, torch's float32 FFT is that plus its own
//   rounding, so the two differ by torch's error alone (a float32 FFT here
//   would add a second, independent error of the same size);
// - |Y| = sqrt(re^2 + im^2) and |Y|^2 in float, as torch (view_as_real,
//   pow, sum, sqrt, pow) takes them;
// - filterbank dot products in double, rounded to float (torch's sgemm sums
//   in float, in an order of its BLAS's choosing);
// - log in float; the normalisation's mean and variance summed in double,
//   each rounded to float where torch holds a float32 tensor, its subtract
//   and divide in float.
// What remains against NeMo is torch's float32 FFT (MKL's on the CPU,
// cuFFT's on a GPU; neither can be reproduced here): a Python rerun of
// NeMo's steps reproduces NeMo's features bit for bit, and the same rerun
// with the FFT taken in double (rounded to complex64) differs from NeMo by
// what this code does (1.4e-4 .. 5.1e-4 on the oracle fixture) and from this
// code by at most 3e-5. That FFT's rounding is a few 1e-7 of a frame's
// loudest bin; it shows in bands a recording barely reaches (the fixture's
// 8 kHz recordings above 4 kHz, log-mel near log(2^-24)), whose std over the
// utterance is small (0.07-0.2), and per_feature divides by that std. Where
// the log's guard does not mask such bands (mag_power 1, no pre-emphasis, a
// tiny clamp) the same error reaches 1e-3 .. 2e-3.
#include "audio/nemo_mel.h"

#include <kissfft/kissfft.hh>

#include <algorithm>
#include <cmath>
#include <complex>

#include "core/error.h"

namespace oasr::audio {

namespace {

// torch.floor_divide on int64 (get_seq_len): rounds towards -infinity.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Zeros on each side of the signal before the STFT: n_fft / 2 by torch.stft's
// centring, or NeMo's stft_pad_amount (n_fft - hop) / 2 with exact_pad
// (centring off).
int64_t edge_padding(const NemoMelOptions& o) {
  return o.exact_pad ? (o.fft_size() - o.hop_length) / 2 : o.fft_size() / 2;
}

// The frames torch.stft returns for `samples` (before NeMo's masking), or -1
// where torch.stft refuses (the padded signal shorter than n_fft).
int64_t stft_frames(int64_t samples, const NemoMelOptions& o) {
  const int64_t padded = samples + 2 * edge_padding(o);
  if (padded < o.fft_size()) return -1;
  return 1 + (padded - o.fft_size()) / o.hop_length;
}

constexpr float kNormalizeEpsilon = 1e-5f;  // normalize_batch's CONSTANT, added to the std

}  // namespace

const char* nemo_normalize_name(NemoNormalize normalize) {
  switch (normalize) {
    case NemoNormalize::kNone:
      return "NA";
    case NemoNormalize::kPerFeature:
      return "per_feature";
    case NemoNormalize::kAllFeatures:
      return "all_features";
  }
  return "?";
}

NemoNormalize parse_nemo_normalize(const std::string& name) {
  for (NemoNormalize n :
       {NemoNormalize::kNone, NemoNormalize::kPerFeature, NemoNormalize::kAllFeatures}) {
    if (name == nemo_normalize_name(n)) return n;
  }
  OASR_THROW(kInvalidArgument, "unknown NeMo preprocessor normalize type '", name,
             "'; expected per_feature, all_features or NA (no normalization)");
}

const char* nemo_log_zero_guard_name(NemoLogZeroGuard guard) {
  switch (guard) {
    case NemoLogZeroGuard::kAdd:
      return "add";
    case NemoLogZeroGuard::kClamp:
      return "clamp";
  }
  return "?";
}

NemoLogZeroGuard parse_nemo_log_zero_guard(const std::string& name) {
  if (name == "add") return NemoLogZeroGuard::kAdd;
  if (name == "clamp") return NemoLogZeroGuard::kClamp;
  OASR_THROW(kInvalidArgument, "unknown NeMo log_zero_guard_type '", name,
             "'; expected add or clamp");
}

void NemoMelOptions::validate() const {
  OASR_CHECK(sample_rate > 0, kInvalidArgument,
             "NemoMelOptions: sample_rate must be positive, got ", sample_rate);
  OASR_CHECK(win_length > 0, kInvalidArgument, "NemoMelOptions: win_length must be positive, got ",
             win_length);
  OASR_CHECK(hop_length > 0, kInvalidArgument, "NemoMelOptions: hop_length must be positive, got ",
             hop_length);
  // A cap far above any speech front end (NeMo's are 512), so that a
  // corrupt config fails here rather than in an allocation.
  constexpr int64_t kMaxFft = int64_t{1} << 20;
  OASR_CHECK(n_fft >= 0 && n_fft <= kMaxFft && win_length <= kMaxFft, kInvalidArgument,
             "NemoMelOptions: n_fft must be in [0, ", kMaxFft, "] (0: NeMo's None), got ", n_fft,
             " (win_length ", win_length, ")");
  OASR_CHECK(n_fft == 0 || n_fft >= win_length, kInvalidArgument, "NemoMelOptions: n_fft (", n_fft,
             ") must be at least win_length (", win_length, "), as torch.stft requires");
  OASR_CHECK(features >= 1, kInvalidArgument, "NemoMelOptions: features must be positive, got ",
             features);
  OASR_CHECK(!preemph || std::isfinite(*preemph), kInvalidArgument,
             "NemoMelOptions: preemph must be finite, got ", preemph.value_or(0.0));
  OASR_CHECK(std::isfinite(mag_power) && mag_power > 0.0, kInvalidArgument,
             "NemoMelOptions: mag_power must be positive, got ", mag_power);
  OASR_CHECK(std::isfinite(log_zero_guard_value) && log_zero_guard_value > 0.0, kInvalidArgument,
             "NemoMelOptions: log_zero_guard_value must be positive (it keeps log() off zero), "
             "got ",
             log_zero_guard_value);
  OASR_CHECK(pad_to >= 0, kInvalidArgument,
             "NemoMelOptions: pad_to must be 0 (no padding) or a positive multiple, got ", pad_to);
  OASR_CHECK(std::isfinite(pad_value), kInvalidArgument,
             "NemoMelOptions: pad_value must be finite, got ", pad_value);
  OASR_CHECK(frame_splicing >= 1, kInvalidArgument,
             "NemoMelOptions: frame_splicing must be at least 1, got ", frame_splicing);
  OASR_CHECK(frame_splicing == 1, kUnsupported, "NemoMelOptions: frame_splicing ", frame_splicing,
             " (stacking neighbouring frames) is not supported; only 1");
  // FilterbankFeatures raises NotImplementedError for this combination too.
  OASR_CHECK(!exact_pad || hop_length % 2 == 0, kUnsupported,
             "NemoMelOptions: exact_pad needs an even hop_length (NeMo refuses an odd one), got ",
             hop_length);
}

int64_t NemoMelOptions::fft_size() const {
  if (n_fft > 0) return n_fft;
  int64_t size = 1;  // NeMo: 2 ** ceil(log2(win_length))
  while (size < win_length) size *= 2;
  return size;
}

int64_t nemo_mel_frames(int64_t samples, const NemoMelOptions& options) {
  options.validate();
  OASR_CHECK(samples >= 0, kInvalidArgument, "nemo_mel_frames: samples must be >= 0, got ",
             samples);
  // forward() turns a length of 0 into 0 frames (get_seq_len alone would
  // give -1 for an odd n_fft); an exact_pad signal shorter than the STFT
  // needs has no frame either (NeMo's torch.stft would refuse it).
  if (samples == 0) return 0;
  const int64_t frames =
      floor_div(samples + 2 * edge_padding(options) - options.fft_size(), options.hop_length);
  return std::max<int64_t>(frames, 0);
}

int64_t nemo_mel_padded_frames(int64_t samples, const NemoMelOptions& options) {
  options.validate();
  OASR_CHECK(samples >= 0, kInvalidArgument, "nemo_mel_padded_frames: samples must be >= 0, got ",
             samples);
  int64_t width = stft_frames(samples, options);
  OASR_CHECK(width >= 0, kInvalidArgument, "NeMo's STFT needs at least ",
             options.fft_size() - 2 * edge_padding(options), " samples with exact_pad (n_fft ",
             options.fft_size(), ", hop ", options.hop_length, "), got ", samples);
  if (options.pad_to > 0 && width % options.pad_to != 0) {
    width += options.pad_to - width % options.pad_to;
  }
  return width;
}

NemoMelSpectrogram::NemoMelSpectrogram(const NemoMelOptions& options, const Tensor& window,
                                       const Tensor& fb)
    : options_(options) {
  options_.validate();
  n_fft_ = options_.fft_size();
  const int64_t bins = options_.frequency_bins();

  OASR_CHECK(window.defined(), kInvalidArgument,
             "NemoMelSpectrogram: no window tensor (preprocessor.featurizer.window) was given");
  OASR_CHECK(window.dtype() == DType::kF32 && window.device().is_cpu() && window.dim() == 1 &&
                 window.size(0) == options_.win_length,
             kInvalidArgument,
             "NemoMelSpectrogram: the window (preprocessor.featurizer.window) must be float32 [",
             options_.win_length, "] (win_length) on the CPU, got ", window.str());
  OASR_CHECK(fb.defined(), kInvalidArgument,
             "NemoMelSpectrogram: no filterbank tensor (preprocessor.featurizer.fb) was given");
  const bool fb_shape_ok =
      (fb.dim() == 3 && fb.size(0) == 1 && fb.size(1) == options_.features && fb.size(2) == bins) ||
      (fb.dim() == 2 && fb.size(0) == options_.features && fb.size(1) == bins);
  OASR_CHECK(fb.dtype() == DType::kF32 && fb.device().is_cpu() && fb_shape_ok, kInvalidArgument,
             "NemoMelSpectrogram: the mel filterbank (preprocessor.featurizer.fb) must be float32 "
             "[1, ",
             options_.features, ", ", bins, "] ([1, features, n_fft/2 + 1] with n_fft ", n_fft_,
             ") on the CPU, got ", fb.str());

  // torch.stft's window padding: zeros around the window, which starts at
  // (n_fft - win_length) / 2.
  const Tensor w = window.contiguous();
  const float* w_data = w.data<const float>();
  window_.assign(static_cast<size_t>(n_fft_), 0.0f);
  const int64_t left = (n_fft_ - options_.win_length) / 2;
  for (int64_t j = 0; j < options_.win_length; ++j) {
    OASR_CHECK(std::isfinite(w_data[j]), kInvalidArgument, "NemoMelSpectrogram: window value ", j,
               " is not finite (", w_data[j], ")");
    window_[static_cast<size_t>(left + j)] = w_data[j];
  }

  // Each filter row keeps its span from the first to the last nonzero
  // weight; the zeros outside it add nothing to its dot product.
  const Tensor f = fb.contiguous();
  const float* f_data = f.data<const float>();
  filters_.resize(static_cast<size_t>(options_.features));
  for (int64_t b = 0; b < options_.features; ++b) {
    const float* row = f_data + b * bins;
    int64_t first = -1;
    int64_t last = -1;
    for (int64_t k = 0; k < bins; ++k) {
      OASR_CHECK(std::isfinite(row[k]), kInvalidArgument,
                 "NemoMelSpectrogram: mel filterbank value [", b, ", ", k, "] is not finite (",
                 row[k], ")");
      if (row[k] != 0.0f) {
        if (first < 0) first = k;
        last = k;
      }
    }
    Filter& filter = filters_[static_cast<size_t>(b)];
    if (first >= 0) {
      filter.first_bin = first;
      filter.weights.assign(row + first, row + last + 1);
    }
  }
}

Tensor NemoMelSpectrogram::compute(std::span<const float> samples) const {
  return compute_frames(samples, nemo_mel_frames(static_cast<int64_t>(samples.size()), options_));
}

Tensor NemoMelSpectrogram::compute_padded(std::span<const float> samples) const {
  return compute_frames(samples,
                        nemo_mel_padded_frames(static_cast<int64_t>(samples.size()), options_));
}

Tensor NemoMelSpectrogram::compute_frames(std::span<const float> samples, int64_t width) const {
  const NemoMelOptions& o = options_;
  for (size_t i = 0; i < samples.size(); ++i) {
    OASR_CHECK(std::isfinite(samples[i]), kInvalidArgument, "NemoMelSpectrogram: sample ", i,
               " is not finite (", samples[i], ")");
  }
  const auto length = static_cast<int64_t>(samples.size());
  const int64_t valid = nemo_mel_frames(length, o);  // <= width
  const int64_t features = o.features;

  Tensor out = Tensor::full({features, width}, o.pad_value);
  if (valid == 0) return out;
  float* mel = out.data<float>();  // [features, width]; frames [0, valid) are computed

  // The signal as torch.stft receives it. With exact_pad, NeMo pads first and
  // pre-emphasises after, then zeroes every sample from the original length
  // on (its time mask counts from the padded start): the signal's last
  // (n_fft - hop) / 2 samples are dropped. That is NeMo's arithmetic, kept.
  const int64_t front = o.exact_pad ? edge_padding(o) : 0;
  std::vector<float> y(static_cast<size_t>(length + 2 * front), 0.0f);
  std::copy(samples.begin(), samples.end(), y.begin() + front);
  if (o.preemph) {
    const auto a = static_cast<float>(*o.preemph);
    // Back to front, so each step reads its unfiltered neighbour; y[0] stays.
    for (size_t i = y.size(); i-- > 1;) {
      const float product = a * y[i - 1];
      y[i] = y[i] - product;
    }
    std::fill(y.begin() + length, y.end(), 0.0f);
  }

  // Frame t covers y[t * hop - centring, + n_fft); the window is nonzero on
  // [left, left + win_length) only.
  const int64_t centring = o.exact_pad ? 0 : n_fft_ / 2;
  const int64_t left = (n_fft_ - o.win_length) / 2;
  const auto signal_size = static_cast<int64_t>(y.size());
  const int64_t bins = o.frequency_bins();
  const bool even = n_fft_ % 2 == 0;

  // A plan per call keeps compute() re-entrant (kissfft's generic-radix
  // butterfly writes scratch inside the plan); it costs O(n_fft).
  const kissfft<double> plan(static_cast<size_t>(even ? n_fft_ / 2 : n_fft_), /*inverse=*/false);
  std::vector<double> frame(static_cast<size_t>(n_fft_), 0.0);
  std::vector<std::complex<double>> complex_frame(even ? 0 : static_cast<size_t>(n_fft_));
  std::vector<std::complex<double>> spectrum(static_cast<size_t>(even ? n_fft_ / 2 : n_fft_));
  std::vector<float> power(static_cast<size_t>(bins));

  // |Y| in float as torch takes it, then raised to mag_power (torch's pow
  // special-cases the exponent 2 as a square).
  auto spectral_power = [&](double re_d, double im_d) {
    const auto re = static_cast<float>(re_d);
    const auto im = static_cast<float>(im_d);
    const float re2 = re * re;
    const float im2 = im * im;
    const float magnitude = std::sqrt(re2 + im2);
    if (o.mag_power == 1.0) return magnitude;
    if (o.mag_power == 2.0) return magnitude * magnitude;
    return std::pow(magnitude, static_cast<float>(o.mag_power));
  };

  for (int64_t t = 0; t < valid; ++t) {
    const int64_t start = t * o.hop_length - centring + left;
    for (int64_t j = 0; j < o.win_length; ++j) {
      const int64_t i = start + j;
      const float x = i >= 0 && i < signal_size ? y[static_cast<size_t>(i)] : 0.0f;
      const float windowed = x * window_[static_cast<size_t>(left + j)];
      frame[static_cast<size_t>(left + j)] = windowed;
    }
    if (even) {
      // transform_real packs DC and Nyquist (both real) into element 0.
      plan.transform_real(frame.data(), spectrum.data());
      power[0] = spectral_power(spectrum[0].real(), 0.0);
      power[static_cast<size_t>(bins - 1)] = spectral_power(spectrum[0].imag(), 0.0);
      for (int64_t k = 1; k < bins - 1; ++k) {
        power[static_cast<size_t>(k)] = spectral_power(spectrum[k].real(), spectrum[k].imag());
      }
    } else {
      for (int64_t j = 0; j < n_fft_; ++j) complex_frame[j] = frame[j];
      plan.transform(complex_frame.data(), spectrum.data());
      for (int64_t k = 0; k < bins; ++k) {
        power[static_cast<size_t>(k)] = spectral_power(spectrum[k].real(), spectrum[k].imag());
      }
    }

    const auto guard = static_cast<float>(o.log_zero_guard_value);
    for (int64_t b = 0; b < features; ++b) {
      const Filter& filter = filters_[static_cast<size_t>(b)];
      const float* p = power.data() + filter.first_bin;
      double energy = 0.0;
      for (size_t k = 0; k < filter.weights.size(); ++k) {
        energy += static_cast<double>(filter.weights[k]) * p[k];
      }
      auto value = static_cast<float>(energy);
      if (o.log) {
        value = o.log_zero_guard_type == NemoLogZeroGuard::kAdd ? std::log(value + guard)
                                                                : std::log(std::max(value, guard));
      }
      mel[b * width + t] = value;
    }
  }

  // normalize_batch over the valid frames. NeMo's std is unbiased; with one
  // valid value it divides 0 by 0, turns the NaN into 0 and adds 1e-5, so the
  // frame becomes (x - x) / 1e-5 = 0; the same falls out here.
  auto normalize = [&](int64_t first_feature, int64_t feature_count) {
    const int64_t n = feature_count * valid;
    double sum = 0.0;
    for (int64_t b = first_feature; b < first_feature + feature_count; ++b) {
      for (int64_t t = 0; t < valid; ++t) sum += mel[b * width + t];
    }
    const auto mean = static_cast<float>(sum / static_cast<double>(n));
    double squares = 0.0;
    for (int64_t b = first_feature; b < first_feature + feature_count; ++b) {
      for (int64_t t = 0; t < valid; ++t) {
        const float d = mel[b * width + t] - mean;
        squares += static_cast<double>(d) * d;
      }
    }
    const float std_dev =
        (n > 1 ? static_cast<float>(std::sqrt(squares / static_cast<double>(n - 1))) : 0.0f) +
        kNormalizeEpsilon;
    for (int64_t b = first_feature; b < first_feature + feature_count; ++b) {
      for (int64_t t = 0; t < valid; ++t) {
        float& v = mel[b * width + t];
        v = (v - mean) / std_dev;
      }
    }
  };
  switch (o.normalize) {
    case NemoNormalize::kNone:
      break;
    case NemoNormalize::kPerFeature:
      for (int64_t b = 0; b < features; ++b) normalize(b, 1);
      break;
    case NemoNormalize::kAllFeatures:
      normalize(0, features);
      break;
  }
  return out;
}

}  // namespace oasr::audio
