// The quantization seam of the layer waist (spec "The layer seam"). A
// quantizable layer (Linear, LinearActivation, PointwiseConv1d, Conv2d; the
// depthwise Conv1d declares itself and always declines) keeps its type,
// module path and state-dict names; once a QuantMethod is attached, the
// weight slot holds 8-bit values with weight_scale (and smooth_inv /
// input_scale as the scheme needs) beside it, and the method runs forward.
// quant/apply.h drives this: which layers, which scheme, online or from a
// quantized checkpoint, then binding.
#pragma once

#include <memory>
#include <string>

#include "core/activations.h"
#include "layers/module.h"
#include "quant/methods/quant_method.h"

namespace oasr::layers {

class QuantizableLayer {
 public:
  virtual ~QuantizableLayer() = default;

  virtual quant::GemmGeometry quant_geometry() const = 0;
  // "" when this layer can be served with `scheme`; otherwise why not
  // (alignment, groups, format), for the spec's skipped list or a refusal.
  virtual std::string quant_refusal(const quant::QuantScheme& scheme) const;

  // Turns the weight slot into the method's storage, unloaded: a quantized
  // checkpoint then fills it with a strict, dtype-checked load.
  void attach_quant_method(std::unique_ptr<quant::QuantMethod> method,
                           bool runtime_smoothed = false);
  // Online: quantizes this layer's loaded full-precision weight on the host
  // (fp32) and stores the result in the method's slots.
  void quantize_weight_online(std::unique_ptr<quant::QuantMethod> method);
  // Picks the kernel lane once (after the weights are loaded and moved).
  void bind_quant(const quant::BindOptions& options);

  bool quantized() const { return quant_method_ != nullptr; }
  const quant::QuantMethod* quant_method() const { return quant_method_.get(); }
  // The quantized tensors as the method reads them.
  quant::QuantizedParams quant_params() const;

  virtual Module& quant_module() = 0;
  const Module& quant_module() const { return const_cast<QuantizableLayer*>(this)->quant_module(); }

 protected:
  // The loaded full-precision weight as the GEMM's [N, gemm K] matrix (a
  // convolution's in KRSC order: output channel, kernel rows, columns, input channel).
  virtual Tensor fp_weight_matrix() const = 0;
  Tensor quant_forward(const Tensor& x, Activation act) const;

 private:
  std::unique_ptr<quant::QuantMethod> quant_method_;
};

// The GEMM alignment rule shared by every 8-bit lane: in_features % 16 == 0
// and out_features % 8 == 0. "" when aligned, else the reason.
std::string gemm_alignment_refusal(int64_t in_features, int64_t out_features,
                                   const char* in_name = "in_features",
                                   const char* out_name = "out_features");

}  // namespace oasr::layers
