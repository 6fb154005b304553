// Cooperative cancellation of long work. A caller that can be interrupted
// (the Python package on Ctrl-C) gives the working thread a flag for the
// length of the call; long loops (batches, decode steps, calibration
// utterances) ask throw_if_cancelled() between units of work, so a request
// to stop ends the call with kCancelled at the next unit instead of when all
// of it is done. Without a flag the check costs one thread-local load.
#pragma once

#include <atomic>

namespace oasr {

class CancellationFlag {
 public:
  void request() { requested_.store(true, std::memory_order_relaxed); }
  bool requested() const { return requested_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> requested_{false};
};

// Makes `flag` the calling thread's until the scope ends (scopes nest).
class ScopedCancellation {
 public:
  explicit ScopedCancellation(const CancellationFlag* flag);
  ~ScopedCancellation();
  ScopedCancellation(const ScopedCancellation&) = delete;
  ScopedCancellation& operator=(const ScopedCancellation&) = delete;

 private:
  const CancellationFlag* previous_;
};

// Throws Error(kCancelled) when the calling thread's flag has been requested.
void throw_if_cancelled();

}  // namespace oasr
