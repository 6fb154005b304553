#include "ops/cuda/elementwise.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

enum class Binary { kAdd, kMul, kAddScaled };

// out[i] = a[i] (op) b[i mod b_n]; the modulo is skipped when b is a's shape.
template <typename T, Binary kOp>
__global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n, int64_t b_n, float alpha) {
  const bool same_shape = b_n == n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = to_float(a[i]);
    const float y = to_float(b[same_shape ? i : i % b_n]);
    float result;
    if constexpr (kOp == Binary::kAdd) {
      result = __fadd_rn(x, y);
    } else if constexpr (kOp == Binary::kMul) {
      result = __fmul_rn(x, y);
    } else {
      result = __fadd_rn(x, __fmul_rn(alpha, y));  // two roundings, like the CPU body
    }
    out[i] = from_float<T>(result);
  }
}

template <typename T>
__global__ void scale_kernel(const T* x, float factor, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_float<T>(__fmul_rn(to_float(x[i]), factor));
  }
}

template <Binary kOp>
void launch_binary(const char* op, const Tensor& a, const Tensor& b, float alpha,
                   const Tensor& out) {
  const int64_t n = a.numel();
  const int64_t b_n = b.numel();
  if (n == 0 || b_n == 0) return;  // b_n is 0 only when n is (b is a suffix of a)
  use_device(a.device().index);
  dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    binary_kernel<T, kOp><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(a.raw_data()), static_cast<const T*>(b.raw_data()),
        static_cast<T*>(out.raw_data()), n, b_n, alpha);
  });
  check_launch(op);
}

}  // namespace

void add(const Tensor& a, const Tensor& b, const Tensor& out) {
  launch_binary<Binary::kAdd>("add", a, b, 1.0f, out);
}

void mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  launch_binary<Binary::kMul>("mul", a, b, 1.0f, out);
}

void add_scaled(const Tensor& a, const Tensor& b, float alpha, const Tensor& out) {
  launch_binary<Binary::kAddScaled>("add_scaled", a, b, alpha, out);
}

void scale(const Tensor& x, float factor, const Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), factor, static_cast<T*>(out.raw_data()), n);
  });
  check_launch("scale");
}

}  // namespace oasr::ops::cuda
