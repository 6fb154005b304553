// Device dispatch in one place: where an op front, a quantization lane or a
// fused producer meets the devices this build has (docs/architecture.md
// "Devices"). CTranslate2's DEVICE_DISPATCH is the model: the caller writes
// its bodies once per device type and this header picks one by the
// tensor's device. Outside this header, the CUDA backend (core/cuda/) and
// the CUDA bodies themselves (*/cuda/), no source reads OASR_WITH_CUDA
// (ctest tools.check_device_dispatch).
#pragma once

#include <utility>

#include "core/device.h"
#include "core/error.h"

namespace oasr {

// Whether this build carries CUDA bodies.
#if defined(OASR_WITH_CUDA)
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

// The tag a CUDA body receives; see on_device().
struct OnCuda {
  int device_index = 0;
};

// Runs `cpu_body()` for a CPU device and `cuda_body(OnCuda{index})` for a
// CUDA device, returning what the body returns. `cuda_body` is a generic
// lambda (`[&](auto on) { ... }`): in a build without CUDA its call sits in
// a discarded branch, so it is never instantiated and the CUDA kernels it
// names need no definition; a CUDA device there is refused naming `who`
// (no CUDA tensor can exist in such a build, so this is a guard, not a
// path).
template <class CpuBody, class CudaBody>
decltype(auto) on_device(const char* who, Device device, CpuBody&& cpu_body, CudaBody&& cuda_body) {
  if (device.is_cuda()) {
    if constexpr (kBuiltWithCuda) {
      return std::forward<CudaBody>(cuda_body)(OnCuda{device.index});
    } else {
      OASR_THROW(kUnsupported, who, ": ", device.str(),
                 " in a build without CUDA (build with -DOASR_WITH_CUDA=ON on a machine with "
                 "the CUDA toolkit)");
    }
  }
  return std::forward<CpuBody>(cpu_body)();
}

}  // namespace oasr
