// Normalisation layers: LayerNorm (with the fused residual variants the
// encoder blocks use), RmsNorm and BatchNorm1d in inference form.
#pragma once

#include <mutex>
#include <optional>
#include <vector>

#include "layers/module.h"
#include "layers/quantizable.h"
#include "ops/layer_norm.h"
#include "ops/rms_norm.h"

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

  // A pre-norm whose output feeds only GEMMs. Armed (link_quantization), it
  // emits their per-token 8-bit input itself (layer_norm_quant /
  // add_layer_norm_residual_quant), bit-identical to the norm followed by
  // the consumers' quantize; disarmed, these return the served-dtype tensor.
  struct AddResult {
    Tensor sum;            // the new residual stream, always full precision
    GemmInput normalized;  // for the consumer GEMMs only
  };
  GemmInput forward_to_gemm(const Tensor& x) const;
  AddResult add_forward_to_gemm(const Tensor& x, const Tensor& residual) const;
  AddResult add_scaled_forward_to_gemm(const Tensor& x, const Tensor& residual, float alpha) const;

  void arm_output_quant(quant::QDType format) { output_quant_ = format; }
  void disarm_output_quant() { output_quant_.reset(); }
  const std::optional<quant::QDType>& output_quant() const { return output_quant_; }
  // Whether the model calls this norm through its residual-add entry points
  // (the kernel the report names: add_layer_norm_residual_quant, else
  // layer_norm_quant). Declared by the model that builds it.
  void set_adds_residual(bool adds) { adds_residual_ = adds; }
  bool adds_residual() const { return adds_residual_; }

 private:
  Tensor weight() const;
  Tensor bias() const;
  GemmInput quantized_output(quant::QuantizedActivation activation, const Tensor& like) const;
  int64_t dim_;
  float eps_;
  bool affine_;
  std::optional<quant::QDType> output_quant_;
  bool adds_residual_ = false;
};

// RMSNorm as Llama / Qwen2 define it (ops/rms_norm.h): weight * x /
// sqrt(mean(x^2) + eps) over the last dimension; one parameter "weight" [dim].
class RmsNorm : public Module {
 public:
  explicit RmsNorm(int64_t dim, float eps = 1e-6f);
  Tensor forward(const Tensor& x) const { return ops::rms_norm(x, param("weight"), eps_); }
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
  float eps_;
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
