#include "ops/cuda/activation.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

template <typename T, Activation kActivation>
__global__ void activation_kernel(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_float<T>(act::apply(kActivation, to_float(x[i])));
  }
}

template <Activation kActivation>
void launch(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "activation", [&](auto tag) {
    using T = decltype(tag);
    activation_kernel<T, kActivation><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), n);
  });
  check_launch("activation");
}

}  // namespace

void activation(const Tensor& x, const Tensor& out, Activation activation) {
  if (x.numel() == 0) return;
  use_device(x.device().index);
  switch (activation) {
    case Activation::kNone:
      if (out.raw_data() != x.raw_data()) {
        OASR_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), x.raw_data(), x.nbytes(),
                                        cudaMemcpyDeviceToDevice, current_stream()));
      }
      return;
    case Activation::kRelu:
      return launch<Activation::kRelu>(x, out);
    case Activation::kSwish:
      return launch<Activation::kSwish>(x, out);
    case Activation::kGeluErf:
      return launch<Activation::kGeluErf>(x, out);
    case Activation::kGeluTanh:
      return launch<Activation::kGeluTanh>(x, out);
    case Activation::kSigmoid:
      return launch<Activation::kSigmoid>(x, out);
    case Activation::kTanh:
      return launch<Activation::kTanh>(x, out);
  }
  OASR_THROW(kInternal, "activation: unknown Activation value ", static_cast<int>(activation));
}

}  // namespace oasr::ops::cuda
