// A first-fit allocator over offsets in one address range, with no memory of
// its own. A recorded device graph (core/device_graph.h) replays its kernels
// on the addresses they were recorded with, so the tensors of the recorded
// work live in one arena the graph owns; the same sequence of allocations
// and frees always gives the same offsets, so an eager run of the work
// measures (high_water) exactly the arena its recording needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>

namespace oasr {

class OffsetArena {
 public:
  static constexpr size_t kAlignment = 256;  // what cudaMallocAsync guarantees

  // capacity 0: unbounded (measuring); otherwise allocate() past it fails.
  explicit OffsetArena(size_t capacity = 0) : capacity_(capacity) {}

  // The lowest free offset with room for nbytes (rounded up to kAlignment,
  // at least one unit), or -1 when a bounded arena has no such room.
  int64_t allocate(size_t nbytes);
  // Returns the block at `offset` (from allocate); neighbours coalesce.
  // False when no live block starts there.
  bool free(int64_t offset);

  size_t high_water() const { return high_water_; }
  size_t live_bytes() const { return live_bytes_; }
  size_t live_blocks() const { return live_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  size_t end_ = 0;  // one past the highest byte ever handed out
  size_t high_water_ = 0;
  size_t live_bytes_ = 0;
  std::map<size_t, size_t> free_;  // offset -> bytes, below end_, coalesced
  std::map<size_t, size_t> live_;  // offset -> bytes
};

}  // namespace oasr
