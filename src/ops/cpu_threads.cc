#include "ops/cpu_threads.h"

#include <exception>
#include <vector>

#include <cblas.h>

#include <thread>

#include "core/error.h"
#include "ops/cpu/worker_pool.h"

namespace oasr::ops {

int default_cpu_threads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

void set_cpu_threads(int threads) {
  OASR_CHECK(threads >= 0, kInvalidArgument, "--threads ", threads,
             " is negative; give 1 or more (0: the machine's ", default_cpu_threads(),
             " hardware threads)");
  const int count = threads == 0 ? default_cpu_threads() : threads;
  cpu::replace_shared_worker_pool(count);
  openblas_set_num_threads(count);
}

int cpu_threads() {
  return cpu::shared_worker_pool()->threads();
}

void parallel_for(int64_t count, const std::function<void(int64_t)>& task) {
  cpu::shared_worker_pool()->run(count, task);
}

void parallel_for_rethrowing(int64_t count, const std::function<void(int64_t)>& task) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
  parallel_for(count, [&](int64_t i) {
    try {
      task(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace oasr::ops
