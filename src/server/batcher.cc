// Dynamic batching; see batcher.h.
#include "server/batcher.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "engine/continuous_batch.h"

namespace oasr::server {
namespace {

constexpr const char* kTimeoutMessage = "timed out in the queue before decoding started";
// A batch's longest utterance is at most this many times its shortest.
constexpr double kMaxLengthSpread = 1.5;

engine::UtteranceResult failure(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return {std::nullopt, *error};
  return {std::nullopt, Error(ErrorCode::kInternal, std::string("decoding failed: ") + e.what())};
}

}  // namespace

std::vector<size_t> choose_batch(std::span<const size_t> lengths, std::span<const uint8_t> eligible,
                                 size_t max_batch) {
  OASR_CHECK(eligible.size() == lengths.size(), kInternal, "choose_batch: ", eligible.size(),
             " eligibility flags for ", lengths.size(), " queued jobs");
  if (lengths.empty()) return {};
  const auto length = [&](size_t i) { return static_cast<double>(lengths[i]); };
  std::vector<std::pair<double, size_t>> candidates;  // (distance to the oldest's length, index)
  for (size_t i = 1; i < lengths.size(); ++i) {
    if (eligible[i] != 0) candidates.emplace_back(std::abs(length(i) - length(0)), i);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> chosen = {0};
  double shortest = length(0), longest = length(0);
  for (const auto& [distance, i] : candidates) {
    if (chosen.size() >= max_batch) break;
    const double lo = std::min(shortest, length(i));
    const double hi = std::max(longest, length(i));
    if (hi > kMaxLengthSpread * std::max(lo, 1.0)) continue;
    shortest = lo;
    longest = hi;
    chosen.push_back(i);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Batcher::Batcher(const engine::ASREngine& engine, BatcherOptions options, BatchObserver observer)
    : engine_(engine), options_(options), observer_(std::move(observer)) {
  OASR_CHECK(options_.max_batch > 0, kInvalidArgument, "--max-batch-size must be at least 1");
  OASR_CHECK(options_.max_queue > 0, kInvalidArgument, "--max-queue must be at least 1");
  if (engine_.decodes_continuously()) {
    // Made here, so a pool that does not fit the device fails the start-up.
    continuous_ = engine_.start_continuous();
    worker_ = std::thread([this] { run_continuous(); });
  } else {
    worker_ = std::thread([this] { run(); });
  }
}

Batcher::~Batcher() {
  stop();
}

Batcher::Admission Batcher::submit(BatchJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admission::kStopping;
    if (queue_.size() >= options_.max_queue) return Admission::kQueueFull;
    job.enqueued = std::chrono::steady_clock::now();
    queue_.push_back(std::move(job));
  }
  arrived_.notify_one();
  return Admission::kQueued;
}

void Batcher::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  arrived_.notify_all();
  if (worker_.joinable()) worker_.join();
}

size_t Batcher::queue_depth() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

bool Batcher::is_timeout(const Error& error) {
  return std::string(error.what()).ends_with(kTimeoutMessage);
}

std::vector<BatchJob> Batcher::take_batch(std::unique_lock<std::mutex>& lock) {
  arrived_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
  if (queue_.empty()) return {};
  // Wait for company: until the batch is full, the oldest job has waited
  // max_delay, or the server stops (then whatever is queued goes now).
  const auto oldest_until = queue_.front().enqueued + options_.max_delay;
  arrived_.wait_until(lock, oldest_until, [&] {
    return stopping_ || queue_.size() >= static_cast<size_t>(options_.max_batch);
  });
  std::vector<size_t> lengths;
  std::vector<uint8_t> eligible;
  for (const BatchJob& job : queue_) {
    lengths.push_back(job.samples.size());
    eligible.push_back(job.overrides == queue_.front().overrides ? 1 : 0);
  }
  const std::vector<size_t> chosen =
      choose_batch(lengths, eligible, static_cast<size_t>(options_.max_batch));
  std::vector<BatchJob> batch;
  for (const size_t i : chosen) batch.push_back(std::move(queue_[i]));
  for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) {
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  return batch;
}

void Batcher::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    std::vector<BatchJob> batch = take_batch(lock);
    if (batch.empty()) return;  // stopping and drained
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::vector<BatchJob> live;
    for (BatchJob& job : batch) {
      if (now > job.deadline) {
        job.done(
            {std::nullopt, Error(ErrorCode::kUnsupported, job.label + ": " + kTimeoutMessage)});
      } else {
        live.push_back(std::move(job));
      }
    }
    if (!live.empty()) {
      std::vector<std::vector<float>> utterances;
      std::vector<std::string> labels;
      for (BatchJob& job : live) {
        utterances.push_back(std::move(job.samples));
        labels.push_back(job.label);
      }
      const auto started = std::chrono::steady_clock::now();
      std::vector<engine::UtteranceResult> results;
      try {
        results = engine_.transcribe_each(utterances, labels, live.front().overrides);
      } catch (const Error& e) {  // a refused override: every job of the batch shares it
        results.assign(live.size(), {std::nullopt, e});
      } catch (const std::exception& e) {
        results.assign(live.size(),
                       {std::nullopt,
                        Error(ErrorCode::kInternal, std::string("decoding failed: ") + e.what())});
      }
      if (observer_) {
        observer_(
            live.size(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
      for (size_t i = 0; i < live.size(); ++i) live[i].done(std::move(results[i]));
    }
    lock.lock();
  }
}

void Batcher::run_continuous() {
  engine::ContinuousBatch& batch = *continuous_;
  std::unordered_map<int64_t, BatchJob> in_flight;  // by ticket
  std::unique_lock lock(mutex_);
  while (true) {
    arrived_.wait(lock, [&] { return stopping_ || !queue_.empty() || !in_flight.empty(); });
    if (queue_.empty() && in_flight.empty()) return;  // stopping and drained
    std::vector<BatchJob> joining;
    while (!queue_.empty() &&
           in_flight.size() + joining.size() < static_cast<size_t>(options_.max_batch)) {
      joining.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    for (BatchJob& job : joining) {
      if (now > job.deadline) {
        job.done(
            {std::nullopt, Error(ErrorCode::kUnsupported, job.label + ": " + kTimeoutMessage)});
        continue;
      }
      try {
        const int64_t ticket = batch.submit(job.samples, job.overrides, job.label);
        job.samples = {};  // the batch holds its copy
        in_flight.emplace(ticket, std::move(job));
      } catch (const std::exception& e) {
        job.done(failure(e));
      }
    }
    if (!in_flight.empty()) {
      const size_t running = in_flight.size();
      const auto started = std::chrono::steady_clock::now();
      std::vector<std::pair<int64_t, engine::UtteranceResult>> finished;
      try {
        finished = batch.step();
      } catch (const std::exception& e) {  // the device failed: every job in flight fails
        const engine::UtteranceResult result = failure(e);
        for (auto& [ticket, job] : in_flight) job.done(result);
        in_flight.clear();
      }
      if (observer_) {
        observer_(
            running,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
      for (auto& [ticket, result] : finished) {
        auto job = in_flight.extract(ticket);
        job.mapped().done(std::move(result));
      }
    }
    lock.lock();
  }
}

}  // namespace oasr::server
