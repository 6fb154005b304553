// Compiled only in builds without CUDA: every CUDA request is refused by name.
#include "core/device.h"
#include "core/device_graph.h"
#include "core/device_memory.h"
#include "core/error.h"

namespace oasr {

DeviceBackend& cuda_backend() {
  OASR_THROW(kUnsupported,
             "this oasr build has no CUDA support; rebuild with the 'cuda' preset "
             "(cmake --preset cuda) on a machine with the CUDA toolkit");
}

bool cuda_available() {
  return false;
}
int cuda_device_count() {
  return 0;
}

DeviceMemory cuda_memory(int) {
  return {};
}

// Without CUDA nothing records: callers run their work eagerly.
bool device_graphs_supported(Device) {
  return false;
}

MeasuredRun run_measured(Device, const DeviceWork& work, const std::vector<Tensor>& inputs) {
  return {work(inputs), 0};
}

struct DeviceGraph::Impl {};
DeviceGraph::DeviceGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGraph::~DeviceGraph() = default;
size_t DeviceGraph::arena_bytes() const {
  return 0;
}

std::unique_ptr<DeviceGraph> DeviceGraph::record(Device, const DeviceWork&,
                                                 const std::vector<Tensor>&, size_t,
                                                 std::string* why) {
  if (why != nullptr) *why = "this build has no CUDA";
  return nullptr;
}

std::vector<Tensor> DeviceGraph::run(const std::vector<Tensor>&) {
  OASR_THROW(kInternal, "device graph: this build has no CUDA, so no graph was recorded");
}

}  // namespace oasr
