#include "ops/cuda/glu.h"

#include "core/activations.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One thread per output element j = o * half_span + r: the first half's
// element sits at o * 2 * half_span + r, its gate half_span further on.
template <typename T>
__global__ void glu_kernel(const T* x, T* out, int64_t n, int64_t half_span) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = j / half_span;
    const T* first = x + j + o * half_span;
    const float gate = act::sigmoid(to_float(first[half_span]));
    out[j] = from_float<T>(__fmul_rn(to_float(first[0]), gate));
  }
}

}  // namespace

void glu(const Tensor& x, const Tensor& out, int64_t outer, int64_t half, int64_t inner) {
  const int64_t half_span = half * inner;
  const int64_t n = outer * half_span;
  if (n == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "glu", [&](auto tag) {
    using T = decltype(tag);
    glu_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), n, half_span);
  });
  check_launch("glu");
}

}  // namespace oasr::ops::cuda
