// The CUDA device backend: stream-ordered, caching allocation through the
// device's default memory pool (cudaMallocAsync), whose release threshold is
// raised so freed blocks are kept for reuse instead of returned to the driver
// at every synchronisation. Work is ordered on the thread's current stream
// (core/cuda/stream.h); while a device graph is measured or recorded the
// allocations are routed as core/cuda/allocation_routing.h says.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/cuda/allocation_routing.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/stream.h"
#include "core/device.h"
#include "core/device_memory.h"

namespace oasr {

// core/cuda/convert.cu
void cuda_convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                        int device_index);
// core/cuda/copy_strided.cu
void cuda_copy_strided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                       const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                       size_t element_size);

namespace {

using DeviceGuard = CudaDeviceGuard;

class CudaBackend final : public DeviceBackend {
 public:
  void* allocate(size_t nbytes, int device_index) override {
    check_index(device_index);
    cuda_graph_detail::AllocationRouting& routing = cuda_graph_detail::routing();
    if (routing.arena != nullptr) return routing.arena->allocate(nbytes, device_index);
    DeviceGuard guard(device_index);
    configure_pool_once(device_index);
    void* ptr = nullptr;
    // cudaMallocAsync returns 256-byte aligned blocks (>= the 64 we promise).
    const cudaError_t status =
        cudaMallocAsync(&ptr, nbytes == 0 ? 1 : nbytes, cuda_current_stream());
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state
      OASR_THROW(kOutOfMemory, "CUDA allocation of ", nbytes, " bytes on cuda:", device_index,
                 " failed: out of device memory");
    }
    OASR_CUDA_CHECK(status);
    if (routing.measure != nullptr) {
      routing.measure->offset_of[ptr] = routing.measure->offsets.allocate(nbytes);
    }
    return ptr;
  }

  // Destructor path: never throws.
  void deallocate(void* ptr, size_t /*nbytes*/, int device_index) override {
    cuda_graph_detail::AllocationRouting& routing = cuda_graph_detail::routing();
    if (routing.measure != nullptr) {
      const auto found = routing.measure->offset_of.find(ptr);
      if (found != routing.measure->offset_of.end()) {
        routing.measure->offsets.free(found->second);
        routing.measure->offset_of.erase(found);
      }
    }
    if (cuda_graph_detail::CudaArena* arena = cuda_graph_detail::arena_owning(ptr)) {
      arena->free(ptr);
      return;
    }
    if (routing.deferred_frees != nullptr) {
      // A pool block freed inside a recording would become a free node of the
      // graph; it is released after the capture instead.
      routing.deferred_frees->emplace_back(ptr, device_index);
      return;
    }
    DeviceGuard guard(device_index);
    cudaFreeAsync(ptr, cuda_current_stream());
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override {
    if (nbytes == 0) return;
    cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
    if (dst_device.is_cpu() && src_device.is_cuda()) kind = cudaMemcpyDeviceToHost;
    if (dst_device.is_cuda() && src_device.is_cpu()) kind = cudaMemcpyHostToDevice;
    OASR_CHECK(!(dst_device.is_cpu() && src_device.is_cpu()), kInternal,
               "CUDA backend asked for a host-to-host copy");
    const int index = dst_device.is_cuda() ? dst_device.index : src_device.index;
    DeviceGuard guard(index);
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
      OASR_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
      return;
    }
    const cudaStream_t stream = cuda_current_stream();
    if (kind == cudaMemcpyDeviceToDevice) {
      OASR_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
      return;
    }
    // Synchronous with respect to the host, so a host tensor is complete on
    // return (inside a recording this fails, as it must: a host copy cannot
    // be replayed with new data).
    OASR_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
    OASR_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void memset_zero(void* ptr, size_t nbytes, int device_index) override {
    if (nbytes == 0) return;
    DeviceGuard guard(device_index);
    OASR_CUDA_CHECK(cudaMemsetAsync(ptr, 0, nbytes, cuda_current_stream()));
  }

  void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                     int device_index) override {
    DeviceGuard guard(device_index);
    cuda_convert_dtype(src, src_dtype, dst, dst_dtype, n, device_index);
  }

  void copy_strided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                    const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                    size_t element_size, int device_index) override {
    DeviceGuard guard(device_index);
    cuda_copy_strided(dst, dst_strides, src, src_strides, shape, element_size);
  }

  void synchronize(int device_index) override {
    CudaDeviceGuard guard(device_index);
    OASR_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // Every tensor lives in the device's default pool (allocate() above), so
  // the pool's high-water mark of bytes in use is the tensors' peak.
  void reset_peak_memory(int device_index) override {
    CudaDeviceGuard guard(device_index);
    uint64_t zero = 0;  // resets the mark to the bytes in use now
    OASR_CUDA_CHECK(
        cudaMemPoolSetAttribute(default_pool(device_index), cudaMemPoolAttrUsedMemHigh, &zero));
  }

  int64_t peak_memory_bytes(int device_index) override {
    CudaDeviceGuard guard(device_index);
    uint64_t high = 0;
    OASR_CUDA_CHECK(
        cudaMemPoolGetAttribute(default_pool(device_index), cudaMemPoolAttrUsedMemHigh, &high));
    return static_cast<int64_t>(high);
  }

 private:
  static cudaMemPool_t default_pool(int device_index) {
    cudaMemPool_t pool = nullptr;
    OASR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_index));
    return pool;
  }

  static void check_index(int device_index) {
    const int count = cuda_device_count();
    OASR_CHECK(count > 0, kUnsupported,
               "no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES), "
               "or run with --device cpu");
    OASR_CHECK(device_index >= 0 && device_index < count, kInvalidArgument, "cuda:", device_index,
               " does not exist; this machine has ", count, " CUDA device(s)");
  }

  void configure_pool_once(int device_index) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<int>(configured_.size()) <= device_index) {
      configured_.resize(device_index + 1, false);
    }
    if (configured_[device_index]) return;
    cudaMemPool_t pool;
    OASR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_index));
    uint64_t keep_everything = UINT64_MAX;
    OASR_CUDA_CHECK(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    configured_[device_index] = true;
  }

  std::mutex mutex_;
  std::vector<bool> configured_;
};

}  // namespace

DeviceBackend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_available() {
  return cuda_device_count() > 0;
}

DeviceMemory cuda_memory(int index) {
  DeviceMemory out;
  cudaMemPool_t pool = nullptr;
  if (index < 0 || index >= cuda_device_count() ||
      cudaDeviceGetDefaultMemPool(&pool, index) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  std::uint64_t used = 0, reserved = 0;  // cuuint64_t, as the attributes are documented
  if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess) {
    out.used_bytes = static_cast<int64_t>(used);
    out.reserved_bytes = static_cast<int64_t>(reserved);
  } else {
    cudaGetLastError();
  }
  return out;
}

}  // namespace oasr
