// Normalisation layers: LayerNorm (with the fused residual variants the
// encoder blocks use) and BatchNorm1d in inference form.
#pragma once

#include <mutex>
#include <optional>
#include <vector>

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
//
// The statistics are folded into one scale and shift per channel on the host
// in float32 (the parameters are copied there, whatever their device), then
// the pair is converted to the input's dtype and moved to its device. The
// folded pair is cached per (parameter storage, dtype, device), so a CUDA
// forward reads the parameters back once, not at every call.
class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t channels, float eps = 1e-5f);
  Tensor forward(const Tensor& x) const;

 private:
  struct Folded {
    // The parameters folded (held, so their storage cannot be reused by a
    // reload while the cache names it).
    std::vector<Tensor> sources;
    DType dtype = DType::kF32;
    Device device = Device::cpu();
    Tensor scale;
    Tensor shift;
  };
  Folded fold(DType dtype, Device device) const;
  bool matches(const Folded& folded, const Tensor& x) const;

  int64_t channels_;
  float eps_;
  mutable std::mutex fold_mutex_;
  mutable std::optional<Folded> folded_;
};

}  // namespace oasr::layers
