// One thread count for every CPU op: oasr's worker pool (ops/cpu/worker_pool.h:
// the float32 and int8 GEMMs, quantizers, softmax, activations). OpenBLAS's
// pool is set to the same count: no oasr op calls OpenBLAS any more (the
// float32 GEMM is ops/cpu/gemm.h's, for batch invariance), but the library
// is still linked, and a caller's BLAS never oversubscribes the cores.
// EngineConfig::threads and every CLI's --threads end here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

namespace oasr::ops {

// threads >= 1 sets both pools; 0 restores the default (the machine's
// hardware threads). Negative counts are refused naming the flag's range.
void set_cpu_threads(int threads);
// The count the pools use now.
int cpu_threads();
// The machine's hardware threads (the default).
int default_cpu_threads();

// Runs task(0) .. task(count - 1) on the shared worker pool (the calling
// thread works too). Tasks must not throw; results must not depend on which
// thread ran a task (every caller splits by rows, whose bits are fixed).
void parallel_for(int64_t count, const std::function<void(int64_t)>& task);

// parallel_for for tasks that may throw (one utterance's features or search
// each): every task runs, then the lowest task's exception, if any, is
// rethrown -- the error a serial loop would raise first.
void parallel_for_rethrowing(int64_t count, const std::function<void(int64_t)>& task);

// task(first_row, row_count) over [0, rows) in chunks of rows_per_task rows:
// on the pool when `parallel`, there is more than one chunk and at least
// kParallelRowElements elements (rows * features) to share; in order on the
// calling thread otherwise. For row-wise ops, whose rows' bits do not depend
// on the split.
inline constexpr int64_t kParallelRowElements = int64_t{1} << 14;
template <typename Task>
void for_row_chunks(int64_t rows, int64_t features, int64_t rows_per_task, bool parallel,
                    const Task& task) {
  const int64_t chunks = (rows + rows_per_task - 1) / rows_per_task;
  const auto run = [&](int64_t chunk) {
    const int64_t begin = chunk * rows_per_task;
    task(begin, std::min(rows, begin + rows_per_task) - begin);
  };
  if (!parallel || chunks <= 1 || rows * features < kParallelRowElements) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) run(chunk);
    return;
  }
  parallel_for(chunks, run);
}

}  // namespace oasr::ops
