// Channels-last convolution bodies (ops/cuda/conv2d.h, conv2d_nhwc).
#include <algorithm>

#include "core/cuda/device_guard.h"
#include "ops/cuda/activation.h"
#include "ops/cuda/conv2d.h"
#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/gemm.h"
#include "ops/cuda/transpose_tiles.cuh"

namespace oasr::ops::cuda {
namespace {

constexpr int kChannelsPerThread = 8;
constexpr int kMaxDirectTaps = 32;            // wider patches (KH * KW * Cin) go through the GEMM
constexpr int kMaxDirectWeights = 8192;       // floats of weight staged in shared memory
constexpr unsigned int kDirectBlocks = 1024;  // ~8 per SM on an H100/H200
constexpr int64_t kInt32Limit = int64_t{1} << 31;
// As ops/cuda/conv2d.cu: the gathered columns cover whole images up to this
// budget (at least one image), so memory stays bounded for large batches.
constexpr int64_t kColumnBudgetBytes = int64_t{256} << 20;

template <typename T>
struct alignas(sizeof(T) * kChannelsPerThread) Vec8 {
  T v[kChannelsPerThread];
};

// The convolution's geometry in the index type I: int32_t where every offset
// fits (64-bit division costs several times more), else int64_t.
template <typename I>
struct Geometry {
  I in_h, in_w, in_channels, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  __device__ explicit Geometry(const cpu::Conv2dShape& s)
      : in_h(static_cast<I>(s.in_h)),
        in_w(static_cast<I>(s.in_w)),
        in_channels(static_cast<I>(s.in_channels)),
        out_h(static_cast<I>(s.out_h)),
        out_w(static_cast<I>(s.out_w)),
        kernel_h(static_cast<I>(s.kernel_h)),
        kernel_w(static_cast<I>(s.kernel_w)),
        stride_h(static_cast<I>(s.stride_h)),
        stride_w(static_cast<I>(s.stride_w)),
        pad_h(static_cast<I>(s.pad_h)),
        pad_w(static_cast<I>(s.pad_w)) {}

  struct Output {
    I n, oy, ox;
  };
  // The output pixel of position (n * out_h + oy) * out_w + ox.
  __device__ Output output(I position) const {
    return {position / (out_w * out_h), (position / out_w) % out_h, position % out_w};
  }
  // The input pixel (n * in_h + iy) * in_w + ix that tap (i, j) of `o` reads,
  // or -1 where the tap falls on the zero padding.
  __device__ I input_pixel(const Output& o, I i, I j) const {
    const I iy = o.oy * stride_h - pad_h + i;
    const I ix = o.ox * stride_w - pad_w + j;
    return iy >= 0 && iy < in_h && ix >= 0 && ix < in_w ? (o.n * in_h + iy) * in_w + ix : I{-1};
  }
};

// out[n, oy, ox, co] = relu?(bias[co] + sum over (i, j, c) of
// w[co, (i * KW + j) * Cin + c] * x[n, oy*sh - ph + i, ox*sw - pw + j, c]),
// summed in that order. One thread: one position, 8 consecutive output
// channels (one 16-byte store for 16-bit types), so a warp writes a position's
// channels contiguously and reads one patch (a broadcast). The weights sit in
// shared memory as float, tap-major ([tap][Cout]): a thread's 8 channels of a
// tap are two adjacent float4.
template <typename T, typename I>
__global__ void direct_conv_kernel(const T* x, const T* weight, const T* bias, T* out,
                                   cpu::Conv2dShape shape, I positions, bool relu) {
  const Geometry<I> s(shape);
  extern __shared__ float4 w_shared_vectors[];
  float* w_shared = reinterpret_cast<float*>(w_shared_vectors);
  const int taps = static_cast<int>(s.kernel_h * s.kernel_w * s.in_channels);
  const int cout = static_cast<int>(shape.out_channels);
  for (int i = threadIdx.x; i < taps * cout; i += blockDim.x) {
    const int co = i / taps;
    const int t = i - co * taps;
    w_shared[t * cout + co] = to_float(weight[i]);
  }
  __syncthreads();
  const int groups = cout / kChannelsPerThread;
  const I work = positions * groups;
  for (I item = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; item < work;
       item += static_cast<I>(gridDim.x) * blockDim.x) {
    const int group = static_cast<int>(item % groups);
    const I position = item / groups;
    const auto o = s.output(position);
    float acc[kChannelsPerThread] = {};
    int tap = 0;
    for (I i = 0; i < s.kernel_h; ++i) {
      for (I j = 0; j < s.kernel_w; ++j) {
        const I pixel = s.input_pixel(o, i, j);
        const T* src = x + pixel * s.in_channels;
        for (I c = 0; c < s.in_channels; ++c, ++tap) {
          const float value = pixel >= 0 ? to_float(src[c]) : 0.0f;
          const float4* w =
              reinterpret_cast<const float4*>(w_shared + tap * cout + group * kChannelsPerThread);
          const float4 lo = w[0];
          const float4 hi = w[1];
          acc[0] = fmaf(lo.x, value, acc[0]);
          acc[1] = fmaf(lo.y, value, acc[1]);
          acc[2] = fmaf(lo.z, value, acc[2]);
          acc[3] = fmaf(lo.w, value, acc[3]);
          acc[4] = fmaf(hi.x, value, acc[4]);
          acc[5] = fmaf(hi.y, value, acc[5]);
          acc[6] = fmaf(hi.z, value, acc[6]);
          acc[7] = fmaf(hi.w, value, acc[7]);
        }
      }
    }
    Vec8<T> result;
    for (int e = 0; e < kChannelsPerThread; ++e) {
      float sum = acc[e];
      if (bias != nullptr) sum += to_float(bias[group * kChannelsPerThread + e]);
      if (relu) sum = fmaxf(sum, 0.0f);
      result.v[e] = from_float<T>(sum);
    }
    *reinterpret_cast<Vec8<T>*>(out + position * cout + group * kChannelsPerThread) = result;
  }
}

// The single-channel 3x3 case (Cin = 1: the first subsampling stage): each thread keeps its 8
// channels' weights in registers and walks positions, so nothing is restaged per position. Same
// sums as direct_conv_kernel (tap order, fmaf, bias, ReLU, one rounding), so the same bits. Needs
// 256 % (Cout / 8) == 0 (a block's threads cover whole positions).
template <typename T, typename I, int kKernelH, int kKernelW>
__global__ void __launch_bounds__(kThreadsPerBlock)
    single_channel_conv_kernel(const T* x, const T* weight, const T* bias, T* out,
                               cpu::Conv2dShape shape, I positions, bool relu) {
  const Geometry<I> s(shape);
  const int cout = static_cast<int>(shape.out_channels);
  const int groups = cout / kChannelsPerThread;
  const int group = static_cast<int>(threadIdx.x) % groups;
  const int per_block = kThreadsPerBlock / groups;  // positions a block covers per step
  constexpr int kTaps = kKernelH * kKernelW;        // compile-time: the weights stay in registers
  float w[kTaps][kChannelsPerThread];
  float b[kChannelsPerThread];
  for (int e = 0; e < kChannelsPerThread; ++e) {
    const int co = group * kChannelsPerThread + e;
    for (int t = 0; t < kTaps; ++t) w[t][e] = to_float(weight[co * kTaps + t]);
    b[e] = bias != nullptr ? to_float(bias[co]) : 0.0f;
  }
  for (I position = static_cast<I>(blockIdx.x) * per_block + static_cast<I>(threadIdx.x) / groups;
       position < positions; position += static_cast<I>(gridDim.x) * per_block) {
    const auto o = s.output(position);
    float acc[kChannelsPerThread] = {};
#pragma unroll
    for (int i = 0; i < kKernelH; ++i) {
#pragma unroll
      for (int j = 0; j < kKernelW; ++j) {
        const I pixel = s.input_pixel(o, static_cast<I>(i), static_cast<I>(j));
        const float value = pixel >= 0 ? to_float(x[pixel]) : 0.0f;
#pragma unroll
        for (int e = 0; e < kChannelsPerThread; ++e) {
          acc[e] = fmaf(w[i * kKernelW + j][e], value, acc[e]);
        }
      }
    }
    Vec8<T> result;
    for (int e = 0; e < kChannelsPerThread; ++e) {
      float sum = acc[e];
      if (bias != nullptr) sum += b[e];
      if (relu) sum = fmaxf(sum, 0.0f);
      result.v[e] = from_float<T>(sum);
    }
    *reinterpret_cast<Vec8<T>*>(out + position * cout + group * kChannelsPerThread) = result;
  }
}

// columns[row, (i * KW + j) * Cin + c] = x[n, oy*sh - ph + i, ox*sw - pw + j, c]
// (zero outside x) for `rows` positions starting at image 0 of x. One thread
// copies 8 channels (16 bytes for 16-bit types); Cin % 8 == 0.
template <typename T, typename I>
__global__ void gather_columns_kernel(const T* x, T* columns, I rows, cpu::Conv2dShape shape) {
  const Geometry<I> s(shape);
  const I vectors_per_tap = s.in_channels / kChannelsPerThread;
  const I vectors_per_row = s.kernel_h * s.kernel_w * vectors_per_tap;
  const I total = rows * vectors_per_row;
  for (I item = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; item < total;
       item += static_cast<I>(gridDim.x) * blockDim.x) {
    const I row = item / vectors_per_row;
    const I in_row = item - row * vectors_per_row;
    const I tap = in_row / vectors_per_tap;
    const I c = (in_row - tap * vectors_per_tap) * kChannelsPerThread;
    const I j = tap % s.kernel_w;
    const I i = tap / s.kernel_w;
    const I pixel = s.input_pixel(s.output(row), i, j);
    Vec8<T> value;
    if (pixel >= 0) {
      value = *reinterpret_cast<const Vec8<T>*>(x + pixel * s.in_channels + c);
    } else {
      for (int e = 0; e < kChannelsPerThread; ++e) value.v[e] = from_float<T>(0.0f);
    }
    *reinterpret_cast<Vec8<T>*>(columns + row * vectors_per_row * kChannelsPerThread +
                                tap * s.in_channels + c) = value;
  }
}

int64_t taps_of(const cpu::Conv2dShape& s) {
  return s.kernel_h * s.kernel_w * s.in_channels;
}

}  // namespace

bool conv2d_nhwc_served(int64_t in_channels, int64_t out_channels, int64_t kernel_h,
                        int64_t kernel_w, DType dtype) {
  if (dtype != DType::kF16 && dtype != DType::kBF16 && dtype != DType::kF32) return false;
  if (out_channels % kChannelsPerThread != 0 || out_channels <= 0) return false;
  const int64_t taps = kernel_h * kernel_w * in_channels;
  const bool direct = taps <= kMaxDirectTaps && taps * out_channels <= kMaxDirectWeights;
  return direct || in_channels % kChannelsPerThread == 0;
}

void conv2d_nhwc(const Tensor& x, const Tensor& weight_krsc, const Tensor& bias, const Tensor& out,
                 const cpu::Conv2dShape& shape, bool relu) {
  const int64_t positions = shape.batch * shape.out_h * shape.out_w;
  if (positions == 0) return;
  const DType dtype = x.dtype();
  const Device device = x.device();
  CudaDeviceGuard guard(device.index);
  const int64_t taps = taps_of(shape);
  if (taps <= kMaxDirectTaps && taps * shape.out_channels <= kMaxDirectWeights) {
    dispatch_float(dtype, "conv2d_nhwc", [&](auto tag) {
      using T = decltype(tag);
      const size_t shared = static_cast<size_t>(taps * shape.out_channels) * sizeof(float);
      // Each block stages the whole weight, so a bounded grid (several
      // blocks per SM, grid-striding) amortises it over many positions.
      const unsigned int blocks =
          std::min(grid_for(positions * (shape.out_channels / kChannelsPerThread)), kDirectBlocks);
      const T* bias_data = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
      const int64_t groups = shape.out_channels / kChannelsPerThread;
      if (shape.in_channels == 1 && shape.kernel_h == 3 && shape.kernel_w == 3 &&
          kThreadsPerBlock % groups == 0 && x.numel() < kInt32Limit && out.numel() < kInt32Limit) {
        const int64_t per_block = kThreadsPerBlock / groups;
        const unsigned int single_blocks = static_cast<unsigned int>(
            std::min<int64_t>((positions + per_block - 1) / per_block, kDirectBlocks));
        single_channel_conv_kernel<T, int32_t, 3, 3>
            <<<single_blocks, kThreadsPerBlock, 0, current_stream()>>>(
                static_cast<const T*>(x.raw_data()), static_cast<const T*>(weight_krsc.raw_data()),
                bias_data, static_cast<T*>(out.raw_data()), shape, static_cast<int32_t>(positions),
                relu);
      } else if (x.numel() < kInt32Limit && out.numel() < kInt32Limit) {
        direct_conv_kernel<T, int32_t><<<blocks, kThreadsPerBlock, shared, current_stream()>>>(
            static_cast<const T*>(x.raw_data()), static_cast<const T*>(weight_krsc.raw_data()),
            bias_data, static_cast<T*>(out.raw_data()), shape, static_cast<int32_t>(positions),
            relu);
      } else {
        direct_conv_kernel<T, int64_t><<<blocks, kThreadsPerBlock, shared, current_stream()>>>(
            static_cast<const T*>(x.raw_data()), static_cast<const T*>(weight_krsc.raw_data()),
            bias_data, static_cast<T*>(out.raw_data()), shape, positions, relu);
      }
    });
    check_launch("conv2d_nhwc");
    return;
  }
  const size_t elem = dtype_size(dtype);
  const int64_t image_positions = shape.out_h * shape.out_w;
  const int64_t image_bytes = image_positions * taps * static_cast<int64_t>(elem);
  const int64_t chunk = std::clamp<int64_t>(kColumnBudgetBytes / image_bytes, 1, shape.batch);
  Tensor columns = Tensor::empty({chunk * image_positions, taps}, dtype, device);
  const int64_t image_elements = shape.in_h * shape.in_w * shape.in_channels;
  for (int64_t first = 0; first < shape.batch; first += chunk) {
    const int64_t images = std::min(chunk, shape.batch - first);
    const int64_t rows = images * image_positions;
    cpu::Conv2dShape part = shape;
    part.batch = images;
    dispatch_float(dtype, "conv2d_nhwc", [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data()) + first * image_elements;
      const unsigned int blocks = grid_for(rows * taps / kChannelsPerThread);
      if (images * image_elements < kInt32Limit && rows * taps < kInt32Limit) {
        gather_columns_kernel<T, int32_t><<<blocks, kThreadsPerBlock, 0, current_stream()>>>(
            src, static_cast<T*>(columns.raw_data()), static_cast<int32_t>(rows), part);
      } else {
        gather_columns_kernel<T, int64_t><<<blocks, kThreadsPerBlock, 0, current_stream()>>>(
            src, static_cast<T*>(columns.raw_data()), rows, part);
      }
    });
    check_launch("conv2d_nhwc");
    void* out_rows = static_cast<char*>(out.raw_data()) +
                     first * image_positions * shape.out_channels * static_cast<int64_t>(elem);
    linear(columns.raw_data(), weight_krsc.raw_data(), bias.defined() ? bias.raw_data() : nullptr,
           out_rows, dtype, device.index, rows, shape.out_channels, taps);
  }
  if (relu) activation(out, out, Activation::kRelu);
}

void flatten_channel_major(const Tensor& y, const Tensor& out) {
  if (y.numel() == 0) return;
  CudaDeviceGuard guard(y.device().index);
  const int64_t images = y.size(0) * y.size(1);
  dispatch_float(y.dtype(), "flatten_nhwc_channel_major", [&](auto tag) {
    using T = decltype(tag);
    transpose_tiles<T>(static_cast<const T*>(y.raw_data()), static_cast<T*>(out.raw_data()), images,
                       static_cast<int>(y.size(2)), static_cast<int>(y.size(3)));
  });
  check_launch("flatten_nhwc_channel_major");
}

}  // namespace oasr::ops::cuda
