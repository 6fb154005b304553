// The quantization seam of the layer waist (spec "The layer seam"). A
// quantizable layer (Linear, LinearActivation, PointwiseConv1d, Conv2d; the
// depthwise Conv1d declares itself and always declines) keeps its type,
// module path and state-dict names; once a QuantMethod is attached, the
// weight slot holds 8-bit values with weight_scale (and smooth_inv /
// input_scale as the scheme needs) beside it, and the method runs forward.
// quantize/apply.h drives this: which layers, which scheme, online or from a
// quantized checkpoint, then binding.
#pragma once

#include <memory>
#include <string>

#include "core/activations.h"
#include "layers/module.h"
#include "quant/calibration/input_observer.h"
#include "quant/methods/quant_method.h"

namespace oasr::layers {

// What a GEMM layer reads: the served-dtype tensor, or the 8-bit activation
// a fused producer emitted for it (spec "Fewer quantize launches": a
// pre-norm's layer_norm_quant / add_layer_norm_residual_quant, a GEMM
// chain's scaled_mm_quant). Code between the producer and the GEMM may read
// the shape and nothing else.
class GemmInput {
 public:
  // What a quantized input was quantized for; its consumer checks it.
  enum class Target {
    kPerToken,     // per token, no smoother, in the activation's format
    kStaticScale,  // one consumer's static input scale (`static_consumer`)
  };

  GemmInput(Tensor x) : tensor_(std::move(x)) {}  // NOLINT: the full-precision path reads as before
  // `shape` is the logical [..., K] the unfused tensor would have had (the
  // activation is [rows, K]); `served` its dtype, which the GEMM returns.
  GemmInput(quant::QuantizedActivation activation, Shape shape, DType served, Target target,
            const quant::QuantMethod* static_consumer = nullptr);

  bool is_quantized() const { return quantized_; }
  const Shape& shape() const { return quantized_ ? shape_ : tensor_.shape(); }
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;
  // The full-precision tensor; refused (kInternal) for an 8-bit input.
  const Tensor& tensor() const;
  const quant::QuantizedActivation& activation() const { return activation_; }
  DType served_dtype() const { return quantized_ ? served_ : tensor_.dtype(); }
  Target target() const { return target_; }
  const quant::QuantMethod* static_consumer() const { return static_consumer_; }

 private:
  bool quantized_ = false;
  Tensor tensor_;
  quant::QuantizedActivation activation_;
  Shape shape_;
  DType served_ = DType::kF32;
  Target target_ = Target::kPerToken;
  const quant::QuantMethod* static_consumer_ = nullptr;
};

class QuantizableLayer {
 public:
  virtual ~QuantizableLayer() = default;

  virtual quant::GemmGeometry quant_geometry() const = 0;
  // "" when this layer can be served with `scheme`; otherwise why not
  // (alignment, groups, format), for the spec's skipped list or a refusal.
  virtual std::string quant_refusal(const quant::QuantScheme& scheme) const;
  // Marks this layer never quantizable, for a reason its model states (the
  // spec: a layer whose weight a fused kernel reads directly, such as the
  // transducer joiner's decoder_proj / output_linear, is not quantizable, and
  // a spec that selects one is refused). Kind selection then skips it with
  // the reason; an explicit target or a loaded spec that names it is refused
  // with it. Honoured by every layer whose quant_refusal is this base one
  // (Linear and its subclasses).
  void refuse_quantization(std::string reason) { fixed_refusal_ = std::move(reason); }

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

  // Calibration: while an observer is attached, every forward hands it the
  // layer's input first (quant/calibration/input_observer.h). nullptr detaches.
  void set_input_observer(quant::InputObserver* observer) { observer_ = observer; }

  virtual Module& quant_module() = 0;
  const Module& quant_module() const { return const_cast<QuantizableLayer*>(this)->quant_module(); }

  // GEMM chain (spec "Fewer quantize launches"): armed by link_quantization,
  // this layer's epilogue emits `consumer`'s 8-bit input at its static scale
  // (scaled_mm_quant); nullptr disarms. Both must be quantized and bound.
  void arm_output_quant(const QuantizableLayer* consumer);
  // The report's name for who quantizes this layer's input (a fused
  // producer's label; "" = itself); see QuantMethod::input_quantizer.
  void set_input_quantizer(std::string label);
  const QuantizableLayer* output_quant_consumer() const { return output_quant_consumer_; }

 protected:
  // The loaded full-precision weight as the GEMM's [N, gemm K] matrix (a
  // convolution's in KRSC order: output channel, kernel rows, columns, input channel).
  virtual Tensor fp_weight_matrix() const = 0;
  Tensor quant_forward(const Tensor& x, Activation act) const;
  // The quantized forward of either input: a tensor is quantized by this
  // layer's method (as quant_forward); an 8-bit input, checked against the
  // method, goes straight to the scaled GEMM. [..., N] in the served dtype.
  Tensor quant_forward(const GemmInput& x, Activation act) const;
  // The armed chain producer's forward: the consumer's 8-bit input.
  GemmInput quant_forward_to_consumer(const GemmInput& x, Activation act) const;
  // A convolution's kernel, stride, padding and output size (a Conv1d: a
  // 1 x K kernel over an image of height 1).
  struct ConvPatches {
    int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
    int64_t out_h = 0, out_w = 0;
  };
  // A quantized convolution as a GEMM over KRSC patches: x [B, C, H, W];
  // returns [B * out_h * out_w, N] in x's dtype. On a CUDA device one kernel
  // gathers the patches straight into int8 at the static input scale; on the
  // CPU they are gathered in float32 and quantized by quant_forward. A zero
  // pad quantizes to zero and the static scale is one for every element, so
  // both give the same int8 patches.
  Tensor quant_forward_conv(const Tensor& x, const ConvPatches& patches, Activation act) const;
  // Hands x to the attached observer, if any (first thing in each forward).
  // An observed layer must read full-precision input: calibrating behind an
  // armed link is refused (calibrate with the links disarmed).
  void observe_input(const Tensor& x) const;
  void observe_input(const GemmInput& x) const;
  // Whether a calibration observer is attached.
  bool observed() const { return observer_ != nullptr; }

 private:
  // The 8-bit input of the scaled GEMM: x's own, refused unless it was
  // quantized for this method, or x quantized here.
  quant::QuantizedActivation quantized_gemm_input(const GemmInput& x) const;

  std::unique_ptr<quant::QuantMethod> quant_method_;
  quant::InputObserver* observer_ = nullptr;
  const QuantizableLayer* output_quant_consumer_ = nullptr;
  std::string fixed_refusal_;
};

// The GEMM alignment rule shared by every 8-bit lane: in_features % 16 == 0
// and out_features % 8 == 0. "" when aligned, else the reason.
std::string gemm_alignment_refusal(int64_t in_features, int64_t out_features,
                                   const char* in_name = "in_features",
                                   const char* out_name = "out_features");

}  // namespace oasr::layers
