#include "layers/quantizable.h"

#include <cmath>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "quant/kernels/cpu/im2col_quantize.h"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/numerics.h"

namespace oasr::layers {

GemmInput::GemmInput(quant::QuantizedActivation activation, Shape shape, DType served,
                     Target target, const quant::QuantMethod* static_consumer)
    : quantized_(true),
      activation_(std::move(activation)),
      shape_(std::move(shape)),
      served_(served),
      target_(target),
      static_consumer_(static_consumer) {
  OASR_CHECK(
      activation_.data.dim() == 2 && !shape_.empty() && shape_.back() == activation_.data.size(1) &&
          activation_.scale.numel() == activation_.data.size(0),
      kInternal, "GemmInput: an 8-bit activation ", shape_str(activation_.data.shape()), " with ",
      activation_.scale.numel(), " scales does not carry the shape ", shape_str(shape_));
  OASR_CHECK(target_ != Target::kStaticScale || static_consumer_ != nullptr, kInternal,
             "GemmInput: an input quantized at a static scale must name its consumer");
}

int64_t GemmInput::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t index = d < 0 ? d + n : d;
  OASR_CHECK(index >= 0 && index < n, kInternal, "GemmInput: dimension ", d,
             " out of range for shape ", shape_str(shape()));
  return shape()[static_cast<size_t>(index)];
}

const Tensor& GemmInput::tensor() const {
  OASR_CHECK(!quantized_, kInternal, "GemmInput ", shape_str(shape_),
             " holds a fused producer's 8-bit output, which only its quantized consumer GEMM "
             "may read");
  return tensor_;
}

std::string gemm_alignment_refusal(int64_t in_features, int64_t out_features, const char* in_name,
                                   const char* out_name) {
  if (in_features % 16 != 0) {
    return std::string(in_name) + " " + std::to_string(in_features) +
           " is not a multiple of 16, which the 8-bit GEMMs need";
  }
  if (out_features % 8 != 0) {
    return std::string(out_name) + " " + std::to_string(out_features) +
           " is not a multiple of 8, which the 8-bit GEMMs need";
  }
  return "";
}

std::string QuantizableLayer::quant_refusal(const quant::QuantScheme& /*scheme*/) const {
  if (!fixed_refusal_.empty()) return fixed_refusal_;
  const quant::GemmGeometry g = quant_geometry();
  return gemm_alignment_refusal(g.in_features, g.out_features);
}

void QuantizableLayer::attach_quant_method(std::unique_ptr<quant::QuantMethod> method,
                                           bool runtime_smoothed) {
  OASR_CHECK(method != nullptr, kInternal, "attach_quant_method: null method");
  Module& module = quant_module();
  OASR_CHECK(!quantized(), kInvalidArgument, module.type_name(), " '", module.path(),
             "' is already quantized (", quant_method_->scheme().name, ")");
  const std::string refusal = quant_refusal(method->scheme());
  OASR_CHECK(refusal.empty(), kUnsupported, module.type_name(), " '", module.path(),
             "' cannot be quantized with ", method->scheme().name, ": ", refusal);
  for (const quant::StorageSlot& slot : method->storage(quant_geometry(), runtime_smoothed)) {
    if (module.has_parameter(slot.name)) {
      module.redeclare_parameter(slot.name, slot.shape, slot.dtype, DTypePolicy::kExact);
    } else {
      module.register_parameter(slot.name, slot.shape, slot.dtype, DTypePolicy::kExact);
    }
  }
  quant_method_ = std::move(method);
}

void QuantizableLayer::quantize_weight_online(std::unique_ptr<quant::QuantMethod> method) {
  OASR_CHECK(method != nullptr, kInternal, "quantize_weight_online: null method");
  const Module& module = quant_module();
  OASR_CHECK(module.slot("weight").value.defined(), kInvalidArgument, module.type_name(), " '",
             module.path(), "': online quantization needs its full-precision weight loaded first");
  const Tensor fp_weight = fp_weight_matrix();
  quant::QuantizedWeight q = method->quantize_weight(fp_weight);
  const quant::GemmGeometry geometry = quant_geometry();
  attach_quant_method(std::move(method));
  Module& m = quant_module();
  m.set_param("weight", q.weight.view(geometry.quantized_weight_shape));
  m.set_param("weight_scale", q.weight_scale);
}

namespace {

// A checkpoint's scales divide and multiply every value the layer computes:
// NaN, 0 or a negative scale would serve normal-looking garbage, so each is
// refused at load naming the tensor, the first bad element and what to do.
void check_positive_finite(const Tensor& scales, const std::string& name) {
  if (!scales.defined()) return;
  const Tensor values = scales.to(Device::cpu()).to(DType::kF32).contiguous();
  const float* data = values.data<float>();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (!(std::isfinite(data[i]) && data[i] > 0.0f)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  OASR_CHECK(bad == 0, kCorruptFile, name, " holds ", bad, " of ", values.numel(),
             " values that are not finite and > 0 (the first at index ", first, ": ",
             first >= 0 ? data[first] : 0.0f,
             "); a scale must be a positive finite number: re-quantize the checkpoint from its "
             "full-precision original (oasr quantize)");
}

}  // namespace

void QuantizableLayer::bind_quant(const quant::BindOptions& options) {
  if (!quantized()) return;
  const quant::QuantizedParams params = quant_params();
  const std::string path = quant_module().path();
  check_positive_finite(params.weight_scale, path + ".weight_scale");
  check_positive_finite(params.input_scale, path + ".input_scale");
  check_positive_finite(params.smooth_inv, path + ".smooth_inv");
  quant_method_->bind(options, params);
}

quant::QuantizedParams QuantizableLayer::quant_params() const {
  const Module& module = quant_module();
  const quant::GemmGeometry geometry = quant_geometry();
  quant::QuantizedParams params;
  params.weight = module.param("weight").view({geometry.out_features, geometry.gemm_k()});
  params.weight_scale = module.param("weight_scale");
  if (module.has_parameter("smooth_inv")) params.smooth_inv = module.param("smooth_inv");
  if (module.has_parameter("input_scale")) params.input_scale = module.param("input_scale");
  if (module.has_parameter("bias")) params.bias = module.param("bias");
  return params;
}

void QuantizableLayer::observe_input(const Tensor& x) const {
  if (observer_ == nullptr) return;
  observer_->observe(quant_module().path(), quant_geometry().kind, x);
}

void QuantizableLayer::observe_input(const GemmInput& x) const {
  if (observer_ == nullptr) return;
  OASR_CHECK(!x.is_quantized(), kInternal, quant_module().path(),
             ": an input observer needs this layer's full-precision input, but a fused producer "
             "emits it in 8 bits; disarm the links first (quant::link_quantization with "
             "LinkOptions{.enabled = false})");
  observe_input(x.tensor());
}

void QuantizableLayer::arm_output_quant(const QuantizableLayer* consumer) {
  if (consumer != nullptr) {
    const quant::QuantMethod* mine = quant_method();
    const quant::QuantMethod* theirs = consumer->quant_method();
    OASR_CHECK(mine != nullptr && theirs != nullptr && mine->bound() && theirs->bound() &&
                   theirs->has_static_input() && theirs->format() == mine->format(),
               kInternal, quant_module().path(), " -> ", consumer->quant_module().path(),
               ": a GEMM chain needs both layers quantized and bound in one format, the "
               "consumer with a static input scale");
  }
  output_quant_consumer_ = consumer;
}

void QuantizableLayer::set_input_quantizer(std::string label) {
  OASR_CHECK(quantized(), kInternal, quant_module().path(),
             ": only a quantized layer has an input quantizer");
  quant_method_->set_input_quantizer(std::move(label));
}

Tensor QuantizableLayer::quant_forward(const Tensor& x, Activation act) const {
  return quant_method_->forward(x, quant_params(), act);
}

quant::QuantizedActivation QuantizableLayer::quantized_gemm_input(const GemmInput& x) const {
  const quant::QuantizedParams params = quant_params();
  const int64_t k = params.weight.size(1);
  if (!x.is_quantized()) {
    const Tensor& t = x.tensor();
    OASR_CHECK(t.dim() >= 1 && t.size(-1) == k, kInvalidArgument, quant_module().path(), ": input ",
               shape_str(t.shape()), " does not end in its ", k, " input features");
    return quant_method_->quantize_input(t.contiguous().view({-1, k}), params);
  }
  const quant::QuantizedActivation& a = x.activation();
  const std::string who = quant_module().path();
  OASR_CHECK(a.format == quant_method_->format() && a.data.size(1) == k, kInternal, who, ": got a ",
             quant::to_string(a.format), " input ", shape_str(a.data.shape()),
             " from a fused producer, but its ", quant_method_->scheme().name, " GEMM reads ",
             quant::to_string(quant_method_->format()), " with K = ", k);
  if (x.target() == GemmInput::Target::kPerToken) {
    OASR_CHECK(quant_method_->takes_plain_per_token_input(), kInternal, who,
               ": a fused norm emitted a per-token input, but this layer quantizes ",
               quant_method_->has_static_input() ? "at a static scale" : "with a runtime smoother",
               "; link_quantization must not arm that link");
  } else {
    OASR_CHECK(x.static_consumer() == quant_method_.get(), kInternal, who,
               ": the 8-bit input was quantized at another layer's static scale");
  }
  return a;
}

Tensor QuantizableLayer::quant_forward(const GemmInput& x, Activation act) const {
  if (!x.is_quantized()) return quant_forward(x.tensor(), act);
  const quant::QuantizedActivation a = quantized_gemm_input(x);
  const quant::QuantizedParams params = quant_params();
  const Tensor y = quant_method_->scaled_mm(a, params, act, x.served_dtype());
  Shape out_shape = x.shape();
  out_shape.back() = params.weight.size(0);
  return y.view(out_shape);
}

GemmInput QuantizableLayer::quant_forward_to_consumer(const GemmInput& x, Activation act) const {
  OASR_CHECK(output_quant_consumer_ != nullptr, kInternal, quant_module().path(),
             ": quant_forward_to_consumer without an armed GEMM chain");
  const quant::QuantMethod& consumer = *output_quant_consumer_->quant_method();
  const quant::QuantizedParams params = quant_params();
  const DType served = x.served_dtype();
  quant::QuantizedActivation out =
      quant_method_->scaled_mm_quant(quantized_gemm_input(x), params, act, consumer, served);
  Shape out_shape = x.shape();
  out_shape.back() = params.weight.size(0);
  return GemmInput(std::move(out), std::move(out_shape), served, GemmInput::Target::kStaticScale,
                   &consumer);
}

Tensor QuantizableLayer::quant_forward_conv(const Tensor& x, const ConvPatches& g,
                                            Activation act) const {
  const int64_t batch = x.size(0);
  const int64_t channels = x.size(1);
  const int64_t height = x.size(2);
  const int64_t width = x.size(3);
  const int64_t rows = batch * g.out_h * g.out_w;
  const int64_t patch = g.kernel_h * g.kernel_w * channels;
  const quant::QuantMethod& method = *quant_method_;
  const bool static_int8 = method.has_static_input() && !method.runtime_smoothed() &&
                           method.number_format().serves_convolution;
  const quant::Im2colGeometry geometry{batch,      channels,   height,     width,
                                       g.kernel_h, g.kernel_w, g.stride_h, g.stride_w,
                                       g.pad_h,    g.pad_w,    g.out_h,    g.out_w};
  // The multiplier of a layer without a smoother: 1 * (1 / input_scale).
  const auto uniform_multiplier = [&] {
    return quant::static_multiplier(method.static_input_scale(), 1.0f);
  };
  const auto gather_then_quantize = [&] {
    if (static_int8) {
      // The patches straight into int8 at the static scale (the same bytes
      // as the float32 patches below quantized by the method).
      const Tensor xf = x.to(DType::kF32).contiguous();
      quant::QuantizedActivation a;
      a.format = method.format();
      a.data = Tensor::empty({rows, patch}, method.storage_dtype());
      a.scale = method.static_scale_column(rows);
      quant::cpu::im2col_quantize_int8(xf.data<float>(), geometry, uniform_multiplier(),
                                       a.data.data<int8_t>());
      const Tensor y = method.scaled_mm(a, quant_params(), act, DType::kF32);
      return x.dtype() == DType::kF32 ? y : y.to(x.dtype());
    }
    // Each output pixel's receptive field (zeros where it reaches into the
    // padding) in float32, then the method's GEMM over the patches.
    const Tensor xf = x.to(DType::kF32).contiguous();
    Tensor patches = Tensor::zeros({rows, patch}, DType::kF32);
    const float* src = xf.data<float>();
    float* dst = patches.data<float>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t oy = 0; oy < g.out_h; ++oy) {
        for (int64_t ox = 0; ox < g.out_w; ++ox) {
          float* row = dst + ((b * g.out_h + oy) * g.out_w + ox) * patch;
          for (int64_t r = 0; r < g.kernel_h; ++r) {
            const int64_t iy = oy * g.stride_h - g.pad_h + r;
            if (iy < 0 || iy >= height) continue;
            for (int64_t s = 0; s < g.kernel_w; ++s) {
              const int64_t ix = ox * g.stride_w - g.pad_w + s;
              if (ix < 0 || ix >= width) continue;
              for (int64_t c = 0; c < channels; ++c) {
                row[(r * g.kernel_w + s) * channels + c] =
                    src[((b * channels + c) * height + iy) * width + ix];
              }
            }
          }
        }
      }
    }
    const Tensor y = quant_forward(patches, act);
    return x.dtype() == DType::kF32 ? y : y.to(x.dtype());
  };
  const auto gather_quantized = [&](auto on) {
    // One kernel gathers the patches straight into int8 at the static scale.
    OASR_CHECK(static_int8, kInternal, quant_module().path(),
               ": a quantized convolution takes a convolution format (int8) at a static input "
               "scale without a smoother");
    quant::QuantizedActivation a;
    a.format = method.format();
    a.data = Tensor::empty({rows, patch}, method.storage_dtype(), x.device());
    a.scale = method.static_scale_column(rows);
    if (rows > 0) {
      quant::cuda::im2col_quantize_int8(x.contiguous().raw_data(), x.dtype(), geometry,
                                        uniform_multiplier(), a.data.data<int8_t>(),
                                        on.device_index);
    }
    return method.scaled_mm(a, quant_params(), act, x.dtype());
  };
  return on_device("quantized convolution", x.device(), gather_then_quantize, gather_quantized);
}

}  // namespace oasr::layers
