// Device graphs on CUDA (core/device_graph.h): the thread's current stream,
// the allocation routing of core/cuda/allocation_routing.h, and recording by
// stream capture.
//
// A recording captures on a stream of its own, created non-blocking so that
// other threads' work on the legacy default stream cannot join the capture;
// each replay is ordered after the copies into the graph's inputs and before
// the copies out of its outputs (ordinary tensor copies, on the legacy
// stream) by two events. The capture runs in
// cudaStreamCaptureModeThreadLocal, so a host copy or a synchronisation
// inside the work fails the capture instead of running once outside it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "core/cuda/allocation_routing.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/stream.h"
#include "core/device_graph.h"
#include "core/error.h"
#include "core/logging.h"

namespace oasr {

namespace {
thread_local cudaStream_t thread_stream = nullptr;
}  // namespace

cudaStream_t cuda_current_stream() {
  return thread_stream != nullptr ? thread_stream : cudaStreamLegacy;
}

CudaStreamScope::CudaStreamScope(cudaStream_t stream) : previous_(thread_stream) {
  thread_stream = stream;
}

CudaStreamScope::~CudaStreamScope() {
  thread_stream = previous_;
}

namespace cuda_graph_detail {

AllocationRouting& routing() {
  thread_local AllocationRouting thread_routing;
  return thread_routing;
}

namespace {
std::mutex registry_mutex;
std::vector<CudaArena*> registry;
std::atomic<int> registry_size{0};
}  // namespace

void register_arena(CudaArena* arena) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry.push_back(arena);
  registry_size.store(static_cast<int>(registry.size()));
}

void unregister_arena(CudaArena* arena) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry.erase(std::remove(registry.begin(), registry.end(), arena), registry.end());
  registry_size.store(static_cast<int>(registry.size()));
}

CudaArena* arena_owning(const void* p) {
  if (registry_size.load() == 0) return nullptr;  // the common case: no graph alive
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (CudaArena* arena : registry) {
    if (arena->owns(p)) return arena;
  }
  return nullptr;
}

CudaArena::CudaArena(int device_index, size_t bytes)
    : device_index_(device_index), bytes_(bytes), offsets_(bytes) {
  CudaDeviceGuard guard(device_index);
  void* base = nullptr;
  const cudaError_t status = cudaMalloc(&base, bytes == 0 ? 1 : bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    OASR_THROW(kOutOfMemory, "device graph: cannot allocate its ", bytes,
               "-byte arena on cuda:", device_index, " (", cudaGetErrorName(status), ")");
  }
  base_ = static_cast<char*>(base);
}

CudaArena::~CudaArena() {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device_index_);
  cudaFree(base_);  // waits for the device: no replay still reads the arena
  cudaSetDevice(previous);
}

void* CudaArena::allocate(size_t nbytes, int device_index) {
  OASR_CHECK(device_index == device_index_, kInternal,
             "device graph: the recorded work allocated on cuda:", device_index,
             " while recording on cuda:", device_index_);
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t offset = offsets_.allocate(nbytes);
  OASR_CHECK(offset >= 0, kInternal, "device graph: the recorded work needs more than the ", bytes_,
             " bytes its measured run did (it allocates differently from run to run)");
  return base_ + offset;
}

bool CudaArena::owns(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c < base_ + bytes_;
}

void CudaArena::free(void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  offsets_.free(static_cast<char*>(p) - base_);
}

size_t CudaArena::live_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offsets_.live_blocks();
}

}  // namespace cuda_graph_detail

using cuda_graph_detail::AllocationMeasure;
using cuda_graph_detail::AllocationRouting;
using cuda_graph_detail::CudaArena;

bool device_graphs_supported(Device device) {
  return device.is_cuda() && cuda_available();
}

namespace {
std::unordered_set<const void*> storages_of(const std::vector<Tensor>& tensors) {
  std::unordered_set<const void*> blocks;
  for (const Tensor& t : tensors) {
    if (t.defined() && t.storage()) blocks.insert(t.storage()->data());
  }
  return blocks;
}
// Fresh device tensors holding `inputs` (undefined stays undefined): the
// inputs a recorded graph owns and copies each call's inputs into.
std::vector<Tensor> device_copies(const std::vector<Tensor>& inputs, Device device) {
  std::vector<Tensor> copies;
  for (const Tensor& input : inputs) {
    if (!input.defined()) {
      copies.emplace_back();
      continue;
    }
    Tensor owned = Tensor::empty(input.shape(), input.dtype(), device);
    owned.copy_(input);
    copies.push_back(std::move(owned));
  }
  return copies;
}
}  // namespace

MeasuredRun run_measured(Device device, const DeviceWork& work, const std::vector<Tensor>& inputs) {
  MeasuredRun run;
  if (!device_graphs_supported(device)) {
    run.outputs = work(inputs);
    return run;
  }
  AllocationRouting& routing = cuda_graph_detail::routing();
  OASR_CHECK(routing.measure == nullptr && routing.arena == nullptr, kInternal,
             "device graph: a measurement or recording is already under way on this thread");
  // The inputs are placed on the device first, as a recording places them,
  // so the measured run allocates exactly what the recorded work will.
  const std::vector<Tensor> placed = device_copies(inputs, device);
  AllocationMeasure measure;
  routing.measure = &measure;
  try {
    run.outputs = work(placed);
  } catch (...) {
    routing.measure = nullptr;
    throw;
  }
  routing.measure = nullptr;
  // Clean when what is still live is exactly the outputs' blocks.
  const std::unordered_set<const void*> outputs = storages_of(run.outputs);
  bool clean = true;
  for (const auto& [block, offset] : measure.offset_of) {
    if (outputs.count(block) == 0) clean = false;
  }
  run.arena_bytes = clean ? std::max<size_t>(measure.offsets.high_water(), 1) : 0;
  return run;
}

struct DeviceGraph::Impl {
  Device device;
  cudaStream_t stream = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t inputs_ready = nullptr;
  cudaEvent_t outputs_ready = nullptr;
  std::unique_ptr<CudaArena> arena;
  size_t arena_size = 0;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::mutex mutex;

  ~Impl() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    outputs.clear();  // back into the arena
    inputs.clear();
    if (arena) {
      cuda_graph_detail::unregister_arena(arena.get());
      arena.reset();
    }
    if (inputs_ready != nullptr) cudaEventDestroy(inputs_ready);
    if (outputs_ready != nullptr) cudaEventDestroy(outputs_ready);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

DeviceGraph::DeviceGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceGraph::~DeviceGraph() = default;

size_t DeviceGraph::arena_bytes() const {
  return impl_->arena_size;
}

std::unique_ptr<DeviceGraph> DeviceGraph::record(Device device, const DeviceWork& work,
                                                 const std::vector<Tensor>& inputs,
                                                 size_t arena_bytes, std::string* why) {
  const auto decline = [&](std::string reason) -> std::unique_ptr<DeviceGraph> {
    if (why != nullptr) *why = std::move(reason);
    return nullptr;
  };
  if (!device_graphs_supported(device)) return decline("no CUDA device");
  if (arena_bytes == 0) return decline("the measured run kept memory besides its outputs");
  AllocationRouting& routing = cuda_graph_detail::routing();
  OASR_CHECK(routing.measure == nullptr && routing.arena == nullptr, kInternal,
             "device graph: a measurement or recording is already under way on this thread");
  CudaDeviceGuard guard(device.index);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  OASR_CUDA_CHECK(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  OASR_CUDA_CHECK(cudaEventCreateWithFlags(&impl->inputs_ready, cudaEventDisableTiming));
  OASR_CUDA_CHECK(cudaEventCreateWithFlags(&impl->outputs_ready, cudaEventDisableTiming));
  impl->inputs = device_copies(inputs, device);
  impl->arena = std::make_unique<CudaArena>(device.index, arena_bytes);
  impl->arena_size = arena_bytes;
  cuda_graph_detail::register_arena(impl->arena.get());

  std::vector<std::pair<void*, int>> deferred;
  std::string failure;
  cudaGraph_t graph = nullptr;
  {
    CudaStreamScope scope(impl->stream);
    routing.arena = impl->arena.get();
    routing.deferred_frees = &deferred;
    const cudaError_t begin =
        cudaStreamBeginCapture(impl->stream, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
      failure = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begin);
    } else {
      try {
        impl->outputs = work(impl->inputs);
      } catch (const std::exception& e) {
        failure = std::string("the capture failed: ") + e.what();
      }
      const cudaError_t end = cudaStreamEndCapture(impl->stream, &graph);
      if (failure.empty() && end != cudaSuccess) {
        failure = std::string("the capture failed (") + cudaGetErrorString(end) +
                  "): the work synchronises with or copies to the host";
      }
    }
    routing.arena = nullptr;
    routing.deferred_frees = nullptr;
  }
  cudaGetLastError();  // a failed capture leaves its error behind
  for (const auto& [block, index] : deferred) {
    CudaDeviceGuard free_guard(index);
    cudaFreeAsync(block, cudaStreamLegacy);
  }
  if (failure.empty() && !deferred.empty()) {
    failure = "the work released device memory it did not allocate";
  }
  // Whatever the recording left in the arena besides its outputs is held
  // somewhere else (a cache built during the capture); that memory must
  // never be reused, so the arena is then kept for the process's life.
  size_t output_blocks = 0;
  for (const void* block : storages_of(impl->outputs)) {
    if (impl->arena->owns(block)) ++output_blocks;
  }
  if (impl->arena->live_blocks() != output_blocks) {
    if (failure.empty()) failure = "the work kept device memory besides its outputs";
    impl->outputs.clear();
    cuda_graph_detail::unregister_arena(impl->arena.get());
    (void)impl->arena.release();
    log::warn("device graph: a recording kept arena memory alive; its {} bytes stay allocated",
              arena_bytes);
  }
  if (failure.empty()) {
    const cudaError_t instantiated = cudaGraphInstantiate(&impl->exec, graph, 0);
    if (instantiated != cudaSuccess) {
      cudaGetLastError();
      impl->exec = nullptr;
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(instantiated);
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!failure.empty()) return decline(failure);
  // The eager runs before the recording left their temporaries cached in the
  // pool; the graph has its own arena now, so that memory goes back to the
  // driver instead of being held twice.
  cudaMemPool_t pool = nullptr;
  if (cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess &&
      cudaDeviceGetDefaultMemPool(&pool, device.index) == cudaSuccess) {
    cudaMemPoolTrimTo(pool, 0);
  }
  cudaGetLastError();
  return std::unique_ptr<DeviceGraph>(new DeviceGraph(std::move(impl)));
}

std::vector<Tensor> DeviceGraph::run(const std::vector<Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  OASR_CHECK(inputs.size() == impl_->inputs.size(), kInvalidArgument,
             "device graph: ", inputs.size(), " inputs for a graph recorded with ",
             impl_->inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& owned = impl_->inputs[i];
    const Tensor& given = inputs[i];
    OASR_CHECK(owned.defined() == given.defined() &&
                   (!owned.defined() ||
                    (owned.shape() == given.shape() && owned.dtype() == given.dtype())),
               kInvalidArgument, "device graph: input ", i, " does not match the recorded one");
    if (owned.defined()) owned.copy_(given);
  }
  CudaDeviceGuard guard(impl_->device.index);
  OASR_CUDA_CHECK(cudaEventRecord(impl_->inputs_ready, cudaStreamLegacy));
  OASR_CUDA_CHECK(cudaStreamWaitEvent(impl_->stream, impl_->inputs_ready, 0));
  OASR_CUDA_CHECK(cudaGraphLaunch(impl_->exec, impl_->stream));
  OASR_CUDA_CHECK(cudaEventRecord(impl_->outputs_ready, impl_->stream));
  OASR_CUDA_CHECK(cudaStreamWaitEvent(cudaStreamLegacy, impl_->outputs_ready, 0));
  std::vector<Tensor> outputs;
  outputs.reserve(impl_->outputs.size());
  for (const Tensor& out : impl_->outputs)
    outputs.push_back(out.defined() ? out.clone() : Tensor());
  return outputs;
}

}  // namespace oasr
