// Kaldi-compatible log-mel filterbank features, computed as
// torchaudio.compliance.kaldi.fbank computes them (which is what WeNet feeds
// its models). The defaults are WeNet's inference settings: samples in
// [-1, 1) scaled to the int16 range, 80 bins, 25 ms / 10 ms frames, povey
// window, pre-emphasis 0.97, DC removal, 512-point FFT at 16 kHz,
// energy_floor 0, no dither.
//
// Per frame (snip_edges: frame t covers samples [t*shift, t*shift + window)):
//   x = samples * waveform_scale;  x -= mean(x)  (remove_dc_offset)
//   x[j] -= preemph * x[max(j-1, 0)];  x *= window;  zero-pad to the FFT size
//   P = |rfft(x)|^2 (or |rfft(x)| without use_power)
//   mel[b] = sum_k bank[b][k] * P[k];  out = log(max(mel, FLT_EPSILON))
// Frames are independent of each other, so audio that arrives in pieces can
// be featurised piecewise: keep the samples from num_frames(n) * shift on
// and prepend them to the next piece.
//
// Agreement with torchaudio (tests/oracle/test_fbank.cc): every feature
// within 60 dB of its frame's loudest mel bin agrees to about 1e-4 (the test
// holds 1e-3). Quieter bins carry the float32 FFT's rounding, a few ulp of
// the frame's peak amplitude, in torchaudio as here; 150 dB down that
// reaches 0.8 in the log (torchaudio is 0.5 away from its own float64 result
// there).
//
// Where torchaudio refuses (an assertion) but Kaldi answers, we answer as
// Kaldi does: fewer samples than one window give 0 frames (shape [0, dim]).
// Dither is refused: it is a training-time augmentation with a random
// stream no inference result should depend on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr::audio {

enum class FbankWindow { kPovey, kHanning, kHamming, kRectangular, kBlackman };

const char* fbank_window_name(FbankWindow window);        // "povey", ...
FbankWindow parse_fbank_window(const std::string& name);  // kInvalidArgument on unknown

struct FbankOptions {
  double sample_rate = 16000.0;           // Hz, of the samples given to compute()
  int num_mel_bins = 80;                  // > 3
  double frame_length_ms = 25.0;          // window = int(sample_rate * ms / 1000)
  double frame_shift_ms = 10.0;           // shift  = int(sample_rate * ms / 1000)
  bool snip_edges = true;                 // false: frames centred on t*shift, edges reflected
  double dither = 0.0;                    // must be 0 (see above)
  double preemphasis_coefficient = 0.97;  // in [0, 1]
  bool remove_dc_offset = true;
  FbankWindow window_type = FbankWindow::kPovey;
  double blackman_coeff = 0.42;       // only for kBlackman
  bool round_to_power_of_two = true;  // FFT size: next power of two >= window
  bool use_energy = false;            // prepend (append with htk_compat) log energy
  bool raw_energy = true;             // energy before pre-emphasis and window
  bool htk_compat = false;
  double energy_floor = 0.0;  // WeNet passes 0 (torchaudio's default is 1)
  bool use_log_fbank = true;
  bool use_power = true;   // false: magnitude spectrum
  double low_freq = 20.0;  // Hz
  double high_freq = 0.0;  // Hz; <= 0 means Nyquist + high_freq
  // WeNet multiplies torchaudio's [-1, 1) samples by 2^15 before fbank.
  float waveform_scale = 32768.0f;

  // Throws kInvalidArgument (kUnsupported for dither) naming the field.
  void validate() const;
  std::string dump() const;  // one line, every field

  int window_size() const;         // samples per frame
  int window_shift() const;        // samples between frame starts
  int padded_window_size() const;  // FFT size
  int feature_dim() const { return num_mel_bins + (use_energy ? 1 : 0); }
};

// Precomputes the window and the mel filterbank for one set of options.
// compute() is const and safe to call from several threads at once: the FFT
// plan (kissfft keeps scratch inside it) is built per call, a few
// microseconds, against a few microseconds per frame (10 s of 16 kHz audio,
// 998 frames, takes 3-10 ms on one core, mostly the FFTs).
class FbankComputer {
 public:
  explicit FbankComputer(const FbankOptions& options);  // validates

  const FbankOptions& options() const { return options_; }
  int feature_dim() const { return options_.feature_dim(); }
  // Frames produced for `num_samples` samples (0 when snip_edges and fewer
  // than one window).
  int64_t num_frames(int64_t num_samples) const;

  // [num_frames, feature_dim] float32 on the CPU.
  Tensor compute(std::span<const float> samples) const;

  // The triangular mel filters as Kaldi defines them, evaluated in float32
  // as torchaudio does: weights[b] covers FFT bins
  // [first_bin[b], first_bin[b] + weights[b].size()).
  const std::vector<int>& mel_first_bin() const { return mel_first_bin_; }
  const std::vector<std::vector<float>>& mel_weights() const { return mel_weights_; }
  const std::vector<float>& window() const { return window_; }

 private:
  FbankOptions options_;
  int window_size_ = 0;
  int window_shift_ = 0;
  int padded_size_ = 0;
  std::vector<float> window_;
  std::vector<int> mel_first_bin_;
  std::vector<std::vector<float>> mel_weights_;
};

// One-off convenience; build an FbankComputer to featurise many inputs.
Tensor compute_fbank(std::span<const float> samples, const FbankOptions& options = {});

}  // namespace oasr::audio
