// QuantMethod: what a quantized layer delegates to (spec "The layer seam").
// A layer keeps its type, module path and state-dict names; its method says
// which tensors it stores (storage), turns a full-precision weight into them
// on the host (quantize_weight), picks a kernel lane once (bind) and runs the
// quantized forward. Every served number format (quant/number_format.h) has
// a method named by its row ("int8", "fp8"); register_quant_method adds
// others; the scheme's weight dtype picks one (make_quant_method).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "core/tensor.h"
#include "quant/format.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/layer_kind.h"
#include "quant/number_format.h"
#include "quant/quantized_activation.h"

namespace oasr::quant {

// What a quantizable layer tells its method about itself.
struct GemmGeometry {
  LayerKind kind = LayerKind::kLinear;
  int64_t in_features = 0;   // K of the GEMM (a convolution: input channels)
  int64_t out_features = 0;  // N (a convolution: output channels)
  int64_t groups = 1;        // convolutions
  // The stored quantized weight's shape: [N, K]; [N, K, 1] for a pointwise
  // conv; KRSC [N, kh, kw, C] / KSC [N, k, C] for a Conv2d / Conv1d.
  Shape quantized_weight_shape;
  // Columns of the GEMM the weight becomes: K, or kh*kw*C for a convolution.
  int64_t gemm_k() const;
};

// One tensor of a quantized layer's state dict.
struct StorageSlot {
  std::string name;
  Shape shape;
  DType dtype = DType::kF32;
};

struct QuantizedWeight {
  Tensor weight;        // int8 / float8_e4m3fn [N, gemm K]
  Tensor weight_scale;  // fp32 [N]
};

// A quantized layer's tensors at forward time (its state-dict slots).
struct QuantizedParams {
  Tensor weight;        // viewed as [N, gemm K]
  Tensor weight_scale;  // fp32 [N]
  Tensor smooth_inv;    // fp32 [K] or undefined
  Tensor input_scale;   // fp32 [1] or undefined (dynamic input)
  Tensor bias;          // [N] in the served dtype, or undefined
};

struct BindOptions {
  Device device = Device::cpu();
  // "auto", or a lane name. bind_quantization fills an empty one from
  // OASR_SCALED_MM_BACKEND; QuantMethod::bind treats empty as auto.
  std::string backend;
};

class QuantMethod {
 public:
  explicit QuantMethod(QuantScheme scheme);
  virtual ~QuantMethod() = default;
  QuantMethod(const QuantMethod&) = delete;
  QuantMethod& operator=(const QuantMethod&) = delete;

  virtual std::string_view name() const = 0;  // the registry name: "int8", "fp8"
  const QuantScheme& scheme() const { return scheme_; }
  QDType format() const { return scheme_.weight.dtype; }
  // The format's row of the traits table (quant/number_format.h).
  const NumberFormat& number_format() const;
  DType storage_dtype() const;  // the format's storage: int8, float8_e4m3fn, ...
  bool has_static_input() const { return scheme_has_static_input(scheme_); }

  // The spec's state-dict table: weight (replacing the full-precision one),
  // weight_scale [N], smooth_inv [K] only when runtime-smoothed, input_scale
  // [1] only with a static input scale. The bias is the layer's, unchanged.
  std::vector<StorageSlot> storage(const GemmGeometry& geometry, bool runtime_smoothed) const;

  // DESIGN.md §3 "weights": the per-token rule applied to each output
  // channel, on the host in fp32. weight_nk: [N, K], any float dtype.
  QuantizedWeight quantize_weight(const Tensor& weight_nk) const;

  // Chooses the lane once (refusing what it cannot serve) and precomputes
  // the static multiplier. Called after the weights are loaded and moved.
  void bind(const BindOptions& options, const QuantizedParams& params);
  bool bound() const { return lane_ != nullptr; }
  const ScaledMMLane& lane() const;

  // The quantize step: x [M, K] contiguous, float32 / float16 / bfloat16 ->
  // 8-bit + per-row scales. A CUDA lane reads the served dtype as it is; the
  // CPU lanes widen it to float32 (exact, so the bits are the same).
  QuantizedActivation quantize_input(const Tensor& x, const QuantizedParams& params) const;
  // y [M, N] = act(scaled GEMM of `input` and the weight, + bias), rounded
  // once to `out_dtype` (float32, float16 or bfloat16). A CUDA lane rounds
  // in its epilogue; the CPU lanes compute float32 and convert.
  Tensor scaled_mm(const QuantizedActivation& input, const QuantizedParams& params, Activation act,
                   DType out_dtype = DType::kF32) const;
  // Both, for x [..., K] in fp32/fp16/bf16 -> [..., N] in x's dtype, rounded once.
  // On a CUDA lane with the small-M GEMV (ScaledMMLane::cuda_small_m_gemv),
  // up to 16 rows go through it with the quantize folded in: one launch,
  // the same bits.
  Tensor forward(const Tensor& x, const QuantizedParams& params, Activation act) const;

  // The quantizing epilogue of a GEMM-chain producer (spec "One quantized
  // GEMM"): y = act(scaled GEMM + bias), rounded once to `served` (the dtype
  // the unfused producer would return), then quantized at `consumer`'s
  // static multiplier: bit-identical to scaled_mm, the cast to `served` and
  // the consumer's own quantize_input. The result carries the consumer's
  // input_scale per row, as its quantize_input would.
  QuantizedActivation scaled_mm_quant(const QuantizedActivation& input,
                                      const QuantizedParams& params, Activation act,
                                      const QuantMethod& consumer, DType served) const;

  // Whether bind saw a runtime smoother (a smooth_inv slot).
  bool runtime_smoothed() const { return runtime_smoothed_; }
  // Its input is quantized per token, without a runtime smoother: the input
  // a fused pre-norm can emit for it (spec "Fewer quantize launches").
  bool takes_plain_per_token_input() const { return !has_static_input() && !runtime_smoothed_; }
  // The calibrated input_scale (static schemes, after bind).
  float static_input_scale() const { return static_scale_; }
  // The static input scale repeated for m rows on the bound device (the
  // per-row scales a QuantizedActivation carries); a cached buffer's view.
  Tensor static_scale_column(int64_t m) const;

  // Who quantizes this layer's input, for the report: the label
  // link_quantization set ("encoder.encoders.0.norm_mha
  // (add_layer_norm_residual_quant)"), else its own quantize ("self
  // (quantize_per_token)", "self (quantize_per_token + smoother)", "self
  // (quantize_static)").
  std::string input_quantizer() const;
  // The label of a fused producer quantizing this layer's input; "" = self.
  void set_input_quantizer(std::string label) { linked_input_quantizer_ = std::move(label); }
  // Its own quantize step's label, whatever the links.
  std::string own_input_quantizer() const;
  // The kernel (lane configuration) a GEMM of `m` rows runs, for the report.
  std::string kernel_name(int64_t m) const;

 private:
  // forward's small-M CUDA path; false (y untouched) where it does not apply.
  bool forward_gemv(const Tensor& x2, const QuantizedParams& params, Activation act,
                    Tensor& y) const;

  QuantScheme scheme_;
  const ScaledMMLane* lane_ = nullptr;
  FormatKernels cpu_kernels_;                    // a CPU lane's kernels for the format (bind)
  std::shared_ptr<const void> prepared_weight_;  // the lane's repacked weight, if it repacks
  std::vector<float> static_multiplier_;         // [K], static input only
  float static_scale_ = 0.0f;
  bool runtime_smoothed_ = false;
  std::string linked_input_quantizer_;  // set by link_quantization; "" = self
  // CUDA lanes, prepared at bind: the bias in fp32 and the static
  // multiplier on the device, and the static scale repeated per row (grown
  // on demand: a QuantizedActivation carries one scale per row).
  Device device_ = Device::cpu();
  int64_t scaled_n_ = 0;  // the bound weight's N and K
  int64_t scaled_k_ = 0;
  Tensor bias_f32_;
  Tensor static_multiplier_device_;
  mutable std::mutex static_rows_mutex_;
  mutable Tensor static_scale_rows_;
};

// Refuses, by name and with what to do, a scheme no method serves: nvfp4, a
// weight-only scheme, a per-tensor dynamic activation scale, int4, ...
void check_servable(const QuantScheme& scheme);

using QuantMethodFactory = std::function<std::unique_ptr<QuantMethod>(const QuantScheme&)>;
// Registers a method beyond the traits table's own; a registered method takes
// its weight dtype before the table's W8A8 method.
void register_quant_method(const std::string& name, QDType weight_dtype,
                           QuantMethodFactory factory);
std::vector<std::string> quant_method_names();
// The method registered for the scheme's weight dtype (after check_servable).
std::unique_ptr<QuantMethod> make_quant_method(const QuantScheme& scheme);

}  // namespace oasr::quant
