// Compiled only in builds without CUDA: every CUDA request is refused by name.
#include "core/device.h"
#include "core/error.h"

namespace oasr {

DeviceBackend& cuda_backend() {
  OASR_THROW(kUnsupported,
             "this oasr build has no CUDA support; rebuild with the 'cuda' preset "
             "(cmake --preset cuda) on a machine with the CUDA toolkit");
}

bool cuda_available() { return false; }
int cuda_device_count() { return 0; }

}  // namespace oasr
