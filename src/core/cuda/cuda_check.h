// CUDA runtime error checking for host code: a failing call becomes an
// oasr::Error naming the call and the runtime's message.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"

#define OASR_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    const cudaError_t oasr_cuda_status = (call);                                          \
    if (oasr_cuda_status != cudaSuccess) {                                                \
      OASR_THROW(kInternal, #call, " failed: ", cudaGetErrorName(oasr_cuda_status), " (", \
                 cudaGetErrorString(oasr_cuda_status), ")");                              \
    }                                                                                     \
  } while (0)
