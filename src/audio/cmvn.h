// Global cepstral mean and variance normalisation, as WeNet's GlobalCMVN
// applies it to fbank features: y = (x - mean) * istd per feature column
// (istd = 1 / stddev, precomputed from training statistics). Two float32
// roundings per element, subtract then multiply, like the PyTorch module.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace oasr::audio {

class GlobalCmvn {
 public:
  // mean and istd: float32 [D] CPU tensors (copied). With normalize_variance
  // false only the mean is subtracted (WeNet's norm_var=False).
  GlobalCmvn(const Tensor& mean, const Tensor& istd, bool normalize_variance = true);

  int64_t dim() const { return static_cast<int64_t>(mean_.size()); }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& istd() const { return istd_; }

  // features: float32 CPU [..., D]; returns a new contiguous tensor.
  Tensor apply(const Tensor& features) const;
  // In place on a contiguous, writable float32 CPU tensor [..., D] (not one
  // borrowed from a read-only mapped checkpoint).
  void apply_(Tensor& features) const;

 private:
  std::vector<float> mean_;
  std::vector<float> istd_;
  bool normalize_variance_;
};

}  // namespace oasr::audio
