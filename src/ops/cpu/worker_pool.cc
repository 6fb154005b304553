#include "ops/cpu/worker_pool.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

namespace oasr::ops::cpu {
namespace {

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
  for (int i = 1; i < threads; ++i) {
    state_->workers.emplace_back([state = state_.get()] { state->worker_loop(); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
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
  }
  state_->wake.notify_all();
  state_->drain(*current);
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
