// How the CUDA backend routes allocations while a device graph is measured
// or recorded (core/cuda/cuda_graph.cc sets the routing, the backend in
// core/cuda/cuda_backend.cc reads it). A graph replays its kernels on the
// addresses they were recorded with, so everything the recorded work
// allocates comes from one arena the graph owns, laid out by OffsetArena;
// the eager run before it mirrors its allocations on an unbounded
// OffsetArena to learn how big that arena must be.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/offset_arena.h"

namespace oasr::cuda_graph_detail {

// One device buffer whose bytes an OffsetArena hands out.
class CudaArena {
 public:
  CudaArena(int device_index, size_t bytes);  // throws kOutOfMemory
  ~CudaArena();
  CudaArena(const CudaArena&) = delete;
  CudaArena& operator=(const CudaArena&) = delete;

  // Throws kInternal when the arena is full: the recorded work allocated
  // differently from its measured run, so it cannot be recorded.
  void* allocate(size_t nbytes, int device_index);
  bool owns(const void* p) const;
  void free(void* p);
  size_t live_blocks() const;

 private:
  int device_index_;
  char* base_ = nullptr;
  size_t bytes_;
  mutable std::mutex mutex_;
  OffsetArena offsets_;
};

// An eager run's allocations, mirrored on an unbounded OffsetArena.
struct AllocationMeasure {
  OffsetArena offsets;
  std::unordered_map<void*, int64_t> offset_of;  // live pool block -> mirrored offset
};

// This thread's routing; all null outside a measurement or recording.
struct AllocationRouting {
  CudaArena* arena = nullptr;            // recording: allocate from the arena
  AllocationMeasure* measure = nullptr;  // measuring: mirror pool allocations
  std::vector<std::pair<void*, int>>* deferred_frees = nullptr;  // recording: pool frees wait
};
AllocationRouting& routing();

// Arenas are looked up by address at free time, whichever thread frees.
void register_arena(CudaArena* arena);
void unregister_arena(CudaArena* arena);
CudaArena* arena_owning(const void* p);

}  // namespace oasr::cuda_graph_detail
