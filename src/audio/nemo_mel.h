// NeMo's log-mel front end at inference: AudioToMelSpectrogramPreprocessor,
// whose work is done by FilterbankFeatures
// (nemo/collections/asr/parts/preprocessing/features.py), for one waveform:
//
//   seq_len = floor((L + 2 * (n_fft / 2) - n_fft) / hop)      (get_seq_len)
//   y[0] = x[0], y[i] = x[i] - preemph * x[i-1]              (if preemph is set)
//   Y = torch.stft(y, n_fft, hop, win_length, window, center=True,
//                  pad_mode="constant"): frame t covers y[t*hop - n_fft/2, + n_fft),
//       zeros outside the signal; the window [win_length] zero-padded to n_fft,
//       centred (offset (n_fft - win_length) / 2), as torch.stft pads it
//   P = |Y| ^ mag_power                      ([n_fft/2 + 1, frames], onesided)
//   M = fb @ P                               (fb [features, n_fft/2 + 1])
//   M = log(M + guard) or log(max(M, guard)) (if log)
//   per_feature: each feature minus its mean over the seq_len valid frames,
//       over its unbiased std + 1e-5 (normalize_batch); all_features: the
//       same with one mean and std over every valid value
//   frames >= seq_len -> pad_value; the time axis padded to a multiple of pad_to
//
// The window and the mel filterbank are the checkpoint's own buffers
// (preprocessor.featurizer.window / preprocessor.featurizer.fb in a .nemo's
// model_weights.ckpt), not recomputed here: they are what NeMo multiplies
// by, whatever librosa version or mel_norm made them.
//
// Left out, because inference never runs them: dither (NeMo adds it only in
// training mode), narrow-band augmentation (training only). Refused by
// name: frame_splicing > 1, normalize types other than per_feature,
// all_features and "NA" (NeMo's fixed_mean / fixed_std dict included),
// pad_to "max" (not representable here: a caller reading a config refuses it).
//
// Precision: float32 wherever torch computes in float32 (pre-emphasis, the
// window product, the magnitude and its power, the log, the normalisation's
// subtract and divide); the FFT and every sum (filterbank dot products, the
// normalisation's mean and variance) in double, rounded to float32 where
// torch holds a float32 result. Against NeMo 3.0 / torch 2.15 on the CPU
// (tests/oracle/fastconformer: 3 utterances, 80 features, per_feature) the
// normalised features agree to 1.4e-4, 4.9e-4 and 1.9e-4 (max abs); the
// residual is torch's float32 FFT (see nemo_mel.cc). Not reproduced: a
// feature that is constant over every valid frame (digital silence, or a
// clamp guard that floors every frame) normalises to exactly 0 here, while
// NeMo gives its float32 summation error divided by 1e-5 (-0.16 for 1 s of
// zeros on the CPU).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr::audio {

enum class NemoNormalize {
  kNone,         // NeMo's normalize: "NA" (or null): features left as they are
  kPerFeature,   // "per_feature": each feature over the valid frames
  kAllFeatures,  // "all_features": one mean and std over all valid values
};

// "per_feature", "all_features", "NA" (NeMo normalizes nothing for it);
// anything else is kInvalidArgument naming it (NeMo would silently skip the
// normalization for an unknown name, which hides a misspelt config).
NemoNormalize parse_nemo_normalize(const std::string& name);
const char* nemo_normalize_name(NemoNormalize normalize);

enum class NemoLogZeroGuard {
  kAdd,    // log(M + value)
  kClamp,  // log(max(M, value))
};

// "add" or "clamp"; anything else is kInvalidArgument naming it.
NemoLogZeroGuard parse_nemo_log_zero_guard(const std::string& name);
const char* nemo_log_zero_guard_name(NemoLogZeroGuard guard);

// AudioToMelSpectrogramPreprocessor's arguments that matter at inference.
// The defaults are NeMo's own class defaults, so a caller that copies only
// the keys a model config sets gets what NeMo would build from it.
struct NemoMelOptions {
  int64_t sample_rate = 16000;  // Hz of the samples given to compute()
  // In samples. NeMo configs give window_size / window_stride in seconds;
  // NeMo converts them with int(seconds * sample_rate), truncating
  // (0.025 s, 0.01 s at 16 kHz: 400, 160).
  int64_t win_length = 320;  // NeMo's default window_size 0.02 s
  int64_t hop_length = 160;
  // 0 is NeMo's n_fft None: the smallest power of two >= win_length.
  int64_t n_fft = 0;
  int64_t features = 64;                 // mel bins (NeMo's `features`)
  std::optional<double> preemph = 0.97;  // nullopt: NeMo's preemph None
  double mag_power = 2.0;                // 1: magnitude, 2: power spectrum
  bool log = true;
  NemoLogZeroGuard log_zero_guard_type = NemoLogZeroGuard::kAdd;
  // NeMo's default 2**-24. Its strings "tiny" and "eps" are
  // torch.finfo(float32).tiny / .eps: std::numeric_limits<float>::min() /
  // ::epsilon().
  double log_zero_guard_value = 0x1p-24;
  NemoNormalize normalize = NemoNormalize::kPerFeature;
  // compute_padded()'s time axis is padded to a multiple of pad_to; 0 pads
  // nothing. (FastConformer configs set 0; NeMo's class default is 16.)
  int64_t pad_to = 16;
  float pad_value = 0.0f;  // frames past seq_len
  // NeMo's exact_pad: no centring; (n_fft - hop) / 2 zeros on each side
  // instead, so frames = samples / hop. Needs an even hop, as NeMo does.
  bool exact_pad = false;
  int64_t frame_splicing = 1;  // anything but 1 is refused (kUnsupported)

  // Throws naming the field: kInvalidArgument for a malformed value,
  // kUnsupported for frame_splicing > 1.
  void validate() const;
  // n_fft with 0 resolved as NeMo resolves None.
  int64_t fft_size() const;
  int64_t frequency_bins() const { return fft_size() / 2 + 1; }
};

// NeMo's get_seq_len: the valid frames NeMo reports for `samples` samples
// (0 for 0 samples, as FilterbankFeatures.forward fixes it; never negative).
// Validates the options.
int64_t nemo_mel_frames(int64_t samples, const NemoMelOptions& options);
// The width of NeMo's output for one waveform alone: the STFT's frame count
// (one more than nemo_mel_frames: the last frame is always masked) rounded
// up to a multiple of pad_to.
int64_t nemo_mel_padded_frames(int64_t samples, const NemoMelOptions& options);

class NemoMelSpectrogram {
 public:
  // window: float32 CPU [win_length] (preprocessor.featurizer.window);
  // fb: float32 CPU [1, features, n_fft/2 + 1] as NeMo stores it
  // (preprocessor.featurizer.fb), or [features, n_fft/2 + 1]. Both are
  // copied. kInvalidArgument naming the buffer on a wrong shape, dtype,
  // device or a non-finite value.
  NemoMelSpectrogram(const NemoMelOptions& options, const Tensor& window, const Tensor& fb);

  const NemoMelOptions& options() const { return options_; }
  int64_t features() const { return options_.features; }
  int64_t frames(int64_t samples) const { return nemo_mel_frames(samples, options_); }

  // samples: mono float at options().sample_rate (16 kHz for NeMo's ASR
  // models). Non-finite samples are refused. Returns float32
  // [features, nemo_mel_frames(samples.size())] on the CPU: NeMo's output
  // for this waveform cut to its valid frames (with per_feature and a single
  // valid frame, that frame is all zeros, as NeMo computes it on the CPU; its
  // CUDA path raises instead). Fewer samples than one hop give no frame
  // (NeMo itself fails on an empty signal). Const and safe to call from
  // several threads at once; about 5 ms of one core for 5.6 s of audio.
  Tensor compute(std::span<const float> samples) const;
  // NeMo's forward() output for this waveform as a batch of one: float32
  // [features, nemo_mel_padded_frames(samples.size())], frames past the
  // valid ones set to pad_value.
  Tensor compute_padded(std::span<const float> samples) const;

 private:
  Tensor compute_frames(std::span<const float> samples, int64_t width) const;

  // Nonzero span of one mel filter: weights for FFT bins [first_bin, first_bin + size).
  struct Filter {
    int64_t first_bin = 0;
    std::vector<float> weights;
  };

  NemoMelOptions options_;
  int64_t n_fft_ = 0;
  std::vector<float> window_;  // n_fft long: the checkpoint's window, centred, zero-padded
  std::vector<Filter> filters_;
};

}  // namespace oasr::audio
