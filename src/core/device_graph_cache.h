// Device graphs of one piece of work, one per input shape (core/device_graph.h).
// The policy is a function of the calls alone, never of timings: a shape's
// first call runs eagerly and is measured; its second records the graph and
// replays it; later calls replay. A shape seen once never pays for a
// recording, and a shape whose work cannot be recorded is remembered and run
// eagerly from then on. Every path launches the same kernels, so the bits do
// not depend on which one served a call. At most `capacity` shapes are kept,
// the least recently used dropped first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device_graph.h"

namespace oasr {

class DeviceGraphCache {
 public:
  explicit DeviceGraphCache(size_t capacity = 16) : capacity_(capacity) {}

  // work(inputs) on `device`, eagerly or by replay as the policy says. `key`
  // must name everything the work's kernel sequence depends on besides the
  // inputs' shapes and dtypes (which the cache adds itself).
  std::vector<Tensor> run(const std::string& key, Device device, const DeviceWork& work,
                          const std::vector<Tensor>& inputs);

  struct Stats {
    int64_t eager = 0;         // calls run eagerly (first sight, declined shapes)
    int64_t recorded = 0;      // graphs recorded
    int64_t replayed = 0;      // calls served by a replay
    int64_t declined = 0;      // shapes whose work could not be recorded
    size_t arena_bytes = 0;    // device memory the kept graphs hold
    std::string last_decline;  // why the last shape was declined
  };
  Stats stats() const;

 private:
  struct Entry {
    size_t measured_bytes = 0;  // 0 until a clean measured run
    bool declined = false;
    std::shared_ptr<DeviceGraph> graph;
  };
  Entry& touch(const std::string& key);

  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::string> recency_;  // most recent first
  std::unordered_map<std::string, std::pair<Entry, std::list<std::string>::iterator>> entries_;
  Stats stats_;
};

}  // namespace oasr
