#include "core/device.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstring>

#include "core/convert_element.h"
#include "core/error.h"

namespace oasr {

// Defined in core/cuda/cuda_backend.cc (CUDA builds) or core/no_cuda.cc.
DeviceBackend& cuda_backend();

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string idx = text.substr(5);
    char* end = nullptr;
    const long value = std::strtol(idx.c_str(), &end, 10);
    if (!idx.empty() && end != nullptr && *end == '\0' && value >= 0 && value < 1024) {
      return Device::cuda(static_cast<int>(value));
    }
  }
  OASR_THROW(kInvalidArgument, "unknown device '", text, "'; use cpu, cuda or cuda:N");
}

namespace {

class CpuBackend final : public DeviceBackend {
 public:
  static constexpr size_t kAlignment = 64;

  CpuBackend() {
#if defined(__GLIBC__)
    // glibc serves blocks above its mmap threshold (at most 32 MiB) with a
    // fresh mmap and unmaps them on free, so every large activation (a
    // Whisper encoder's attention scores are 54 MB per layer) page-faults
    // its memory in again on each forward: ~10 % of a CPU transcription was
    // kernel page-fault time. Keeping large blocks in the heap and not
    // trimming it lets the next forward reuse the same pages.
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  }

  void* allocate(size_t nbytes, int /*device_index*/) override {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    OASR_CHECK(ptr != nullptr, kOutOfMemory, "CPU allocation of ", nbytes, " bytes failed");
    return ptr;
  }
  void deallocate(void* ptr, size_t /*nbytes*/, int /*device_index*/) override {
    std::free(ptr);
  }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override {
    OASR_CHECK(dst_device.is_cpu() && src_device.is_cpu(), kInternal,
               "CPU backend asked to copy to/from ", dst_device.str(), "/", src_device.str());
    if (nbytes > 0) std::memcpy(dst, src, nbytes);
  }
  void memset_zero(void* ptr, size_t nbytes, int /*device_index*/) override {
    if (nbytes > 0) std::memset(ptr, 0, nbytes);
  }
  void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                     int /*device_index*/) override {
    const auto* in = static_cast<const char*>(src);
    auto* out = static_cast<char*>(dst);
    const size_t in_size = dtype_size(src_dtype);
    const size_t out_size = dtype_size(dst_dtype);
    for (int64_t i = 0; i < n; ++i) {
      convert_element(in + i * in_size, src_dtype, out + i * out_size, dst_dtype);
    }
  }
  void copy_strided(void* /*dst*/, const std::vector<int64_t>& /*dst_strides*/, const void* /*src*/,
                    const std::vector<int64_t>& /*src_strides*/,
                    const std::vector<int64_t>& /*shape*/, size_t /*element_size*/,
                    int /*device_index*/) override {
    OASR_THROW(kInternal,
               "CPU backend asked for a strided copy; Tensor::copy_ walks CPU strides itself");
  }
};

}  // namespace

DeviceBackend& device_backend(DeviceType type) {
  static CpuBackend cpu;
  if (type == DeviceType::kCPU) return cpu;
  return cuda_backend();
}

void synchronize(Device device) {
  device_backend(device.type).synchronize(device.index);
}

void reset_peak_memory(Device device) {
  device_backend(device.type).reset_peak_memory(device.index);
}

int64_t peak_memory_bytes(Device device) {
  return device_backend(device.type).peak_memory_bytes(device.index);
}

}  // namespace oasr
