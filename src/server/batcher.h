// Batching across requests, one worker thread per engine, in one of two
// modes.
//
// Continuous (the engine decodes continuously, ASREngine::
// decodes_continuously: Qwen2-Audio): iteration-level batching
// (engine/continuous_batch.h). Before each decode iteration the worker moves
// queued jobs into the running batch while fewer than `max_batch` are in
// flight; a job leaves the iteration it finishes and is answered at once.
// max_delay is not used: a request never waits for company.
//
// Whole batches (every other architecture): the worker takes the
// queued utterances, waits up to `max_delay` after the oldest for more to
// arrive, and decodes the oldest with up to `max_batch` - 1 others of the
// same decode options and a similar length (the longest at most 1.5 times
// the shortest: a padded batch wastes little) in one
// ASREngine::transcribe_each call. A row's result does not
// depend on its neighbours (the engine's batch invariance), so a request
// gets the transcript it would get alone; a failing utterance fails only
// its own request.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/asr_engine.h"
#include "engine/continuous_batch.h"

namespace oasr::server {

struct BatchJob {
  std::vector<float> samples;  // mono, at the engine's sample rate
  engine::DecodeOverrides overrides;
  std::string label;  // starts an error's message
  std::chrono::steady_clock::time_point deadline;
  // Set by Batcher::submit: the batch waits for company until the oldest
  // job has waited max_delay since then (not again after each batch).
  std::chrono::steady_clock::time_point enqueued;
  // Called exactly once, on the worker thread: the transcript or the error
  // (kUnsupported "timed out" when the deadline passed before decoding).
  std::function<void(engine::UtteranceResult)> done;
};

struct BatcherOptions {
  int64_t max_batch = 16;
  std::chrono::milliseconds max_delay{10};
  size_t max_queue = 256;
};

// The batching policy on its own (Batcher applies it to its queue, oldest
// first): lengths[i] is queued job i's sample count, eligible[i] whether it
// shares job 0's decode options. Job 0 always goes; the eligible others join
// nearest length first (ties: older first) while the longest stays within
// 1.5 times the shortest, up to max_batch jobs. The chosen indices,
// ascending. lengths and eligible have one entry per queued job.
std::vector<size_t> choose_batch(std::span<const size_t> lengths, std::span<const uint8_t> eligible,
                                 size_t max_batch);

class Batcher {
 public:
  enum class Admission { kQueued, kQueueFull, kStopping };
  // Called on the worker after each decoded batch (metrics): its size and
  // the seconds the engine took; in continuous mode after each iteration,
  // with the jobs in flight during it.
  using BatchObserver = std::function<void(size_t batch, double seconds)>;

  Batcher(const engine::ASREngine& engine, BatcherOptions options, BatchObserver observer = {});
  ~Batcher();  // stop()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  Admission submit(BatchJob job);
  // Refuses new jobs, decodes those queued, joins the worker. Idempotent.
  void stop();
  size_t queue_depth() const;

  // The error a job gets when its deadline passes while it waits.
  static bool is_timeout(const Error& error);

 private:
  void run();
  void run_continuous();
  std::vector<BatchJob> take_batch(std::unique_lock<std::mutex>& lock);

  const engine::ASREngine& engine_;
  BatcherOptions options_;
  BatchObserver observer_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<BatchJob> queue_;
  bool stopping_ = false;
  std::unique_ptr<engine::ContinuousBatch> continuous_;  // continuous mode only
  std::thread worker_;
};

}  // namespace oasr::server
