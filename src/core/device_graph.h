// Device work recorded once and replayed with one launch (CUDA graphs). A
// forward of a few hundred small kernels costs more host time to launch
// than the GPU spends running it at small batches; a replay costs one
// launch. The work must be a pure function of the contents of its input
// tensors: the same kernels on the same addresses every time, no host
// copies or synchronisation inside. Anything else (a host read, an
// allocation pattern that differs from the measured run) makes record()
// decline, and the caller runs the work eagerly, with the same bits: a
// replay runs the very kernels an eager run launches.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr {

using DeviceWork = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct MeasuredRun {
  std::vector<Tensor> outputs;
  // The arena a recording of the same work needs, or 0 when the run kept
  // device memory past its end other than its outputs (a cache built on
  // first use), which a recording could not own.
  size_t arena_bytes = 0;
};

// True when `device` can record graphs (a CUDA device in a CUDA build).
bool device_graphs_supported(Device device);

// Runs work on device copies of `inputs` (as a recording would) eagerly,
// mirroring its allocations.
MeasuredRun run_measured(Device device, const DeviceWork& work, const std::vector<Tensor>& inputs);

class DeviceGraph {
 public:
  // Records work on copies of `inputs` (which the graph keeps as its input
  // tensors) with an arena of `arena_bytes` (from run_measured). Nothing
  // runs. Returns null, saying why in `why`, when the work cannot be
  // recorded.
  static std::unique_ptr<DeviceGraph> record(Device device, const DeviceWork& work,
                                             const std::vector<Tensor>& inputs, size_t arena_bytes,
                                             std::string* why);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Copies `inputs` (the recorded shapes and dtypes, any device) into the
  // graph's input tensors, replays, and returns fresh copies of the
  // outputs. Calls are serialised.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  size_t arena_bytes() const;

  struct Impl;

 private:
  explicit DeviceGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace oasr
