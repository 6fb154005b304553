#include "core/cancellation.h"

#include "core/error.h"

namespace oasr {
namespace {
thread_local const CancellationFlag* current_flag = nullptr;
}  // namespace

ScopedCancellation::ScopedCancellation(const CancellationFlag* flag) : previous_(current_flag) {
  current_flag = flag;
}

ScopedCancellation::~ScopedCancellation() {
  current_flag = previous_;
}

void throw_if_cancelled() {
  const CancellationFlag* flag = current_flag;
  OASR_CHECK(flag == nullptr || !flag->requested(), kCancelled,
             "interrupted: the caller asked the work to stop");
}

}  // namespace oasr
