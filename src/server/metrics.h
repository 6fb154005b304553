// The server's Prometheus metrics (text exposition format 0.0.4): requests
// by route and status, queue depth, batch sizes, latencies, audio seconds,
// decode real-time factor. Counters are atomics; histograms take a mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/device_memory.h"

namespace oasr::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // `name`_bucket{le=...}, _sum and _count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  void observe_batch(size_t size, double seconds);
  void observe_request(double seconds, double audio_seconds);
  // `queue_depth` and `device` are sampled by the caller (device fields -1:
  // not served on a device, lines left out).
  std::string render(size_t queue_depth, const DeviceMemory& device) const;

 private:
  mutable std::mutex requests_mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram batch_size_;
  Histogram batch_seconds_;
  Histogram request_seconds_;
  std::atomic<uint64_t> audio_milliseconds_{0};
  std::atomic<uint64_t> decode_microseconds_{0};
};

}  // namespace oasr::server
