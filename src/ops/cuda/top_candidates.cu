#include "ops/cuda/top_candidates.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

constexpr int kThreads = 512;

struct Ranked {
  float value;
  int64_t token;
};

// a before b: larger value, then smaller token.
__device__ __forceinline__ bool before(const Ranked& a, const Ranked& b) {
  return a.value > b.value || (a.value == b.value && a.token < b.token);
}

__device__ __forceinline__ Ranked warp_best(Ranked r) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    Ranked other;
    other.value = __shfl_down_sync(0xffffffffu, r.value, offset);
    other.token = __shfl_down_sync(0xffffffffu, r.token, offset);
    if (before(other, r)) r = other;
  }
  return r;
}

// fn(j, float(src[j])) for this thread's elements j = threadIdx.x + i *
// blockDim.x in ascending order, kInFlight loads issued before their values
// are used: one block serves a whole row, so each thread's chain of loads
// and not the bandwidth bounds the kernel (103 us a step at 16 x 51864 with
// one load in flight, ncu on an H100).
constexpr int kInFlight = 8;

template <typename T, typename Fn>
__device__ __forceinline__ void for_each_in_row(const T* src, int64_t vocab, Fn&& fn) {
  const int64_t step = blockDim.x;
  int64_t j = threadIdx.x;
  for (; j + (kInFlight - 1) * step < vocab; j += kInFlight * step) {
    float v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = to_float(src[j + u * step]);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) fn(j + u * step, v[u]);
  }
  for (; j < vocab; j += step) fn(j, to_float(src[j]));
}

template <typename T>
__global__ void top_candidates_kernel(const T* x, int64_t vocab, const uint8_t* suppressed,
                                      const float* offsets, int k, bool by_log_prob, float* values,
                                      int64_t* tokens, float* log_probs) {
  __shared__ float scratch[32];
  __shared__ Ranked warp_winners[kThreads / 32];
  __shared__ Ranked winner;
  const float kNegInf = -__int_as_float(0x7f800000);
  const int64_t row = blockIdx.x;
  const T* src = x + row * vocab;

  float local_max = kNegInf;
  for_each_in_row(src, vocab, [&](int64_t, float v) { local_max = nan_max(local_max, v); });
  const float row_max = block_reduce(local_max, NanMaxOp{}, kNegInf, scratch);
  float local_sum = 0.0f;
  for_each_in_row(src, vocab, [&](int64_t, float v) {
    local_sum = __fadd_rn(local_sum, expf(__fsub_rn(v, row_max)));
  });
  const float log_total = logf(block_reduce(local_sum, SumOp{}, 0.0f, scratch));
  const float offset = offsets != nullptr ? offsets[row] : 0.0f;

  const auto rank_of = [&](int64_t j, float v) {
    float r = by_log_prob ? __fadd_rn(__fsub_rn(__fsub_rn(v, row_max), log_total), offset) : v;
    if ((suppressed != nullptr && suppressed[j] != 0) || isnan(r)) r = kNegInf;
    return r;
  };

  Ranked last{0.0f, -1};
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < k; ++i) {
    // Every token after `last` in the order; -inf values stay eligible by
    // token, so suppressed tokens come last, in token order.
    Ranked best{kNegInf, INT64_MAX};
    for_each_in_row(src, vocab, [&](int64_t j, float v) {
      const Ranked c{rank_of(j, v), j};
      const bool after_last = i == 0 || before(last, c);
      if (after_last && before(c, best)) best = c;
    });
    best = warp_best(best);
    if (lane == 0) warp_winners[warp] = best;
    __syncthreads();
    if (warp == 0) {
      Ranked w = lane < static_cast<int>(blockDim.x / 32) ? warp_winners[lane]
                                                          : Ranked{kNegInf, INT64_MAX};
      w = warp_best(w);
      if (lane == 0) winner = w;
    }
    __syncthreads();
    last = winner;
    if (threadIdx.x == 0) {
      values[row * k + i] = last.value;
      tokens[row * k + i] = last.token;
      log_probs[row * k + i] = __fsub_rn(__fsub_rn(to_float(src[last.token]), row_max), log_total);
    }
    __syncthreads();
  }
}

}  // namespace

void top_candidates(const Tensor& x, const Tensor& suppressed, const Tensor& offsets, int64_t k,
                    bool by_log_prob, const Tensor& values, const Tensor& tokens,
                    const Tensor& log_probs) {
  const int64_t rows = x.size(0);
  const int64_t vocab = x.size(1);
  if (rows == 0) return;
  use_device(x.device().index);
  dispatch_float(x.dtype(), "top_candidates", [&](auto tag) {
    using T = decltype(tag);
    top_candidates_kernel<T><<<static_cast<unsigned int>(rows), kThreads, 0, current_stream()>>>(
        static_cast<const T*>(x.raw_data()), vocab,
        suppressed.defined() ? static_cast<const uint8_t*>(suppressed.raw_data()) : nullptr,
        offsets.defined() ? static_cast<const float*>(offsets.raw_data()) : nullptr,
        static_cast<int>(k), by_log_prob, static_cast<float*>(values.raw_data()),
        static_cast<int64_t*>(tokens.raw_data()), static_cast<float*>(log_probs.raw_data()));
  });
  check_launch("top_candidates");
}

}  // namespace oasr::ops::cuda
