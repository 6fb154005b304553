#include "ops/cuda/conv2d.h"

#include <algorithm>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gemm.h"
#include "ops/cuda/transpose_tiles.cuh"

namespace oasr::ops::cuda {
namespace {

// The im2col buffer covers as many whole images as fit in this budget (at
// least one), so memory stays bounded for long inputs and large batches.
constexpr int64_t kColumnBudgetBytes = int64_t{256} << 20;
constexpr int64_t kInt32Limit = int64_t{1} << 31;

// columns[(n * out_h + oy) * out_w + ox, (ci * KH + i) * KW + j] =
// x[n, ci, oy * stride_h - pad_h + i, ox * stride_w - pad_w + j], zero outside
// x, for `images` images starting at x. The column order matches the weight's
// [Cout, Cin, KH, KW] flattening. One element per thread with 64-bit offsets:
// the fallback for inputs whose offsets do not fit the tiled kernel below
// (64-bit division makes it several times slower).
template <typename T>
__global__ void im2col_kernel(const T* x, T* columns, int64_t images, cpu::Conv2dShape s) {
  const int64_t patch = s.in_channels * s.kernel_h * s.kernel_w;
  const int64_t total = images * s.out_h * s.out_w * patch;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / patch;
    const int64_t col = i - row * patch;
    const int64_t ox = row % s.out_w;
    const int64_t oy = (row / s.out_w) % s.out_h;
    const int64_t n = row / (s.out_w * s.out_h);
    const int64_t j = col % s.kernel_w;
    const int64_t tap_i = (col / s.kernel_w) % s.kernel_h;
    const int64_t ci = col / (s.kernel_w * s.kernel_h);
    const int64_t iy = oy * s.stride_h - s.pad_h + tap_i;
    const int64_t ix = ox * s.stride_w - s.pad_w + j;
    const bool inside = iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w;
    columns[i] =
        inside ? x[((n * s.in_channels + ci) * s.in_h + iy) * s.in_w + ix] : from_float<T>(0.0f);
  }
}

// The same columns, a 32x32 tile (positions x columns) per block through
// shared memory: the gather reads neighbouring output positions (neighbouring
// input pixels) across a warp and the store writes neighbouring columns, so
// both sides are coalesced; the one-element-per-thread kernel above writes
// coalesced but reads nine channel planes per warp. All offsets of `x` fit
// in 32 bits (the caller checks); the column offsets are 64-bit.
constexpr int kIm2colTile = 32;
constexpr int kIm2colRows = 8;

template <typename T>
__global__ void im2col_tiled_kernel(const T* x, T* columns, int rows, int patch,
                                    cpu::Conv2dShape shape) {
  __shared__ T tile[kIm2colTile][kIm2colTile + 1];
  const int kernel_h = static_cast<int>(shape.kernel_h);
  const int kernel_w = static_cast<int>(shape.kernel_w);
  const int out_h = static_cast<int>(shape.out_h);
  const int out_w = static_cast<int>(shape.out_w);
  const int in_h = static_cast<int>(shape.in_h);
  const int in_w = static_cast<int>(shape.in_w);
  const int in_channels = static_cast<int>(shape.in_channels);
  const int row0 = blockIdx.x * kIm2colTile;
  const int col0 = blockIdx.y * kIm2colTile;

  const int row = row0 + threadIdx.x;
  int n = 0;
  int oy = 0;
  int ox = 0;
  if (row < rows) {
    ox = row % out_w;
    const int image_row = row / out_w;
    oy = image_row % out_h;
    n = image_row / out_h;
  }
  for (int c = threadIdx.y; c < kIm2colTile; c += kIm2colRows) {
    const int col = col0 + c;
    T value = from_float<T>(0.0f);
    if (row < rows && col < patch) {
      const int j = col % kernel_w;
      const int tap = col / kernel_w;
      const int i = tap % kernel_h;
      const int ci = tap / kernel_h;
      const int iy = oy * static_cast<int>(shape.stride_h) - static_cast<int>(shape.pad_h) + i;
      const int ix = ox * static_cast<int>(shape.stride_w) - static_cast<int>(shape.pad_w) + j;
      if (iy >= 0 && iy < in_h && ix >= 0 && ix < in_w) {
        value = x[((n * in_channels + ci) * in_h + iy) * in_w + ix];
      }
    }
    tile[c][threadIdx.x] = value;
  }
  __syncthreads();
  const int col = col0 + threadIdx.x;
  for (int r = threadIdx.y; r < kIm2colTile; r += kIm2colRows) {
    const int out_row = row0 + r;
    if (out_row < rows && col < patch) {
      columns[static_cast<int64_t>(out_row) * patch + col] = tile[threadIdx.x][r];
    }
  }
}

}  // namespace

void conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
            const cpu::Conv2dShape& shape) {
  const int64_t positions = shape.out_h * shape.out_w;
  const int64_t patch = shape.in_channels * shape.kernel_h * shape.kernel_w;
  if (shape.batch == 0 || shape.out_channels == 0 || positions == 0) return;
  const DType dtype = x.dtype();
  const Device device = x.device();
  CudaDeviceGuard guard(device.index);

  const int64_t image_bytes = positions * patch * static_cast<int64_t>(dtype_size(dtype));
  const int64_t chunk = std::clamp<int64_t>(kColumnBudgetBytes / image_bytes, 1, shape.batch);
  Tensor columns = Tensor::empty({chunk * positions, patch}, dtype, device);
  Tensor products = Tensor::empty({chunk * positions, shape.out_channels}, dtype, device);
  const int64_t image_elements = shape.in_channels * shape.in_h * shape.in_w;
  const size_t elem = dtype_size(dtype);
  for (int64_t first = 0; first < shape.batch; first += chunk) {
    const int64_t images = std::min(chunk, shape.batch - first);
    const int64_t rows = images * positions;
    const void* x_chunk = static_cast<const char*>(x.raw_data()) + first * image_elements * elem;
    const bool fits_int32 = rows * patch < kInt32Limit && images * image_elements < kInt32Limit;
    dispatch_float(dtype, "conv2d", [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x_chunk);
      T* dst = static_cast<T*>(columns.raw_data());
      const unsigned int blocks = grid_for(rows * patch);
      const int64_t row_tiles = (rows + kIm2colTile - 1) / kIm2colTile;
      const int64_t col_tiles = (patch + kIm2colTile - 1) / kIm2colTile;
      if (fits_int32 && col_tiles <= 65535) {
        const dim3 grid(static_cast<unsigned int>(row_tiles), static_cast<unsigned int>(col_tiles));
        im2col_tiled_kernel<T><<<grid, dim3(kIm2colTile, kIm2colRows), 0, current_stream()>>>(
            src, dst, static_cast<int>(rows), static_cast<int>(patch), shape);
      } else {
        im2col_kernel<T>
            <<<blocks, kThreadsPerBlock, 0, current_stream()>>>(src, dst, images, shape);
      }
    });
    check_launch("conv2d");
    linear(columns.raw_data(), weight.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
           products.raw_data(), dtype, device.index, rows, shape.out_channels, patch);
    // [images, Hout*Wout, Cout] -> [images, Cout, Hout*Wout] (NCHW).
    void* out_chunk =
        static_cast<char*>(out.raw_data()) + first * shape.out_channels * positions * elem;
    if (positions * shape.out_channels < kInt32Limit && images <= 65535) {
      dispatch_float(dtype, "conv2d", [&](auto tag) {
        using T = decltype(tag);
        const dim3 grid(static_cast<unsigned int>((shape.out_channels + kTile - 1) / kTile),
                        static_cast<unsigned int>((positions + kTile - 1) / kTile),
                        static_cast<unsigned int>(images));
        transpose_tiles_kernel<T><<<grid, dim3(kTile, kTileRows), 0, current_stream()>>>(
            static_cast<const T*>(products.raw_data()), static_cast<T*>(out_chunk),
            static_cast<int>(positions), static_cast<int>(shape.out_channels));
      });
      check_launch("conv2d");
    } else {
      out.narrow(0, first, images)
          .view({images, shape.out_channels, positions})
          .copy_(products.narrow(0, 0, rows)
                     .view({images, positions, shape.out_channels})
                     .transpose(1, 2));
    }
  }
}

}  // namespace oasr::ops::cuda
