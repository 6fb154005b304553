// The threads every CPU op splits its work over (the int8 GEMM lanes, the
// quantizers, softmax, activations): a small persistent pool, since spawning
// threads per call would cost more than a 256x256 product. No OpenMP in this
// project, and OpenBLAS's pool is not ours to borrow; ops/cpu_threads.h sets
// both to one count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace oasr::ops::cpu {

// Runs task(0) .. task(count - 1) on the calling thread plus threads() - 1
// workers, tasks handed out one at a time (dynamic: a loaded, shared machine
// makes static splits uneven). Between calls workers poll for up to 1 ms,
// then sleep on a condition variable (a pool with more threads than the
// machine's never polls); the caller works too, so a worker the OS has not
// yet woken only ever delays the tasks it already took. A caller that
// finds the pool busy (another thread's call) runs its tasks alone rather than
// queueing. Tasks must not throw.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const;
  void run(int64_t count, const std::function<void(int64_t)>& task);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The process-wide pool (created on first use with ops::cpu_threads()
// threads); callers keep the shared_ptr for the duration of a call, so
// ops::set_cpu_threads() may replace it concurrently.
std::shared_ptr<WorkerPool> shared_worker_pool();
// Replaces the process-wide pool with one of `threads` threads (>= 1).
void replace_shared_worker_pool(int threads);

}  // namespace oasr::ops::cpu
