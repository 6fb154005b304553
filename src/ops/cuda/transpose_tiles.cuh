// A batched 2-d transpose through shared memory, shared by the convolution
// bodies (ops/cuda/conv2d.cu, ops/cuda/conv2d_nhwc.cu).
#pragma once

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {

// out[b, c, p] = in[b, p, c] for `images` matrices of [positions, channels]:
// a 32x32 tile through shared memory so both the reads and the writes are
// coalesced (the generic strided copy writes one of them with a stride).
constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <typename T>
__global__ void transpose_tiles_kernel(const T* in, T* out, int positions, int channels) {
  __shared__ T tile[kTile][kTile + 1];  // +1: no shared-memory bank conflicts
  const int image = blockIdx.z;
  const T* src = in + static_cast<int64_t>(image) * positions * channels;
  T* dst = out + static_cast<int64_t>(image) * positions * channels;
  const int c = blockIdx.x * kTile + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int p = blockIdx.y * kTile + r;
    if (p < positions && c < channels) tile[r][threadIdx.x] = src[p * channels + c];
  }
  __syncthreads();
  const int p = blockIdx.y * kTile + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int c_out = blockIdx.x * kTile + r;
    if (p < positions && c_out < channels) dst[c_out * positions + p] = tile[threadIdx.x][r];
  }
}

// Launches transpose_tiles_kernel over `images` matrices (in chunks of the
// grid's 65535 z-blocks); positions * channels must fit 32 bits.
template <typename T>
void transpose_tiles(const T* in, T* out, int64_t images, int positions, int channels) {
  constexpr int64_t kMaxImages = 65535;
  const int64_t matrix = static_cast<int64_t>(positions) * channels;
  for (int64_t first = 0; first < images; first += kMaxImages) {
    const int64_t count = images - first < kMaxImages ? images - first : kMaxImages;
    const dim3 grid(static_cast<unsigned int>((channels + kTile - 1) / kTile),
                    static_cast<unsigned int>((positions + kTile - 1) / kTile),
                    static_cast<unsigned int>(count));
    transpose_tiles_kernel<T><<<grid, dim3(kTile, kTileRows), 0, current_stream()>>>(
        in + first * matrix, out + first * matrix, positions, channels);
  }
}

}  // namespace oasr::ops::cuda
