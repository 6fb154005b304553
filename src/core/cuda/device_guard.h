// Makes a CUDA device current for a scope and restores the previous one, so
// work on cuda:N tensors lands on device N whatever the caller had selected.
#pragma once

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"

namespace oasr {

class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int index) {
    OASR_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) OASR_CUDA_CHECK(cudaSetDevice(index));
    changed_ = previous_ != index;
  }
  ~CudaDeviceGuard() {
    if (changed_) cudaSetDevice(previous_);  // destructor: never throw
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace oasr
