// Checks shared by the op fronts (src/ops/<op>.cc): every refusal names the
// op and the argument, so a caller can tell which call and which tensor
// went wrong without a debugger.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/tensor.h"

namespace oasr::ops::detail {

struct NamedTensor {
  const char* name;
  const Tensor& tensor;
};

// Refuses an undefined tensor (kInvalidArgument).
void check_defined(const char* op, const char* arg, const Tensor& tensor);

// The device the op runs on: the one device all defined `args` share (a mix
// is kInvalidArgument). CPU or CUDA; a CUDA tensor exists only in a CUDA build.
Device serving_device(const char* op, std::initializer_list<NamedTensor> args);

// Refuses a dtype the body on `device` cannot serve: the CPU bodies serve
// float32 only; the CUDA bodies serve float32, float16 and bfloat16 (each
// computing in float32 and rounding once to the tensor's dtype).
void check_float(const char* op, const char* arg, const Tensor& tensor, Device device);

// Refuses arguments whose (floating) dtypes differ, naming both; undefined
// tensors are ignored. Ops never convert silently.
void check_same_dtype(const char* op, std::initializer_list<NamedTensor> args);

// A norm's arguments for the body on `device`: x float with at least one
// dimension, and each defined parameter (weight, bias) a float [D] matching
// x's last dimension D, which it returns.
int64_t check_norm_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Device device);

// Refuses anything but float32: another float format is kUnsupported (the
// CPU body serves float32 only), a non-float dtype is kInvalidArgument.
void check_float32(const char* op, const char* arg, const Tensor& tensor);

// Refuses anything but an int32 [1]: a decoder step's token count read on
// the device (ops/step_tokens.h).
void check_past_tokens(const char* op, const Tensor& past_tokens);

// Refuses a tensor whose rank is not `rank` (kInvalidArgument).
void check_rank(const char* op, const char* arg, const Tensor& tensor, int64_t rank);

// Maps a possibly negative dimension into [0, rank); kInvalidArgument otherwise.
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank);

// Product of shape[begin, end).
int64_t span_numel(const Shape& shape, int64_t begin, int64_t end);

}  // namespace oasr::ops::detail
