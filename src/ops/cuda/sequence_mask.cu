#include "ops/cuda/sequence_mask.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

template <typename T>
__global__ void zero_tail_frames_kernel(const T* x, const int64_t* valid, T* out, int64_t n,
                                        int64_t frames, int64_t channels) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t frame = i / channels;  // b * frames + t
    const int64_t b = frame / frames;
    const int64_t t = frame - b * frames;
    out[i] = t < valid[b] ? x[i] : from_float<T>(0.0f);
  }
}

}  // namespace

void zero_tail_frames(const Tensor& x, const Tensor& lengths, const Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "zero_tail_frames", [&](auto tag) {
    using T = decltype(tag);
    zero_tail_frames_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), static_cast<const int64_t*>(lengths.raw_data()),
        static_cast<T*>(out.raw_data()), n, x.size(1), x.size(2));
  });
  check_launch("zero_tail_frames");
}

}  // namespace oasr::ops::cuda
