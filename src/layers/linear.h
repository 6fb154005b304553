// The dense-GEMM layers of the layer waist (DESIGN.md §1): Linear,
// LinearActivation and PointwiseConv1d. Quantization hooks in here
// (quantizable.h): a quantized layer's method runs forward, so models call
// these and never a GEMM op directly.
#pragma once

#include <mutex>

#include "core/activations.h"
#include "layers/module.h"
#include "layers/quantizable.h"
#include "ops/gemm.h"

namespace oasr::layers {

// y = x W^T + b over the last dimension; weight [out, in] (PyTorch layout).
class Linear : public Module, public QuantizableLayer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  // Also takes the 8-bit input a fused producer emitted for it (quantized
  // layers only; refused, kInternal, when it does not match the method).
  Tensor forward(const GemmInput& x) const;
  // The producer of a GEMM chain: with the chain armed (link_quantization),
  // returns the consumer's 8-bit input from the epilogue (scaled_mm_quant);
  // otherwise forward(x) in the served dtype.
  GemmInput chain_forward(const GemmInput& x) const;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool has_bias() const { return has_bias_; }
  // The CPU float32 algorithm (ops/gemm.h); a model picks kRowDot for layers
  // that only ever see a few rows (decoder steps). Quantized layers run
  // their 8-bit lane whatever this says.
  void set_cpu_algorithm(ops::LinearAlgorithm algorithm) { cpu_algorithm_ = algorithm; }
  ops::LinearAlgorithm cpu_algorithm() const { return cpu_algorithm_; }

  quant::GemmGeometry quant_geometry() const override;
  Module& quant_module() override { return *this; }

 protected:
  // For subclasses that store the weight in another shape or report another type.
  Linear(int64_t in_features, int64_t out_features, bool bias, std::string type_name,
         Shape weight_shape);
  // The weight as [out, in] whatever its stored shape (PointwiseConv1d keeps [out, in, 1]).
  virtual Tensor weight_matrix() const { return param("weight"); }
  // Applied to the GEMM output (in the 8-bit GEMM's epilogue when quantized).
  virtual Activation gemm_activation() const { return Activation::kNone; }
  // x W^T + b in the served dtype (no observer, no quantization).
  Tensor full_precision_forward(const Tensor& x) const;
  Tensor fp_weight_matrix() const override { return weight_matrix(); }

 private:
  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
  ops::LinearAlgorithm cpu_algorithm_ = ops::LinearAlgorithm::kBlas;
  // kRowDot's prepared weight (ops::prepare_row_dot_weight), made on first
  // use and remade when the weight parameter is replaced (set_param, a
  // reload); the source tensor is kept so its address cannot be reused by
  // a new weight. Writing into the weight's storage in place after the
  // first forward is not seen: replace the parameter instead.
  Tensor row_dot_weight() const;
  mutable std::mutex row_dot_mutex_;
  mutable Tensor row_dot_weight_;
  mutable Tensor row_dot_source_;
};

// act(x W^T + b): the activation belongs to the layer so an 8-bit GEMM can
// apply it in its epilogue.
class LinearActivation : public Linear {
 public:
  LinearActivation(int64_t in_features, int64_t out_features, Activation activation,
                   bool bias = true);
  Activation activation() const { return activation_; }

 protected:
  Activation gemm_activation() const override { return activation_; }

 private:
  Activation activation_;
};

// A kernel-size-1 Conv1d stored as PyTorch stores it (weight [out, in, 1]),
// applied channels-last: input [..., T, in] -> [..., T, out].
class PointwiseConv1d : public Linear {
 public:
  PointwiseConv1d(int64_t in_channels, int64_t out_channels, bool bias = true);
  quant::GemmGeometry quant_geometry() const override;

 protected:
  Tensor weight_matrix() const override;
};

}  // namespace oasr::layers
