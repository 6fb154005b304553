// Tensor: a shape, strides and a dtype over shared, device-resident storage.
// Views (view/reshape/slice/select/narrow/transpose) share storage; ops take
// contiguous tensors (their fronts call contiguous() or refuse).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/float_types.h"

namespace oasr {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2, 3, 4]"
int64_t shape_numel(const Shape& shape);

// Bytes on one device. Either owned (allocated by the device backend) or
// borrowed from an owner kept alive by the storage (an mmap'd file).
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device,
                                         std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t nbytes, Device device, bool owned, std::shared_ptr<const void> owner)
      : data_(data), nbytes_(nbytes), device_(device), owned_(owned), owner_(std::move(owner)) {}
  void* data_;
  size_t nbytes_;
  Device device_;
  bool owned_;
  std::shared_ptr<const void> owner_;
};

// The C++ element type of each DType (float8/half/bfloat16 are bit wrappers).
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::kF16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::kI8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<Float8E4M3>() {
  return DType::kF8E4M3;
}

class Tensor {
 public:
  Tensor() = default;  // undefined tensor

  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor full(const Shape& shape, float value, DType dtype = DType::kF32);
  // Copies values into a new CPU tensor of the matching dtype.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // Wraps existing bytes without copying; `owner` keeps them alive.
  static Tensor from_storage(std::shared_ptr<Storage> storage, size_t byte_offset,
                             const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }  // in elements
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return byte_offset_; }

  // Pointer to the first element (honours the view's offset).
  void* raw_data() const;
  // Typed pointer; refuses a dtype mismatch. Does not require contiguity.
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<std::remove_const_t<T>>(), "data<T>()");
    return static_cast<T*>(raw_data());
  }
  // Reads one element of a CPU tensor as float / int64 (tests, small glue).
  float item_float(const std::vector<int64_t>& index) const;

  // Views (share storage).
  Tensor view(const Shape& shape) const;                      // contiguous only; one -1 allowed
  Tensor reshape(const Shape& shape) const;                   // view when possible, else a copy
  Tensor slice(int64_t d, int64_t start, int64_t end) const;  // [start, end), step 1
  Tensor narrow(int64_t d, int64_t start, int64_t length) const {
    return slice(d, start, start + length);
  }
  Tensor select(int64_t d, int64_t index) const;  // drops dimension d
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor unsqueeze(int64_t d) const;

  // Copies.
  Tensor contiguous() const;  // self when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;    // exactly rounded conversions (core/float_types.h)
  Tensor to(Device device) const;  // CPU <-> CUDA
  void copy_(const Tensor& src);   // same shape and dtype, any devices, any strides

  std::string str() const;  // "float32[2, 3] cpu"

 private:
  void check_dtype(DType expected, const char* what) const;

  std::shared_ptr<Storage> storage_;
  size_t byte_offset_ = 0;
  Shape shape_;
  std::vector<int64_t> strides_;
  DType dtype_ = DType::kF32;
};

Shape contiguous_strides(const Shape& shape);
[[noreturn]] void throw_from_vector_size_mismatch(size_t got, const Shape& shape);

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  Tensor out = empty(shape, dtype_of<T>());
  if (static_cast<int64_t>(values.size()) != out.numel()) {
    throw_from_vector_size_mismatch(values.size(), shape);
  }
  std::copy(values.begin(), values.end(), out.data<T>());
  return out;
}

}  // namespace oasr
