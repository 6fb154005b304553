// Devices and the raw-memory backend each device type provides. core/ knows
// only this interface; the CUDA implementation lives in core/cuda/ and is
// compiled only when the build has CUDA, so CPU code never includes CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace oasr {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool operator==(const Device& other) const = default;
  std::string str() const;  // "cpu" or "cuda:N"
};

// Parses "cpu", "cuda", "cuda:N"; anything else is an oasr::Error.
Device parse_device(const std::string& text);

// Raw memory of one device type. Allocations are returned with at least
// 64-byte alignment. copy() moves bytes between any two devices.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual void* allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, int device_index) = 0;
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t nbytes) = 0;
  virtual void memset_zero(void* ptr, size_t nbytes, int device_index) = 0;
  // Converts n contiguous elements in place on this device, element by
  // element with core/convert_element.h (identical bits on every device).
  virtual void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                             int64_t n, int device_index) = 0;
  // Copies a strided view into another of the same shape on one device of
  // this type (strides in elements, >= 0; element_size 1, 2, 4 or 8). Only
  // the CUDA backend serves it: Tensor::copy_ walks CPU strides itself, so
  // the CPU backend refuses.
  // Blocks until all work queued on the device has finished (CPU: nothing
  // is ever queued).
  virtual void synchronize(int /*device_index*/) {}
  // The high-water mark of bytes held by tensors on the device since the last
  // reset (-1 where not measured: the CPU). Library workspaces outside the
  // allocator (cuBLASLt's) are not counted.
  virtual void reset_peak_memory(int /*device_index*/) {}
  virtual int64_t peak_memory_bytes(int /*device_index*/) { return -1; }
  virtual void copy_strided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                            const std::vector<int64_t>& src_strides,
                            const std::vector<int64_t>& shape, size_t element_size,
                            int device_index) = 0;
};

// The backend serving a device type. For CUDA in a build without CUDA (or on
// a machine without a GPU) this throws kUnsupported with what to do.
DeviceBackend& device_backend(DeviceType type);

// Host timing and memory reports of device work (benchmarks): see the
// DeviceBackend members of the same names.
void synchronize(Device device);
void reset_peak_memory(Device device);
int64_t peak_memory_bytes(Device device);

// True when this build has CUDA and at least one GPU is visible.
bool cuda_available();
int cuda_device_count();

}  // namespace oasr
