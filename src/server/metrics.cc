// Prometheus metrics; see metrics.h.
#include "server/metrics.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace oasr::server {
namespace {

std::string number(double value) {
  std::ostringstream out;
  out.precision(10);
  out << value;
  return out.str();
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << number(bounds_[i]) << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n";
  out << name << "_sum " << number(sum_) << "\n" << name << "_count " << count_ << "\n";
  return out.str();
}

Metrics::Metrics()
    : batch_size_({1, 2, 4, 8, 16, 32, 64, 128}),
      batch_seconds_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      request_seconds_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard lock(requests_mutex_);
  ++requests_[{route, status}];
}

void Metrics::observe_batch(size_t size, double seconds) {
  batch_size_.observe(static_cast<double>(size));
  batch_seconds_.observe(seconds);
  decode_microseconds_ += static_cast<uint64_t>(std::llround(seconds * 1e6));
}

void Metrics::observe_request(double seconds, double audio_seconds) {
  request_seconds_.observe(seconds);
  audio_milliseconds_ += static_cast<uint64_t>(std::llround(audio_seconds * 1e3));
}

std::string Metrics::render(size_t queue_depth, const DeviceMemory& device) const {
  std::ostringstream out;
  out << "# HELP oasr_requests_total HTTP requests answered, by route and status code.\n"
         "# TYPE oasr_requests_total counter\n";
  {
    std::lock_guard lock(requests_mutex_);
    for (const auto& [key, count] : requests_) {
      out << "oasr_requests_total{route=\"" << key.first << "\",code=\"" << key.second << "\"} "
          << count << "\n";
    }
  }
  out << "# HELP oasr_queue_depth Utterances waiting for a batch.\n# TYPE oasr_queue_depth gauge\n"
      << "oasr_queue_depth " << queue_depth << "\n";
  out << batch_size_.render(
      "oasr_batch_size",
      "Utterances per decoded batch (continuous batching: in flight per decode iteration).");
  out << batch_seconds_.render(
      "oasr_batch_seconds",
      "Engine time per decoded batch (continuous batching: per decode iteration).");
  out << request_seconds_.render("oasr_request_seconds",
                                 "Transcription request latency, body received to reply.");
  const double audio = static_cast<double>(audio_milliseconds_.load()) / 1e3;
  const double decode = static_cast<double>(decode_microseconds_.load()) / 1e6;
  out << "# HELP oasr_audio_seconds_total Seconds of audio transcribed.\n"
         "# TYPE oasr_audio_seconds_total counter\noasr_audio_seconds_total "
      << number(audio) << "\n";
  out << "# HELP oasr_decode_seconds_total Engine seconds spent decoding batches.\n"
         "# TYPE oasr_decode_seconds_total counter\noasr_decode_seconds_total "
      << number(decode) << "\n";
  out << "# HELP oasr_rtfx Audio seconds per engine second since start (0 before the first).\n"
         "# TYPE oasr_rtfx gauge\noasr_rtfx "
      << number(decode > 0 ? audio / decode : 0.0) << "\n";
  if (device.reserved_bytes >= 0) {
    out << "# HELP oasr_device_memory_used_bytes Device memory in live allocations.\n"
           "# TYPE oasr_device_memory_used_bytes gauge\noasr_device_memory_used_bytes "
        << device.used_bytes << "\n";
    out << "# HELP oasr_device_memory_reserved_bytes Device memory held by this process's pool.\n"
           "# TYPE oasr_device_memory_reserved_bytes gauge\noasr_device_memory_reserved_bytes "
        << device.reserved_bytes << "\n";
  }
  // Prometheus' standard process metric, from /proc/self/statm (pages).
  std::ifstream statm("/proc/self/statm");
  long long pages_total = 0, pages_resident = 0;
  if (statm >> pages_total >> pages_resident) {
    out << "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
           "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "
        << pages_resident * static_cast<long long>(::sysconf(_SC_PAGESIZE)) << "\n";
  }
  return out.str();
}

}  // namespace oasr::server
