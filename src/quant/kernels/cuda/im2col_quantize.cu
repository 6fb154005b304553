// im2col_quantize_int8 (quantize_cuda.h): one thread per patch element,
// consecutive threads along the channel index c (the patches' innermost
// dimension, so the int8 stores coalesce). All index math is int64.
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/kernels/cuda/quantize_device.cuh"

namespace oasr::quant::cuda {
namespace {

template <typename T>
__global__ void im2col_quantize_int8_kernel(const T* x, Im2colGeometry g, float multiplier,
                                            int8_t* patches, int64_t total) {
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t column = i % columns;
    const int64_t patch = i / columns;  // (b * out_h + oy) * out_w + ox
    const int64_t c = column % g.channels;
    const int64_t rs = column / g.channels;  // r * kernel_w + s
    const int64_t s = rs % g.kernel_w;
    const int64_t r = rs / g.kernel_w;
    const int64_t ox = patch % g.out_w;
    const int64_t oy = (patch / g.out_w) % g.out_h;
    const int64_t b = patch / (g.out_w * g.out_h);
    const int64_t iy = oy * g.stride_h - g.pad_h + r;
    const int64_t ix = ox * g.stride_w - g.pad_w + s;
    int8_t value = 0;  // the padding: zero quantizes to zero
    if (iy >= 0 && iy < g.height && ix >= 0 && ix < g.width) {
      const T element = x[((b * g.channels + c) * g.height + iy) * g.width + ix];
      value = quantize_int8(act::detail::mul_rn(ops::cuda::to_float(element), multiplier));
    }
    patches[i] = value;
  }
}

}  // namespace

void im2col_quantize_int8(const void* x, DType x_dtype, const Im2colGeometry& geometry,
                          float multiplier, int8_t* patches, int device_index) {
  constexpr const char* kOp = "im2col_quantize_int8";
  const Im2colGeometry& g = geometry;
  OASR_CHECK(g.batch >= 0 && g.channels >= 0 && g.height >= 0 && g.width >= 0 && g.out_h >= 0 &&
                 g.out_w >= 0 && g.pad_h >= 0 && g.pad_w >= 0,
             kInvalidArgument, kOp, ": sizes and padding must be >= 0");
  OASR_CHECK(g.kernel_h >= 1 && g.kernel_w >= 1 && g.stride_h >= 1 && g.stride_w >= 1,
             kInvalidArgument, kOp, ": kernel and stride must be >= 1, got kernel ", g.kernel_h,
             "x", g.kernel_w, " stride ", g.stride_h, "x", g.stride_w);
  const int64_t total = g.batch * g.out_h * g.out_w * g.kernel_h * g.kernel_w * g.channels;
  if (total == 0) return;
  OASR_CHECK(x != nullptr && patches != nullptr, kInvalidArgument, kOp,
             ": x and patches must be device pointers, got a null one");
  ops::cuda::use_device(device_index);
  ops::cuda::dispatch_float(x_dtype, kOp, [&](auto tag) {
    using T = decltype(tag);
    im2col_quantize_int8_kernel<T>
        <<<ops::cuda::grid_for(total), ops::cuda::kThreadsPerBlock, 0,
           ops::cuda::current_stream()>>>(static_cast<const T*>(x), g, multiplier, patches, total);
  });
  ops::cuda::check_launch(kOp);
}

}  // namespace oasr::quant::cuda
