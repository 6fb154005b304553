// The stream this thread's device work is ordered on: the legacy default
// stream, except inside a device-graph recording or replay
// (core/cuda/cuda_graph.cc), which moves the thread onto the graph's own
// stream for the scope. Every kernel, copy, memset and stream-ordered
// allocation goes through cuda_current_stream(), so a recording captures all
// of the work and nothing runs outside it.
#pragma once

#include <cuda_runtime_api.h>

namespace oasr {

cudaStream_t cuda_current_stream();

class CudaStreamScope {
 public:
  explicit CudaStreamScope(cudaStream_t stream);
  ~CudaStreamScope();
  CudaStreamScope(const CudaStreamScope&) = delete;
  CudaStreamScope& operator=(const CudaStreamScope&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace oasr
