#include "core/device_graph_cache.h"

#include <sstream>

#include "core/env.h"
#include "core/logging.h"

namespace oasr {

namespace {
std::string shape_key(const std::string& key, Device device, const std::vector<Tensor>& inputs) {
  std::ostringstream out;
  out << key << '@' << device.str();
  for (const Tensor& t : inputs) {
    out << '|';
    if (t.defined()) out << dtype_name(t.dtype()) << shape_str(t.shape());
  }
  return out.str();
}
}  // namespace

DeviceGraphCache::Entry& DeviceGraphCache::touch(const std::string& key) {
  const auto found = entries_.find(key);
  if (found != entries_.end()) {
    recency_.splice(recency_.begin(), recency_, found->second.second);
    return found->second.first;
  }
  while (entries_.size() >= capacity_ && !recency_.empty()) {
    entries_.erase(recency_.back());
    recency_.pop_back();
  }
  recency_.push_front(key);
  return entries_.emplace(key, std::make_pair(Entry{}, recency_.begin())).first->second.first;
}

std::vector<Tensor> DeviceGraphCache::run(const std::string& key, Device device,
                                          const DeviceWork& work,
                                          const std::vector<Tensor>& inputs) {
  // Graphs off (OASR_CUDA_GRAPHS=0) or a device without them (the CPU): eager.
  if (!env::cuda_graphs_enabled() || !device_graphs_supported(device)) return work(inputs);
  const std::string full_key = shape_key(key, device, inputs);
  enum class Action { kReplay, kEager, kMeasure, kRecord };
  Action action = Action::kEager;
  std::shared_ptr<DeviceGraph> graph;
  size_t measured = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Entry& entry = touch(full_key);
    if (entry.graph) {
      action = Action::kReplay;
      graph = entry.graph;
      ++stats_.replayed;
    } else if (entry.declined) {
      ++stats_.eager;
    } else if (entry.measured_bytes == 0) {
      action = Action::kMeasure;
      ++stats_.eager;
    } else {
      action = Action::kRecord;
      measured = entry.measured_bytes;
    }
  }
  switch (action) {
    case Action::kReplay:
      return graph->run(inputs);
    case Action::kEager:
      return work(inputs);
    case Action::kMeasure: {
      MeasuredRun run = run_measured(device, work, inputs);
      std::lock_guard<std::mutex> lock(mutex_);
      Entry& entry = touch(full_key);
      if (!entry.graph && !entry.declined) entry.measured_bytes = run.arena_bytes;
      return std::move(run.outputs);
    }
    case Action::kRecord:
      break;
  }
  std::string why;
  std::shared_ptr<DeviceGraph> recorded = DeviceGraph::record(device, work, inputs, measured, &why);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = touch(full_key);
    if (recorded) {
      entry.graph = recorded;
      ++stats_.recorded;
      ++stats_.replayed;
    } else {
      entry.declined = true;
      ++stats_.declined;
      ++stats_.eager;
      stats_.last_decline = why;
      log::debug("device graph declined for {}: {}", full_key, why);
    }
  }
  return recorded ? recorded->run(inputs) : work(inputs);
}

DeviceGraphCache::Stats DeviceGraphCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats stats = stats_;
  stats.arena_bytes = 0;
  for (const auto& [key, value] : entries_) {
    if (value.first.graph) stats.arena_bytes += value.first.graph->arena_bytes();
  }
  return stats;
}

}  // namespace oasr
