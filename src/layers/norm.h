// Normalisation layers: LayerNorm (with the fused residual variants the
// encoder blocks use) and BatchNorm1d in inference form.
#pragma once

#include "layers/module.h"
#include "ops/layer_norm.h"

namespace oasr::layers {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f, bool affine = true);
  Tensor forward(const Tensor& x) const;
  // residual + x, and its normalisation (one pass).
  ops::AddLayerNormResult add_forward(const Tensor& x, const Tensor& residual) const;
  // residual + alpha * x, and its normalisation (the macaron half-step FFN).
  ops::AddLayerNormResult add_scaled_forward(const Tensor& x, const Tensor& residual,
                                             float alpha) const;
  int64_t dim() const { return dim_; }

 private:
  Tensor weight() const;
  Tensor bias() const;
  int64_t dim_;
  float eps_;
  bool affine_;
};

// BatchNorm1d at inference: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias,
// over the channel dimension of a channels-last input [..., C]. Holds
// PyTorch's state-dict names, including num_batches_tracked (int64, unused).
class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t channels, float eps = 1e-5f);
  Tensor forward(const Tensor& x) const;

 private:
  int64_t channels_;
  float eps_;
};

}  // namespace oasr::layers
