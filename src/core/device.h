// Devices and the raw-memory backend each device type provides. core/ knows
// only this interface; the CUDA implementation lives in core/cuda/ and is
// compiled only when the build has CUDA, so CPU code never includes CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
};

// The backend serving a device type. For CUDA in a build without CUDA (or on
// a machine without a GPU) this throws kUnsupported with what to do.
DeviceBackend& device_backend(DeviceType type);

// True when this build has CUDA and at least one GPU is visible.
bool cuda_available();
int cuda_device_count();

}  // namespace oasr
