#include "core/tensor.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/convert_element.h"
#include "core/error.h"

namespace oasr {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

void throw_from_vector_size_mismatch(size_t got, const Shape& shape) {
  OASR_THROW(kInvalidArgument, "from_vector: ", got, " values cannot fill shape ", shape_str(shape),
             " (", shape_numel(shape), " elements)");
}

// ---- Storage ---------------------------------------------------------------

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  void* data = device_backend(device.type).allocate(nbytes, device.index);
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, true, nullptr));
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device,
                                         std::shared_ptr<const void> owner) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, false, std::move(owner)));
}

Storage::~Storage() {
  if (owned_ && data_ != nullptr) {
    device_backend(device_.type).deallocate(data_, nbytes_, device_.index);
  }
}

// ---- construction -----------------------------------------------------------

namespace {
void check_shape(const Shape& shape) {
  for (int64_t d : shape) {
    OASR_CHECK(d >= 0, kInvalidArgument, "negative dimension in shape ", shape_str(shape));
  }
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape);
  Tensor t;
  t.storage_ =
      Storage::allocate(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  device_backend(device.type).memset_zero(t.raw_data(), t.nbytes(), device.index);
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, DType::kF32);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return dtype == DType::kF32 ? t : t.to(dtype);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, size_t byte_offset,
                            const Shape& shape, DType dtype) {
  check_shape(shape);
  const size_t needed = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  OASR_CHECK(storage != nullptr, kInternal, "from_storage: null storage");
  OASR_CHECK(byte_offset + needed <= storage->nbytes(), kInvalidArgument,
             "from_storage: ", dtype_name(dtype), shape_str(shape), " at byte ", byte_offset,
             " does not fit in ", storage->nbytes(), " bytes");
  Tensor t;
  t.storage_ = std::move(storage);
  t.byte_offset_ = byte_offset;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

// ---- accessors --------------------------------------------------------------

namespace {
int64_t wrap_dim(int64_t d, int64_t rank, const char* what) {
  const int64_t wrapped = d < 0 ? d + rank : d;
  OASR_CHECK(wrapped >= 0 && wrapped < rank, kInvalidArgument, what, ": dimension ", d,
             " is out of range for a ", rank, "-d tensor");
  return wrapped;
}
}  // namespace

int64_t Tensor::size(int64_t d) const {
  return shape_[wrap_dim(d, dim(), "size")];
}

Device Tensor::device() const {
  return storage_ ? storage_->device() : Device::cpu();
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to misplace (PyTorch agrees)
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  OASR_CHECK(defined(), kInvalidArgument, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + byte_offset_;
}

void Tensor::check_dtype(DType expected, const char* what) const {
  OASR_CHECK(dtype_ == expected, kInvalidArgument, what, ": tensor is ", dtype_name(dtype_),
             ", requested ", dtype_name(expected));
}

float Tensor::item_float(const std::vector<int64_t>& index) const {
  OASR_CHECK(device().is_cpu(), kInvalidArgument, "item_float needs a CPU tensor, got ",
             device().str());
  OASR_CHECK(static_cast<int64_t>(index.size()) == dim(), kInvalidArgument,
             "item_float: index of rank ", index.size(), " for a ", dim(), "-d tensor");
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    OASR_CHECK(index[i] >= 0 && index[i] < shape_[i], kInvalidArgument, "item_float: index ",
               index[i], " out of range for dimension ", i, " of size ", shape_[i]);
    offset += index[i] * strides_[i];
  }
  const char* base = static_cast<const char*>(raw_data());
  return load_element_as_float(base + offset * element_size(), dtype_);
}

// ---- views ------------------------------------------------------------------

Tensor Tensor::view(const Shape& requested) const {
  OASR_CHECK(is_contiguous(), kInvalidArgument, "view of a non-contiguous tensor ", str(),
             "; call contiguous() or reshape()");
  Shape shape = requested;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      OASR_CHECK(inferred < 0, kInvalidArgument, "view: more than one -1 in ",
                 shape_str(requested));
      inferred = static_cast<int64_t>(i);
    } else {
      OASR_CHECK(shape[i] >= 0, kInvalidArgument, "view: bad shape ", shape_str(requested));
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    OASR_CHECK(known != 0 && numel() % known == 0, kInvalidArgument, "view: cannot infer -1 in ",
               shape_str(requested), " for ", numel(), " elements");
    shape[inferred] = numel() / known;
  }
  OASR_CHECK(shape_numel(shape) == numel(), kInvalidArgument, "view: shape ", shape_str(requested),
             " does not hold ", numel(), " elements of ", str());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  return is_contiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  d = wrap_dim(d, dim(), "slice");
  OASR_CHECK(0 <= start && start <= end && end <= shape_[d], kInvalidArgument, "slice [", start,
             ", ", end, ") is outside dimension ", d, " of size ", shape_[d]);
  Tensor t = *this;
  t.byte_offset_ += static_cast<size_t>(start * strides_[d]) * element_size();
  t.shape_[d] = end - start;
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  OASR_CHECK(0 <= index && index < shape_[d], kInvalidArgument, "select index ", index,
             " is outside dimension ", d, " of size ", shape_[d]);
  Tensor t = slice(d, index, index + 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Tensor t = *this;
  const int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(t.shape_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, stride);
  return t;
}

// ---- copies -----------------------------------------------------------------

namespace {
// Calls fn(dst_offset_elems, src_offset_elems) for every element, in row-major
// order of `shape`, with the given strides.
template <typename Fn>
void for_each_index(const Shape& shape, const Shape& dst_strides, const Shape& src_strides,
                    Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  std::vector<int64_t> index(rank, 0);
  int64_t dst = 0;
  int64_t src = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(dst, src);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        dst += dst_strides[d];
        src += src_strides[d];
        break;
      }
      dst -= dst_strides[d] * (shape[d] - 1);
      src -= src_strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}
}  // namespace

void Tensor::copy_(const Tensor& src) {
  OASR_CHECK(defined() && src.defined(), kInvalidArgument, "copy_ with an undefined tensor");
  OASR_CHECK(shape_ == src.shape_, kInvalidArgument, "copy_: shape ", shape_str(src.shape_),
             " into ", shape_str(shape_));
  OASR_CHECK(dtype_ == src.dtype_, kInvalidArgument, "copy_: dtype ", dtype_name(src.dtype_),
             " into ", dtype_name(dtype_), "; convert with to(dtype) first");
  const Device dst_dev = device();
  const Device src_dev = src.device();
  if (is_contiguous() && src.is_contiguous()) {
    DeviceBackend& backend = device_backend(dst_dev.is_cuda() ? dst_dev.type : src_dev.type);
    backend.copy(raw_data(), dst_dev, src.raw_data(), src_dev, nbytes());
    return;
  }
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    const size_t elem = element_size();
    char* dst_base = static_cast<char*>(raw_data());
    const char* src_base = static_cast<const char*>(src.raw_data());
    const size_t rank = shape_.size();
    if (rank >= 2 && strides_.back() == 1 && src.strides_.back() == 1) {
      // Both sides hold whole rows of the last dimension (a head split or
      // merge, a narrow): one memcpy per row instead of one per element.
      const Shape outer(shape_.begin(), shape_.end() - 1);
      const Shape dst_outer(strides_.begin(), strides_.end() - 1);
      const Shape src_outer(src.strides_.begin(), src.strides_.end() - 1);
      const size_t run = static_cast<size_t>(shape_.back()) * elem;
      for_each_index(outer, dst_outer, src_outer, [&](int64_t d, int64_t s) {
        std::memcpy(dst_base + d * elem, src_base + s * elem, run);
      });
      return;
    }
    for_each_index(shape_, strides_, src.strides_, [&](int64_t d, int64_t s) {
      std::memcpy(dst_base + d * elem, src_base + s * elem, elem);
    });
    return;
  }
  if (dst_dev == src_dev) {
    device_backend(dst_dev.type)
        .copy_strided(raw_data(), strides_, src.raw_data(), src.strides_, shape_, element_size(),
                      dst_dev.index);
    return;
  }
  // Across devices bytes move only between contiguous buffers: make the
  // source contiguous on its own device, move it into a contiguous staging
  // tensor on this device when this view is strided, then copy locally.
  const Tensor src_contiguous = src.contiguous();
  if (is_contiguous()) {
    copy_(src_contiguous);
    return;
  }
  Tensor staging = empty(shape_, dtype_, dst_dev);
  staging.copy_(src_contiguous);
  copy_(staging);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  const Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, target);
  out.copy_(src);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype_) return *this;
  const Tensor src = contiguous();
  Tensor out = empty(shape_, target, device());
  device_backend(device().type)
      .convert_dtype(src.raw_data(), dtype_, out.raw_data(), target, numel(), device().index);
  return out;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device().str();
}

}  // namespace oasr
