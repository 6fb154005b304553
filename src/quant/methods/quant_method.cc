#include "quant/methods/quant_method.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "quant/kernels/cpu/fused_producers.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/methods/fused_producers.h"
#include "quant/number_format.h"
#include "quant/numerics.h"

namespace oasr::quant {

int64_t GemmGeometry::gemm_k() const {
  if (quantized_weight_shape.size() <= 1) return in_features;
  int64_t k = 1;
  for (size_t d = 1; d < quantized_weight_shape.size(); ++d) k *= quantized_weight_shape[d];
  return k;
}

QuantMethod::QuantMethod(QuantScheme scheme) : scheme_(std::move(scheme)) {
  check_servable(scheme_);
}

const NumberFormat& QuantMethod::number_format() const {
  return quant::number_format(format());
}

DType QuantMethod::storage_dtype() const {
  return number_format().storage;
}

std::vector<StorageSlot> QuantMethod::storage(const GemmGeometry& geometry,
                                              bool runtime_smoothed) const {
  std::vector<StorageSlot> slots;
  slots.push_back({"weight", geometry.quantized_weight_shape, storage_dtype()});
  slots.push_back({"weight_scale", {geometry.out_features}, DType::kF32});
  if (runtime_smoothed) slots.push_back({"smooth_inv", {geometry.in_features}, DType::kF32});
  if (has_static_input()) slots.push_back({"input_scale", {1}, DType::kF32});
  return slots;
}

QuantizedWeight QuantMethod::quantize_weight(const Tensor& weight_nk) const {
  OASR_CHECK(weight_nk.defined() && weight_nk.dim() == 2, kInvalidArgument,
             "quantize_weight: expects a weight [N, K], got ",
             weight_nk.defined() ? shape_str(weight_nk.shape()) : "an undefined tensor");
  const Tensor w = weight_nk.to(Device::cpu()).to(DType::kF32).contiguous();
  const int64_t n = w.size(0);
  const int64_t k = w.size(1);
  QuantizedWeight out;
  out.weight = Tensor::empty({n, k}, storage_dtype());
  out.weight_scale = Tensor::empty({n}, DType::kF32);
  const float* src = w.data<float>();
  float* scale = out.weight_scale.data<float>();
  auto* q = static_cast<uint8_t*>(out.weight.raw_data());
  const size_t row_bytes = static_cast<size_t>(k) * dtype_size(storage_dtype());
  const NumberFormat& rule = number_format();
  for (int64_t row = 0; row < n; ++row) {
    rule.quantize_row(src + row * k, nullptr, k, q + static_cast<size_t>(row) * row_bytes,
                      scale + row);
  }
  return out;
}

void QuantMethod::bind(const BindOptions& options, const QuantizedParams& params) {
  OASR_CHECK(params.weight.defined() && params.weight.dim() == 2 &&
                 params.weight.dtype() == storage_dtype(),
             kInternal, "bind: the ", name(), " method needs its ", dtype_name(storage_dtype()),
             " weight [N, K] loaded first");
  const int64_t k = params.weight.size(1);
  const int64_t max_exact_k = number_format().max_exact_k;
  OASR_CHECK(max_exact_k == 0 || k <= max_exact_k, kUnsupported, "an ", number_format().name,
             " GEMM with K = ", k, " could overflow its exact accumulator (K <= ", max_exact_k,
             "); keep this layer in full precision (ignore it)");
  const ScaledMMLane& lane = choose_lane(format(), options.device, options.backend);
  static_multiplier_.clear();
  runtime_smoothed_ = params.smooth_inv.defined();
  if (has_static_input()) {
    OASR_CHECK(params.input_scale.defined() && params.input_scale.numel() == 1, kInvalidArgument,
               "the ", scheme_.name, " scheme needs a calibrated input_scale [1]");
    const Tensor input_scale = params.input_scale.to(Device::cpu());
    static_scale_ = input_scale.data<float>()[0];
    OASR_CHECK(static_scale_ > 0.0f && static_scale_ < 3.4e38f, kInvalidArgument,
               "input_scale must be a positive finite number, got ", static_scale_);
    Tensor smooth;
    if (params.smooth_inv.defined()) smooth = params.smooth_inv.to(Device::cpu()).contiguous();
    static_multiplier_.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      const float smooth_j = smooth.defined() ? smooth.data<float>()[j] : 1.0f;
      static_multiplier_[static_cast<size_t>(j)] = static_multiplier(static_scale_, smooth_j);
    }
  }
  device_ = options.device;
  bias_f32_ = Tensor();
  static_multiplier_device_ = Tensor();
  {
    std::lock_guard<std::mutex> lock(static_rows_mutex_);
    static_scale_rows_ = Tensor();
  }
  if (lane.is_cuda()) {
    OASR_CHECK(params.weight.device() == options.device && params.weight.is_contiguous(), kInternal,
               "bind: the ", name(), " weight must be contiguous on ", options.device.str(),
               " before a CUDA lane binds, got ", params.weight.str());
    if (params.bias.defined()) {
      bias_f32_ = params.bias.to(DType::kF32).contiguous().to(options.device);
    }
    if (has_static_input()) {
      static_multiplier_device_ = Tensor::from_vector(static_multiplier_, {k}).to(options.device);
    }
  }
  prepared_weight_.reset();
  cpu_kernels_ = lane.is_cuda() ? FormatKernels{} : number_format().cpu_kernels(lane);
  if (cpu_kernels_.prepare_weight && cpu_kernels_.scaled_mm_prepared) {
    const Tensor weight = params.weight.contiguous();
    prepared_weight_ = cpu_kernels_.prepare_weight(weight.raw_data(), weight.size(0), k);
  }
  scaled_n_ = params.weight.size(0);
  scaled_k_ = k;
  lane_ = &lane;
}

const ScaledMMLane& QuantMethod::lane() const {
  OASR_CHECK(lane_ != nullptr, kInternal, "the ", name(),
             " quant method runs before bind_quantization chose its lane");
  return *lane_;
}

Tensor QuantMethod::static_scale_column(int64_t m) const {
  std::lock_guard<std::mutex> lock(static_rows_mutex_);
  if (!static_scale_rows_.defined() || static_scale_rows_.numel() < m) {
    const int64_t rows = std::max<int64_t>(m, 1024);
    static_scale_rows_ = Tensor::full({rows}, static_scale_, DType::kF32).to(device_);
  }
  return static_scale_rows_.narrow(0, 0, m);
}

QuantizedActivation QuantMethod::quantize_input(const Tensor& x,
                                                const QuantizedParams& params) const {
  lane();  // refuses a method no lane was bound to
  const auto on_cpu = [&] {
    OASR_CHECK(
        x.dim() == 2 && x.is_contiguous() &&
            (x.dtype() == DType::kF32 || x.dtype() == DType::kF16 || x.dtype() == DType::kBF16),
        kInternal, "quantize_input expects contiguous float [M, K], got ", x.str());
    // The CPU lanes work in float32 (widening float16 / bfloat16 is exact).
    const Tensor x32 = x.to(DType::kF32);
    const int64_t m = x32.size(0);
    const int64_t k = x32.size(1);
    QuantizedActivation out;
    out.format = format();
    out.data = Tensor::empty({m, k}, storage_dtype());
    out.scale = Tensor::empty({m}, DType::kF32);
    float* scale = out.scale.data<float>();
    if (has_static_input()) {
      for (int64_t row = 0; row < m; ++row) scale[row] = static_scale_;
      cpu_kernels_.quantize_static(x32.data<float>(), static_multiplier_.data(), m, k,
                                   out.data.raw_data());
      return out;
    }
    Tensor smooth;
    if (params.smooth_inv.defined()) smooth = params.smooth_inv.contiguous();
    const float* smooth_ptr = smooth.defined() ? smooth.data<float>() : nullptr;
    cpu_kernels_.quantize_per_token(x32.data<float>(), smooth_ptr, m, k, out.data.raw_data(),
                                    scale);
    return out;
  };
  const auto on_cuda = [&](auto) {
    OASR_CHECK(x.dim() == 2 && x.is_contiguous() && x.device() == device_, kInternal,
               "quantize_input expects contiguous [M, K] on ", device_.str(), ", got ", x.str());
    const int64_t m = x.size(0);
    const int64_t k = x.size(1);
    QuantizedActivation out;
    out.format = format();
    out.data = Tensor::empty({m, k}, storage_dtype(), device_);
    if (has_static_input()) {
      out.scale = static_scale_column(m);
      cuda::quantize_static(format(), x.raw_data(), x.dtype(),
                            static_multiplier_device_.data<float>(), m, k, out.data.raw_data(),
                            device_.index);
      return out;
    }
    out.scale = Tensor::empty({m}, DType::kF32, device_);
    Tensor smooth;
    if (params.smooth_inv.defined()) smooth = params.smooth_inv.contiguous();
    cuda::quantize_per_token(format(), x.raw_data(), x.dtype(),
                             smooth.defined() ? smooth.data<float>() : nullptr, m, k,
                             out.data.raw_data(), out.scale.data<float>(), device_.index);
    return out;
  };
  return on_device("quantize_input", device_, on_cpu, on_cuda);
}

namespace {

cuda::ScaledMMArgs cuda_gemm_args(QDType format, const QuantizedActivation& input,
                                  const QuantizedParams& params, const Tensor& bias_f32,
                                  Activation act, Device device) {
  cuda::ScaledMMArgs args;
  args.format = format;
  args.a = input.data.raw_data();
  args.a_scale = input.scale.data<float>();
  args.w = params.weight.raw_data();
  args.w_scale = params.weight_scale.data<float>();
  args.bias = bias_f32.defined() ? bias_f32.data<float>() : nullptr;
  args.act = act;
  args.m = input.data.size(0);
  args.n = params.weight.size(0);
  args.k = input.data.size(1);
  args.device_index = device.index;
  return args;
}

}  // namespace

Tensor QuantMethod::scaled_mm(const QuantizedActivation& input, const QuantizedParams& params,
                              Activation act, DType out_dtype) const {
  const ScaledMMLane& chosen = lane();
  const int64_t m = input.data.size(0);
  const int64_t k = input.data.size(1);
  const int64_t n = params.weight.size(0);
  OASR_CHECK(params.weight.size(1) == k && input.format == format(), kInvalidArgument, "the ",
             name(), " GEMM got a ", to_string(input.format), " input ",
             shape_str(input.data.shape()), " for a weight ", shape_str(params.weight.shape()));
  OASR_CHECK(out_dtype == DType::kF32 || out_dtype == DType::kF16 || out_dtype == DType::kBF16,
             kInternal, "scaled_mm: output dtype ", dtype_name(out_dtype),
             " is not float32, float16 or bfloat16");
  const auto on_cpu = [&] {
    Tensor bias;
    if (params.bias.defined()) bias = params.bias.to(DType::kF32).contiguous();
    const float* bias_ptr = bias.defined() ? bias.data<float>() : nullptr;
    const Tensor weight = params.weight.contiguous();
    Tensor out = Tensor::empty({m, n}, DType::kF32);
    if (m == 0) return out;
    if (prepared_weight_ != nullptr) {
      cpu_kernels_.scaled_mm_prepared(input.data.raw_data(), input.scale.data<float>(),
                                      prepared_weight_.get(), params.weight_scale.data<float>(),
                                      bias_ptr, act, m, out.data<float>());
    } else {
      cpu_kernels_.scaled_mm(input.data.raw_data(), input.scale.data<float>(), weight.raw_data(),
                             params.weight_scale.data<float>(), bias_ptr, act, m, n, k,
                             out.data<float>());
    }
    return out_dtype == DType::kF32 ? out : out.to(out_dtype);
  };
  const auto on_cuda = [&](auto) {
    OASR_CHECK(input.data.is_contiguous() && input.data.device() == device_ &&
                   input.scale.device() == device_,
               kInternal, "scaled_mm: the 8-bit input must be contiguous on ", device_.str());
    Tensor out = Tensor::empty({m, n}, out_dtype, device_);
    if (m == 0) return out;
    cuda::ScaledMMArgs args = cuda_gemm_args(format(), input, params, bias_f32_, act, device_);
    args.served = out_dtype;
    args.out = out.raw_data();
    chosen.cuda_scaled_mm(args);
    return out;
  };
  return on_device("scaled_mm", device_, on_cpu, on_cuda);
}

Tensor QuantMethod::forward(const Tensor& x, const QuantizedParams& params, Activation act) const {
  const int64_t k = params.weight.size(1);
  OASR_CHECK(x.dim() >= 1 && x.size(-1) == k, kInvalidArgument, "quantized ", scheme_.name,
             " GEMM: input ", shape_str(x.shape()), " does not end in its ", k, " input features");
  OASR_CHECK(x.dtype() == DType::kF32 || x.dtype() == DType::kF16 || x.dtype() == DType::kBF16,
             kInvalidArgument, "quantized ", scheme_.name, " GEMM: input dtype ",
             dtype_name(x.dtype()), " is not float32, float16 or bfloat16");
  const Tensor x2 = x.contiguous().view({-1, k});
  Tensor y;
  if (!forward_gemv(x2, params, act, y)) {
    const QuantizedActivation q = quantize_input(x2, params);
    y = scaled_mm(q, params, act, x.dtype());
  }
  Shape out_shape = x.shape();
  out_shape.back() = params.weight.size(0);
  return y.view(out_shape);
}

bool QuantMethod::forward_gemv(const Tensor& x2, const QuantizedParams& params, Activation act,
                               Tensor& y) const {
  if (!lane().cuda_small_m_gemv || x2.device() != device_) return false;
  const auto on_cpu = [] { return false; };
  const auto on_cuda = [&](auto) {
    const int64_t m = x2.size(0);
    const int64_t k = x2.size(1);
    const int64_t n = params.weight.size(0);
    cuda::GemvInput input;
    input.x = x2.raw_data();
    input.x_dtype = x2.dtype();
    Tensor smooth;
    if (has_static_input()) {
      input.static_multiplier = static_multiplier_device_.data<float>();
      input.static_scale = static_scale_;
    } else if (params.smooth_inv.defined()) {
      smooth = params.smooth_inv.contiguous();
      input.smooth_inv = smooth.data<float>();
    }
    if (!cuda::quantize_gemv_takes(input, format(), m, n, k)) return false;
    y = Tensor::empty({m, n}, x2.dtype(), device_);
    cuda::ScaledMMArgs args;
    args.format = format();
    args.w = params.weight.raw_data();
    args.w_scale = params.weight_scale.data<float>();
    args.bias = bias_f32_.defined() ? bias_f32_.data<float>() : nullptr;
    args.act = act;
    args.m = m;
    args.n = n;
    args.k = k;
    args.served = x2.dtype();
    args.out = y.raw_data();
    args.device_index = device_.index;
    cuda::quantize_gemv_int8(input, args);
    return true;
  };
  return on_device("forward_gemv", device_, on_cpu, on_cuda);
}

QuantizedActivation QuantMethod::scaled_mm_quant(const QuantizedActivation& input,
                                                 const QuantizedParams& params, Activation act,
                                                 const QuantMethod& consumer, DType served) const {
  OASR_CHECK(consumer.has_static_input() && !consumer.static_multiplier_.empty(), kInternal,
             "scaled_mm_quant: the consumer (", consumer.scheme_.name,
             ") has no bound static input scale; a GEMM chain needs one");
  OASR_CHECK(consumer.format() == format(), kInternal, "scaled_mm_quant: a ", to_string(format()),
             " producer cannot emit the ", to_string(consumer.format()),
             " input of its consumer; link_quantization arms same-format chains only");
  const int64_t n = params.weight.size(0);
  OASR_CHECK(static_cast<int64_t>(consumer.static_multiplier_.size()) == n, kInternal,
             "scaled_mm_quant: the producer's ", n, " outputs do not match the consumer's ",
             consumer.static_multiplier_.size(), " inputs");
  OASR_CHECK(served == DType::kF32 || served == DType::kF16 || served == DType::kBF16, kInternal,
             "scaled_mm_quant: served dtype ", dtype_name(served), " is not a float dtype");
  const auto on_cpu = [&] {
    // The epilogue result in fp32, rounded to the served dtype as the unfused
    // producer's output tensor would hold it (a no-op for float32).
    Tensor y = scaled_mm(input, params, act);
    if (served != DType::kF32) y = y.to(served).to(DType::kF32);
    const int64_t m = y.size(0);
    QuantizedActivation out;
    out.format = format();
    out.data = Tensor::empty({m, n}, storage_dtype());
    out.scale = Tensor::empty({m}, DType::kF32);
    for (int64_t row = 0; row < m; ++row) out.scale.data<float>()[row] = consumer.static_scale_;
    const auto epilogue = number_format().cpu_fused.quantize_epilogue_static;
    OASR_CHECK(epilogue != nullptr, kUnsupported, "scaled_mm_quant: the ", number_format().name,
               " format has no CPU quantizing epilogue; disarm the links (OASR_QUANT_FUSION=0)");
    epilogue(y.data<float>(), consumer.static_multiplier_.data(), m, n, out.data.raw_data());
    note_fused_producer_call(FusedProducer::kScaledMMQuant);
    return out;
  };
  const auto on_cuda = [&](auto) {
    const int64_t m = input.data.size(0);
    QuantizedActivation out;
    out.format = format();
    out.data = Tensor::empty({m, n}, storage_dtype(), device_);
    out.scale = consumer.static_scale_column(m);
    if (m > 0) {
      cuda::ScaledMMArgs args = cuda_gemm_args(format(), input, params, bias_f32_, act, device_);
      args.served = served;
      args.out = out.data.raw_data();
      args.out_multiplier = consumer.static_multiplier_device_.data<float>();
      lane().cuda_scaled_mm(args);
    }
    note_fused_producer_call(FusedProducer::kScaledMMQuant);
    return out;
  };
  return on_device("scaled_mm_quant", device_, on_cpu, on_cuda);
}

std::string QuantMethod::own_input_quantizer() const {
  if (has_static_input()) return "self (quantize_static)";
  return runtime_smoothed_ ? "self (quantize_per_token + smoother)" : "self (quantize_per_token)";
}

std::string QuantMethod::kernel_name(int64_t m) const {
  const ScaledMMLane& chosen = lane();
  if (chosen.cuda_kernel_name == nullptr) return chosen.name;
  return chosen.cuda_kernel_name(format(), m, scaled_n_, scaled_k_);
}

std::string QuantMethod::input_quantizer() const {
  return linked_input_quantizer_.empty() ? own_input_quantizer() : linked_input_quantizer_;
}

// ---- refusals and the registry ---------------------------------------------

void check_servable(const QuantScheme& scheme) {
  const std::string& name = scheme.name.empty() ? std::string("this scheme") : scheme.name;
  const NumberFormat& weight_format = number_format(scheme.weight.dtype);
  OASR_CHECK(weight_format.served(), kUnsupported, "scheme '", name, "' ",
             weight_format.not_served.empty()
                 ? "has " + weight_format.name + " weights, which no quant method serves"
                 : weight_format.not_served);
  OASR_CHECK(scheme.weight.granularity == Granularity::kPerChannel && scheme.weight.symmetric,
             kUnsupported, "scheme '", name, "' has ", to_string(scheme.weight.granularity),
             scheme.weight.symmetric ? "" : " asymmetric",
             " weight scales; the served methods take symmetric per-channel weights");
  OASR_CHECK(scheme.input.has_value(), kUnsupported, "scheme '", name,
             "' is weight-only; the served methods quantize weights and activations (W8A8)");
  const TensorQuant& input = *scheme.input;
  OASR_CHECK(input.dtype == scheme.weight.dtype, kUnsupported, "scheme '", name, "' mixes ",
             to_string(scheme.weight.dtype), " weights with ", to_string(input.dtype),
             " activations; the served methods use one format for both");
  OASR_CHECK(!(input.dynamic && input.granularity == Granularity::kPerTensor), kUnsupported,
             "scheme '", name,
             "' asks for a per-tensor dynamic activation scale, which is refused: padding and "
             "co-batched utterances would change every row's quantization; use a per-token "
             "dynamic scale (int8_w8a8 / fp8_w8a8) or a calibrated static one (*_static)");
  OASR_CHECK(input.symmetric, kUnsupported, "scheme '", name,
             "' has asymmetric activations; the served methods are symmetric");
  OASR_CHECK((input.dynamic && input.granularity == Granularity::kPerToken) ||
                 (!input.dynamic && input.granularity == Granularity::kPerTensor),
             kUnsupported, "scheme '", name, "' has a ", input.dynamic ? "dynamic " : "static ",
             to_string(input.granularity),
             " activation scale; the served ones are dynamic per_token and static per_tensor");
}

namespace {

// The W8A8 method of a served number format: its registry name is the
// format's NumberFormat::method ("int8", "fp8"); the format's row holds
// everything format-specific.
class W8A8Method final : public QuantMethod {
 public:
  explicit W8A8Method(const QuantScheme& scheme)
      : QuantMethod(scheme), name_(quant::number_format(scheme.weight.dtype).method) {}
  std::string_view name() const override { return name_; }

 private:
  std::string name_;
};

struct MethodEntry {
  QDType weight_dtype;
  QuantMethodFactory factory;
};

// Methods registered beyond the table's own (register_quant_method).
std::map<std::string, MethodEntry>& method_registry() {
  static std::map<std::string, MethodEntry> registry;
  return registry;
}

}  // namespace

void register_quant_method(const std::string& name, QDType weight_dtype,
                           QuantMethodFactory factory) {
  bool taken = method_registry().count(name) > 0;
  for (QDType id : number_formats()) taken = taken || number_format(id).method == name;
  OASR_CHECK(!taken, kInvalidArgument, "quant method '", name, "' is registered twice");
  method_registry().emplace(name, MethodEntry{weight_dtype, std::move(factory)});
}

std::vector<std::string> quant_method_names() {
  std::vector<std::string> names;
  for (QDType id : number_formats()) {
    if (number_format(id).served()) names.push_back(number_format(id).method);
  }
  for (const auto& [name, entry] : method_registry()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<QuantMethod> make_quant_method(const QuantScheme& scheme) {
  check_servable(scheme);
  for (const auto& [name, entry] : method_registry()) {
    if (entry.weight_dtype == scheme.weight.dtype) return entry.factory(scheme);
  }
  return std::make_unique<W8A8Method>(scheme);
}

}  // namespace oasr::quant
