#include "quant/methods/fused_producers.h"

#include <atomic>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/number_format.h"

namespace oasr::quant {
namespace {

std::atomic<int64_t> g_layer_norm_quant_calls{0};
std::atomic<int64_t> g_add_layer_norm_quant_calls{0};
std::atomic<int64_t> g_scaled_mm_quant_calls{0};

// The format's row, refusing one without a fused body on `device`.
const NumberFormat& fused_format(const char* op, QDType format, Device device) {
  const NumberFormat& row = number_format(format);
  OASR_CHECK(row.fuses_norm_quant_on(device), kUnsupported, op, ": the ", row.name,
             " format has no fused body on ", device.str(),
             "; disarm the links (OASR_QUANT_FUSION=0)");
  return row;
}

// Validates the norm's operands; returns D.
int64_t check_norm_operands(const char* op, const Tensor& x, const Tensor& weight,
                            const Tensor& bias) {
  OASR_CHECK(x.defined() && x.dim() >= 1, kInvalidArgument, op,
             ": x must be a tensor [..., D], got ", x.defined() ? shape_str(x.shape()) : "none");
  OASR_CHECK(fused_producers_available(x.device()), kUnsupported, op, ": no ", x.device().str(),
             " body in this build (a CPU-only build); disarm the links (OASR_QUANT_FUSION=0)");
  OASR_CHECK(x.dtype() == DType::kF32 ||
                 (x.device().is_cuda() && (x.dtype() == DType::kF16 || x.dtype() == DType::kBF16)),
             kInvalidArgument, op,
             ": the CPU body takes float32 (the CPU's served dtype) and the CUDA body float32, "
             "float16 or bfloat16, got ",
             dtype_name(x.dtype()), " on ", x.device().str());
  const int64_t features = x.size(-1);
  for (const Tensor* param : {&weight, &bias}) {
    if (!param->defined()) continue;
    OASR_CHECK(param->dtype() == x.dtype() && param->dim() == 1 && param->size(0) == features &&
                   param->device() == x.device(),
               kInvalidArgument, op, ": weight and bias must be ", dtype_name(x.dtype()), " [",
               features, "] on x's device, got ", param->str());
  }
  return features;
}

const float* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

QuantizedActivation empty_activation(int64_t rows, int64_t features, const NumberFormat& format,
                                     Device device) {
  QuantizedActivation out;
  out.format = format.id;
  out.data = Tensor::empty({rows, features}, format.storage, device);
  out.scale = Tensor::empty({rows}, DType::kF32, device);
  return out;
}

}  // namespace

bool fused_producers_available(Device device) {
  return device.is_cpu() || kBuiltWithCuda;
}

namespace {

const void* raw_or_null(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

}  // namespace

QuantizedActivation layer_norm_quant(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                     float eps, QDType format) {
  constexpr const char* kOp = "layer_norm_quant";
  const int64_t features = check_norm_operands(kOp, x, weight, bias);
  const Tensor x_c = x.contiguous();
  const Tensor w_c = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b_c = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t rows = features == 0 ? 0 : x.numel() / features;
  const NumberFormat& row = fused_format(kOp, format, x.device());
  QuantizedActivation out = empty_activation(rows, features, row, x.device());
  on_device(
      kOp, x.device(),
      [&] {
        row.cpu_fused.layer_norm_quant(x_c.data<float>(), data_or_null(w_c), data_or_null(b_c),
                                       rows, features, eps, out.data.raw_data(),
                                       out.scale.data<float>());
      },
      [&](auto on) {
        if (rows == 0) return;
        cuda::layer_norm_quant(format, x_c.raw_data(), raw_or_null(w_c), raw_or_null(b_c),
                               x.dtype(), rows, features, eps, out.data.raw_data(),
                               out.scale.data<float>(), on.device_index);
      });
  note_fused_producer_call(FusedProducer::kLayerNormQuant);
  return out;
}

AddLayerNormQuantResult add_layer_norm_residual_quant(const Tensor& x, const Tensor& residual,
                                                      float alpha, const Tensor& weight,
                                                      const Tensor& bias, float eps,
                                                      QDType format) {
  constexpr const char* kOp = "add_layer_norm_residual_quant";
  const int64_t features = check_norm_operands(kOp, x, weight, bias);
  OASR_CHECK(residual.defined() && residual.shape() == x.shape() && residual.dtype() == x.dtype() &&
                 residual.device() == x.device(),
             kInvalidArgument, kOp, ": residual must match x ", x.str(), ", got ",
             residual.defined() ? residual.str() : "none");
  const Tensor x_c = x.contiguous();
  const Tensor r_c = residual.contiguous();
  const Tensor w_c = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b_c = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t rows = features == 0 ? 0 : x.numel() / features;
  AddLayerNormQuantResult out;
  out.sum = Tensor::empty(x.shape(), x.dtype(), x.device());
  const NumberFormat& row = fused_format(kOp, format, x.device());
  out.quantized = empty_activation(rows, features, row, x.device());
  on_device(
      kOp, x.device(),
      [&] {
        row.cpu_fused.add_layer_norm_residual_quant(
            x_c.data<float>(), r_c.data<float>(), alpha, data_or_null(w_c), data_or_null(b_c), rows,
            features, eps, out.sum.data<float>(), out.quantized.data.raw_data(),
            out.quantized.scale.data<float>());
      },
      [&](auto on) {
        if (rows == 0) return;
        cuda::add_layer_norm_residual_quant(
            format, x_c.raw_data(), r_c.raw_data(), alpha, raw_or_null(w_c), raw_or_null(b_c),
            x.dtype(), rows, features, eps, out.sum.raw_data(), out.quantized.data.raw_data(),
            out.quantized.scale.data<float>(), on.device_index);
      });
  note_fused_producer_call(FusedProducer::kAddLayerNormResidualQuant);
  return out;
}

FusedProducerCalls fused_producer_calls() {
  FusedProducerCalls calls;
  calls.layer_norm_quant = g_layer_norm_quant_calls.load();
  calls.add_layer_norm_residual_quant = g_add_layer_norm_quant_calls.load();
  calls.scaled_mm_quant = g_scaled_mm_quant_calls.load();
  return calls;
}

void note_fused_producer_call(FusedProducer producer) {
  switch (producer) {
    case FusedProducer::kLayerNormQuant:
      ++g_layer_norm_quant_calls;
      return;
    case FusedProducer::kAddLayerNormResidualQuant:
      ++g_add_layer_norm_quant_calls;
      return;
    case FusedProducer::kScaledMMQuant:
      ++g_scaled_mm_quant_calls;
      return;
  }
}

}  // namespace oasr::quant
