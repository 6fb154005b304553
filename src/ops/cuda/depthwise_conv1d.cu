#include "ops/cuda/depthwise_conv1d.h"

#include "core/activations.h"
#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One thread per output element, consecutive threads on consecutive t so
// the loads of x and the store are coalesced. __fmul_rn/__fadd_rn keep the
// product and the sum separately rounded whatever -fmad says.
template <typename T>
__global__ void depthwise_conv1d_kernel(const T* x, const T* weight, const T* bias, T* out,
                                        int64_t rows, int64_t length, int64_t channels,
                                        int64_t kernel, int64_t pad_left, int64_t out_length) {
  const int64_t total = rows * out_length;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / out_length;  // b * channels + c
    const int64_t t = i - row * out_length;
    const int64_t c = row % channels;
    const T* signal = x + row * length;
    const T* taps = weight + c * kernel;
    float acc = 0.0f;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t source = t + k - pad_left;
      if (source < 0 || source >= length) continue;  // zero padding: no term
      acc = __fadd_rn(acc, __fmul_rn(to_float(taps[k]), to_float(signal[source])));
    }
    if (bias != nullptr) acc = __fadd_rn(acc, to_float(bias[c]));
    out[i] = from_float<T>(acc);
  }
}

// Channels-last with the GLU in front. A block owns kGluTimeTile outputs x
// kGluChannelTile channels of one batch row: it first forms every gated value
// its outputs read (glu_kernel's formula, ops/cuda/glu.cu, rounded to T) once
// into shared memory, halo included, so the sigmoid runs once per element
// rather than once per tap; then each output sums its taps in increasing k,
// skipping the zero padding, exactly as depthwise_conv1d_kernel does.
constexpr int kGluTimeTile = 64;
constexpr int kGluChannelTile = 64;
constexpr int kGluThreads = 256;

// kKernel > 0: the kernel width known at compile time. Each thread then owns
// kGluOutputsPerThread consecutive outputs of its channel and reads their
// kGluOutputsPerThread + kKernel - 1 gated values and its taps from shared
// memory once, into registers (15 reads of each per output before); the sums
// are the same operations in the same order.
constexpr int kGluOutputsPerThread = kGluTimeTile / (kGluThreads / kGluChannelTile);

template <typename T, int kKernel>
__global__ void __launch_bounds__(kGluThreads)
    glu_depthwise_channels_last_kernel(const T* x, const T* weight, const T* bias, T* out,
                                       int length, int channels, int kernel_arg, int pad_left,
                                       int out_length) {
  const int kernel = kKernel > 0 ? kKernel : kernel_arg;
  extern __shared__ float glu_shared[];
  const int span = kGluTimeTile + kernel - 1;         // gated rows the tile reads
  float* gated = glu_shared;                          // [span][kGluChannelTile]
  float* taps = glu_shared + span * kGluChannelTile;  // [kernel][kGluChannelTile]
  const int t0 = static_cast<int>(blockIdx.x) * kGluTimeTile;
  const int c0 = static_cast<int>(blockIdx.y) * kGluChannelTile;
  const int64_t b = blockIdx.z;
  const T* rows = x + b * length * 2 * static_cast<int64_t>(channels);
  const int lane_c = static_cast<int>(threadIdx.x) % kGluChannelTile;
  const int c = c0 + lane_c;
  for (int i = static_cast<int>(threadIdx.x); i < span * kGluChannelTile; i += kGluThreads) {
    const int r = i / kGluChannelTile;
    const int cc = c0 + i % kGluChannelTile;
    const int source = t0 + r - pad_left;
    float value = 0.0f;
    if (source >= 0 && source < length && cc < channels) {
      const T* row = rows + static_cast<int64_t>(source) * 2 * channels;
      const float gate = act::sigmoid(to_float(row[channels + cc]));
      value = to_float(from_float<T>(__fmul_rn(to_float(row[cc]), gate)));
    }
    gated[i] = value;
  }
  for (int i = static_cast<int>(threadIdx.x); i < kernel * kGluChannelTile; i += kGluThreads) {
    const int k = i / kGluChannelTile;
    const int cc = c0 + i % kGluChannelTile;
    taps[i] = cc < channels ? to_float(weight[static_cast<int64_t>(cc) * kernel + k]) : 0.0f;
  }
  __syncthreads();
  if (c >= channels) return;
  const float channel_bias = bias != nullptr ? to_float(bias[c]) : 0.0f;
  if constexpr (kKernel > 0) {
    const int first = static_cast<int>(threadIdx.x) / kGluChannelTile * kGluOutputsPerThread;
    float window[kGluOutputsPerThread + kKernel - 1];
#pragma unroll
    for (int i = 0; i < kGluOutputsPerThread + kKernel - 1; ++i) {
      window[i] = gated[(first + i) * kGluChannelTile + lane_c];
    }
    float w[kKernel];
#pragma unroll
    for (int k = 0; k < kKernel; ++k) w[k] = taps[k * kGluChannelTile + lane_c];
#pragma unroll
    for (int o = 0; o < kGluOutputsPerThread; ++o) {
      const int t = t0 + first + o;
      if (t >= out_length) break;
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kKernel; ++k) {
        const int source = t + k - pad_left;
        if (source < 0 || source >= length) continue;  // zero padding: no term
        acc = __fadd_rn(acc, __fmul_rn(w[k], window[o + k]));
      }
      if (bias != nullptr) acc = __fadd_rn(acc, channel_bias);
      out[(b * out_length + t) * channels + c] = from_float<T>(acc);
    }
  } else {
    for (int local = static_cast<int>(threadIdx.x) / kGluChannelTile; local < kGluTimeTile;
         local += kGluThreads / kGluChannelTile) {
      const int t = t0 + local;
      if (t >= out_length) break;
      float acc = 0.0f;
      for (int k = 0; k < kernel; ++k) {
        const int source = t + k - pad_left;
        if (source < 0 || source >= length) continue;  // zero padding: no term
        acc = __fadd_rn(acc, __fmul_rn(taps[k * kGluChannelTile + lane_c],
                                       gated[(local + k) * kGluChannelTile + lane_c]));
      }
      if (bias != nullptr) acc = __fadd_rn(acc, channel_bias);
      out[(b * out_length + t) * channels + c] = from_float<T>(acc);
    }
  }
}

}  // namespace

void glu_depthwise_conv1d_channels_last(const void* x, const void* weight, const void* bias,
                                        void* out, DType dtype, int device_index, int64_t batch,
                                        int64_t channels, int64_t length, int64_t kernel,
                                        int64_t pad_left, int64_t out_length) {
  if (batch * channels * out_length == 0) return;
  OASR_CHECK(kernel <= kMaxGluKernel && length < (int64_t{1} << 30) && batch <= 65535, kInternal,
             "glu_depthwise_conv1d_channels_last: kernel ", kernel, " (at most ", kMaxGluKernel,
             "), length ", length, " or batch ", batch,
             " is beyond the fused kernel (the front runs the unfused ops there)");
  CudaDeviceGuard guard(device_index);
  const size_t shared =
      static_cast<size_t>((kGluTimeTile + 2 * kernel - 1) * kGluChannelTile) * sizeof(float);
  const dim3 grid(static_cast<unsigned int>((out_length + kGluTimeTile - 1) / kGluTimeTile),
                  static_cast<unsigned int>((channels + kGluChannelTile - 1) / kGluChannelTile),
                  static_cast<unsigned int>(batch));
  dispatch_float(dtype, "glu_depthwise_conv1d_channels_last", [&](auto tag) {
    using T = decltype(tag);
    const auto run = [&](auto body) {
      body<<<grid, kGluThreads, shared, current_stream()>>>(
          static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
          static_cast<T*>(out), static_cast<int>(length), static_cast<int>(channels),
          static_cast<int>(kernel), static_cast<int>(pad_left), static_cast<int>(out_length));
    };
    // 15 taps: the Conformer's convolution module (WeNet's cnn_module_kernel).
    if (kernel == 15) {
      run(glu_depthwise_channels_last_kernel<T, 15>);
    } else {
      run(glu_depthwise_channels_last_kernel<T, 0>);
    }
  });
  check_launch("glu_depthwise_conv1d_channels_last");
}

void depthwise_conv1d(const void* x, const void* weight, const void* bias, void* out, DType dtype,
                      int device_index, int64_t batch, int64_t channels, int64_t length,
                      int64_t kernel, int64_t pad_left, int64_t out_length) {
  const int64_t total = batch * channels * out_length;
  if (total == 0) return;
  CudaDeviceGuard guard(device_index);
  dispatch_float(dtype, "depthwise_conv1d", [&](auto tag) {
    using T = decltype(tag);
    depthwise_conv1d_kernel<T><<<grid_for(total), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<T*>(out), batch * channels, length, channels, kernel, pad_left, out_length);
  });
  check_launch("depthwise_conv1d");
}

}  // namespace oasr::ops::cuda
