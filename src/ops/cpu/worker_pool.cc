#include "ops/cpu/worker_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace oasr::ops::cpu {
namespace {

// How long a worker (or the calling thread, waiting for the last task)
// polls before it sleeps on the condition variable. A forward issues its
// ops microseconds apart; waking every sleeping worker through the kernel
// for each op cost more than many ops themselves on 16 cores (bench/README.md,
// "The AMX int8 lane"). A pool with more threads than the machine has
// hardware threads (tests run side by side on CI) never polls: there a
// poller would only take the core from the thread it waits for.
constexpr std::chrono::microseconds kPollBeforeSleep{1000};

// Calls ready() until it is true or kPollBeforeSleep has passed, pausing
// between calls (the pause leaves a hyperthread sibling its issue slots) and
// yielding (a thread of another process waiting for this core runs).
template <typename Ready>
void poll_for(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kPollBeforeSleep;
  while (!ready() && std::chrono::steady_clock::now() < deadline) {
#if defined(__x86_64__)
    for (int i = 0; i < 16; ++i) _mm_pause();
#endif
    std::this_thread::yield();
  }
}

// One run() call. Workers hold it by shared_ptr, so one that wakes after the
// call has returned finds no task left and touches nothing of the caller's.
struct Job {
  const std::function<void(int64_t)>* task = nullptr;
  int64_t count = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

}  // namespace

struct WorkerPool::State {
  std::vector<std::thread> workers;
  std::mutex busy;   // held by the one caller using the pool
  std::mutex mutex;  // guards job, generation, stopping
  std::condition_variable wake, finished;
  std::shared_ptr<Job> job;
  uint64_t generation = 0;
  bool stopping = false;
  // generation and stopping as the polling workers read them without the
  // mutex (written under it, after the guarded values).
  std::atomic<uint64_t> published_generation{0};
  std::atomic<bool> published_stopping{false};
  bool poll = false;  // the pool fits the machine's hardware threads

  // Takes and runs tasks until none is left; true if this call ran the last one.
  void drain(Job& current) {
    for (int64_t i = current.next.fetch_add(1); i < current.count; i = current.next.fetch_add(1)) {
      (*current.task)(i);
      if (current.done.fetch_add(1) + 1 == current.count) {
        std::lock_guard<std::mutex> lock(mutex);  // no lost wake-up for the waiting caller
        finished.notify_all();
      }
    }
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      if (poll) {
        poll_for([&] {
          return published_stopping.load(std::memory_order_acquire) ||
                 published_generation.load(std::memory_order_acquire) != seen;
        });
      }
      std::shared_ptr<Job> current;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping) return;
        seen = generation;
        current = job;
      }
      if (current) drain(*current);
    }
  }
};

WorkerPool::WorkerPool(int threads) : state_(std::make_unique<State>()) {
  const unsigned hardware = std::thread::hardware_concurrency();
  state_->poll = hardware != 0 && static_cast<unsigned>(threads) <= hardware;
  for (int i = 1; i < threads; ++i) {
    state_->workers.emplace_back([state = state_.get()] { state->worker_loop(); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    state_->published_stopping.store(true, std::memory_order_release);
  }
  state_->wake.notify_all();
  for (std::thread& worker : state_->workers) worker.join();
}

int WorkerPool::threads() const {
  return static_cast<int>(state_->workers.size()) + 1;
}

void WorkerPool::run(int64_t count, const std::function<void(int64_t)>& task) {
  std::unique_lock<std::mutex> busy(state_->busy, std::try_to_lock);
  if (!busy.owns_lock() || state_->workers.empty() || count <= 1) {
    for (int64_t i = 0; i < count; ++i) task(i);
    return;
  }
  auto current = std::make_shared<Job>();
  current->task = &task;
  current->count = count;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->job = current;
    ++state_->generation;
    state_->published_generation.store(state_->generation, std::memory_order_release);
  }
  state_->wake.notify_all();
  state_->drain(*current);
  if (state_->poll) poll_for([&] { return current->done.load() == count; });
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->finished.wait(lock, [&] { return current->done.load() == count; });
  state_->job.reset();
}

namespace {

int default_threads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

std::mutex g_pool_mutex;
std::shared_ptr<WorkerPool> g_pool;  // created on first use

}  // namespace

std::shared_ptr<WorkerPool> shared_worker_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_shared<WorkerPool>(default_threads());
  return g_pool;
}

void replace_shared_worker_pool(int threads) {
  OASR_CHECK(threads >= 1, kInvalidArgument, "CPU worker pool: ", threads,
             " threads; need at least 1");
  auto pool = std::make_shared<WorkerPool>(threads);
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool = std::move(pool);
}

}  // namespace oasr::ops::cpu
