#include "ops/front_checks.h"

#include "core/error.h"

namespace oasr::ops::detail {

void check_defined(const char* op, const char* arg, const Tensor& tensor) {
  OASR_CHECK(tensor.defined(), kInvalidArgument, op, ": argument '", arg,
             "' is an undefined tensor");
}

Device serving_device(const char* op, std::initializer_list<NamedTensor> args) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& arg : args) {
    if (!arg.tensor.defined()) continue;
    if (first == nullptr) {
      first = &arg;
      continue;
    }
    OASR_CHECK(arg.tensor.device() == first->tensor.device(), kInvalidArgument, op,
               ": arguments are on different devices ('", first->name, "' on ",
               first->tensor.device().str(), ", '", arg.name, "' on ", arg.tensor.device().str(),
               "); move them to one device");
  }
  return first != nullptr ? first->tensor.device() : Device::cpu();
}

void check_float(const char* op, const char* arg, const Tensor& tensor, Device device) {
  if (device.is_cpu()) {
    check_float32(op, arg, tensor);
    return;
  }
  const DType dtype = tensor.dtype();
  if (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) return;
  OASR_CHECK(!dtype_is_floating(dtype), kUnsupported, op, ": argument '", arg, "' is ",
             dtype_name(dtype), "; the CUDA body of ", op,
             " serves float32, float16 and bfloat16 (convert with to(dtype))");
  OASR_THROW(kInvalidArgument, op, ": argument '", arg,
             "' must be a float32, float16 or bfloat16 tensor, got ", dtype_name(dtype));
}

void check_same_dtype(const char* op, std::initializer_list<NamedTensor> args) {
  const NamedTensor* first = nullptr;
  for (const NamedTensor& arg : args) {
    if (!arg.tensor.defined()) continue;
    if (first == nullptr) {
      first = &arg;
      continue;
    }
    OASR_CHECK(arg.tensor.dtype() == first->tensor.dtype(), kInvalidArgument, op,
               ": arguments have different dtypes ('", first->name, "' is ",
               dtype_name(first->tensor.dtype()), ", '", arg.name, "' is ",
               dtype_name(arg.tensor.dtype()), "); convert them to one dtype");
  }
}

void check_float32(const char* op, const char* arg, const Tensor& tensor) {
  const DType dtype = tensor.dtype();
  if (dtype == DType::kF32) return;
  OASR_CHECK(!dtype_is_floating(dtype), kUnsupported, op, ": argument '", arg, "' is ",
             dtype_name(dtype), "; the CPU body of ", op,
             " serves float32 only (convert with to(DType::kF32))");
  OASR_THROW(kInvalidArgument, op, ": argument '", arg, "' must be a float32 tensor, got ",
             dtype_name(dtype));
}

void check_rank(const char* op, const char* arg, const Tensor& tensor, int64_t rank) {
  OASR_CHECK(tensor.dim() == rank, kInvalidArgument, op, ": argument '", arg, "' must be ", rank,
             "-d, got shape ", shape_str(tensor.shape()));
}

void check_past_tokens(const char* op, const Tensor& past_tokens) {
  check_defined(op, "past_tokens", past_tokens);
  OASR_CHECK(past_tokens.dtype() == DType::kI32 && past_tokens.numel() == 1, kInvalidArgument, op,
             ": past_tokens must be int32 [1], got ", past_tokens.str());
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t rank) {
  const int64_t wrapped = dim < 0 ? dim + rank : dim;
  OASR_CHECK(wrapped >= 0 && wrapped < rank, kInvalidArgument, op, ": dim ", dim,
             " is out of range for a ", rank, "-d tensor");
  return wrapped;
}

int64_t check_norm_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Device device) {
  check_float(op, "x", x, device);
  OASR_CHECK(x.dim() >= 1, kInvalidArgument, op, ": x must have at least one dimension, got ",
             shape_str(x.shape()));
  const int64_t features = x.size(-1);
  const NamedTensor params[] = {{"weight", weight}, {"bias", bias}};
  for (const auto& [name, param] : params) {
    if (!param.defined()) continue;
    check_float(op, name, param, device);
    OASR_CHECK(param.dim() == 1 && param.size(0) == features, kInvalidArgument, op, ": ", name,
               " must be [", features, "] to match the last dimension of x ", shape_str(x.shape()),
               ", got ", shape_str(param.shape()));
  }
  return features;
}

int64_t span_numel(const Shape& shape, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

}  // namespace oasr::ops::detail
