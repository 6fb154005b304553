// Whisper's log-mel spectrogram, computed as Hugging Face transformers'
// WhisperFeatureExtractor computes it (feature_extraction_whisper.py with
// audio_utils.spectrogram / mel_filter_bank):
//
//   x = samples zero-padded to 30 s (480000 samples at 16 kHz)
//   x = reflect-pad x by n_fft/2 = 200 on both sides   (centred frames)
//   frame t = x[160 t, 160 t + 400) * periodic Hann(400),  t = 0 .. 3000
//   P[t][k] = |rfft(frame t)[k]|^2,  k = 0 .. 200
//   M[b][t] = max(1e-10, sum_k F[k][b] P[t][k])   F: Slaney mel filters, 0-8 kHz,
//                                                    Slaney area normalisation
//   L = float32(log10(M)); the last frame (t = 3000) is dropped
//   out = (max(L, max(L) - 8) + 4) / 4                  (float32, [n_mels, 3000])
//
// Precision: the FFT (kissfft's C++ template in double), the power
// spectrum, the filterbank sums and the log are evaluated in double, as HF's
// numpy path does (which rounds the FFT output to complex64 in between; we
// round at the same point); the final clamp and rescale are float32 steps,
// as in numpy. Result: bit-identical to HF's numpy path on every signal of
// tests/whisper/gen_whisper_mel.py (noise, sweep, silence, near-silence,
// clipping, < 1 s, empty, exactly 30 s, real speech; 80 and 128 mels), and
// within 5e-5 of HF's default torch path (float32 torch.stft), which is
// itself that far from HF's numpy path.
// Speed: about 20 ms of one core for 30 s (3000 FFTs of 400 points).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace oasr::audio {

class WhisperLogMel {
 public:
  // n_mels: 80 (Whisper up to large-v2) or 128 (large-v3); any value in
  // [1, 1024] is accepted, as HF's mel_filter_bank accepts it (filters
  // narrower than an FFT bin are all zero), else kInvalidArgument.
  explicit WhisperLogMel(int64_t n_mels = 80);

  static constexpr int kSampleRate = 16000;
  static constexpr int kChunkSamples = 480000;  // 30 s
  static constexpr int kFrames = 3000;
  static constexpr int kFftSize = 400;
  static constexpr int kHopLength = 160;
  static constexpr int kFrequencyBins = kFftSize / 2 + 1;

  int64_t n_mels() const { return n_mels_; }

  // samples: mono float at 16 kHz, at most kChunkSamples (longer audio is
  // refused with kInvalidArgument: split it into 30 s windows first, as
  // Whisper's long-form transcription does); zero-padded to 30 s as HF does.
  // Non-finite samples are refused. Returns float32 [n_mels, 3000] on the CPU.
  // Const and safe to call from several threads at once.
  Tensor compute(std::span<const float> samples) const;
  // The log-mel of the whole signal as HF's extractor gives it with
  // truncation=False, padding="longest" for one signal (its long-form
  // input): no padding to 30 s, the reflection at the signal's own ends,
  // samples / 160 frames, the 8 below max clamp over the whole signal.
  // float32 [n_mels, samples / 160]; more than 200 samples (the reflection).
  Tensor compute_whole(std::span<const float> samples) const;

  // The filterbank as HF's mel_filter_bank(1 + n_fft // 2, n_mels, 0, 8000,
  // 16000, norm="slaney", mel_scale="slaney") returns it, [kFrequencyBins][n_mels]
  // flattened row-major (tests compare it with HF's matrix).
  std::vector<double> mel_filters() const;
  const std::vector<double>& window() const { return window_; }

 private:
  struct Plan;  // the FFT plan (kissfft, header-only) stays out of this header

  // The log-mel of `samples` zero-padded to padded_length (>= its size).
  Tensor compute_padded(std::span<const float> samples, int64_t padded_length) const;

  // Nonzero span of one mel filter: weights for FFT bins [first_bin, first_bin + size).
  struct Filter {
    int first_bin = 0;
    std::vector<double> weights;
  };

  int64_t n_mels_;
  std::vector<double> window_;  // periodic Hann, kFftSize
  std::vector<Filter> filters_;
  std::shared_ptr<const Plan> plan_;
};

}  // namespace oasr::audio
