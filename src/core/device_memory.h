// How much device memory this process holds, for monitoring (oasr-server's
// /metrics). CUDA tensors come from the device's default memory pool
// (cudaMallocAsync, core/cuda/cuda_backend.cc), so the pool's reserved bytes
// are what the process holds there, cached blocks included.
#pragma once

#include <cstdint>

namespace oasr {

struct DeviceMemory {
  int64_t used_bytes = -1;      // in live allocations
  int64_t reserved_bytes = -1;  // held by the pool (used + cached)
};

// CUDA device `index`; both fields -1 where the build has no CUDA or the
// device cannot be asked.
DeviceMemory cuda_memory(int index);

}  // namespace oasr
