#include "core/offset_arena.h"

namespace oasr {

int64_t OffsetArena::allocate(size_t nbytes) {
  const size_t request = nbytes == 0 ? 1 : nbytes;
  const size_t size = (request + kAlignment - 1) / kAlignment * kAlignment;
  size_t offset = end_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    offset = it->first;
    const size_t left = it->second - size;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + size, left);
    break;
  }
  if (offset == end_) {
    // Nothing free fits: grow past the end (a free block never ends at end_:
    // free() returns the top block to the tail).
    if (capacity_ != 0 && end_ + size > capacity_) return -1;
    end_ += size;
  }
  live_.emplace(offset, size);
  live_bytes_ += size;
  if (end_ > high_water_) high_water_ = end_;
  return static_cast<int64_t>(offset);
}

bool OffsetArena::free(int64_t offset) {
  const auto found = live_.find(static_cast<size_t>(offset));
  if (offset < 0 || found == live_.end()) return false;
  size_t start = found->first;
  size_t size = found->second;
  live_bytes_ -= size;
  live_.erase(found);
  const auto next = free_.lower_bound(start);
  if (next != free_.end() && start + size == next->first) {
    size += next->second;
    free_.erase(next);
  }
  const auto after = free_.lower_bound(start);
  if (after != free_.begin()) {
    const auto previous = std::prev(after);
    if (previous->first + previous->second == start) {
      start = previous->first;
      size += previous->second;
      free_.erase(previous);
    }
  }
  if (start + size == end_) {
    end_ = start;  // the top block returns to the unused tail
  } else {
    free_.emplace(start, size);
  }
  return true;
}

}  // namespace oasr
