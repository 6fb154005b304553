#include "ops/cuda/cached_attention.h"

#include <algorithm>
#include <cfloat>

#include "core/activations.h"
#include "core/cuda/device_guard.h"
#include "core/float_types.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

using act::exp_f32;
using act::detail::add_rn;
using act::detail::div_rn;
using act::detail::fma_rn;
using act::detail::mul_rn;
using act::detail::sub_rn;

constexpr int kThreads = 128;
// The weighted sum: the definition's 8 interleaved key groups, 16 threads a
// group, d / 16 adjacent columns a thread (d = 16, 32, 64 or 128; 4 for
// d = 64: one 8-byte float16 load per key).
constexpr int kValueGroups = 8;
constexpr int kGroupThreads = kThreads / kValueGroups;
template <int kHeadDim>
constexpr int kColumns = kHeadDim / kGroupThreads;

// The scores' max: exact in any order; a NaN score is skipped, as the CPU
// body's std::max skips it.
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Element (b, t, h, 0) of a [B, T, H, d] operand: data + b sb + t st + h sh.
struct Operand {
  const void* data = nullptr;
  int64_t sb = 0, st = 0, sh = 0;
};

struct Args {
  Operand query, keys, values, key_scales, value_scales;
  void* out = nullptr;
  const int64_t* key_rows = nullptr;     // the key row of each query row, or r / per_key_row
  const int32_t* past_tokens = nullptr;  // the count read here (a graph replays each step's)
  const int32_t* key_counts = nullptr;   // each row's own count
  const int32_t* block_table = nullptr;  // paged: [R, table_stride] pool blocks
  int64_t table_stride = 0;
  int block_size = 0;
  int64_t key_batch = 1;  // B (or the pool's blocks): an index outside is clamped into it
  int64_t per_key_row = 1;
  int steps = 1;
  int heads = 1;
  int group = 1;      // query heads per key head
  int key_count = 0;  // the keys seen, or their bound with past_tokens
  bool causal = false;
};

// L of the definition for the last query of row r (ops/cached_attention.h):
// clamped to [steps, key_count] with past_tokens, as the CPU body clamps it;
// a row's own count clamped to [steps or 1, key_count] (the CPU refuses
// one outside).
__device__ __forceinline__ int seen_keys(const Args& a, int64_t r) {
  if (a.key_counts != nullptr)
    return min(max(a.key_counts[r], a.causal ? a.steps : 1), a.key_count);
  if (a.past_tokens == nullptr) return a.key_count;
  return min(max(*a.past_tokens + a.steps, a.steps), a.key_count);
}

// Key j of query row r: (store row or pool block, token).
struct Place {
  int64_t b;
  int t;
};

__device__ __forceinline__ Place place(const Args& a, int64_t r, int64_t b, int j) {
  if (a.block_table == nullptr) return {b, j};
  const int64_t block = a.block_table[r * a.table_stride + j / a.block_size];
  return {min(max(block, int64_t{0}), a.key_batch - 1), j % a.block_size};
}

template <typename T>
__device__ __forceinline__ const T* element(const Operand& o, int64_t b, int64_t t, int64_t h) {
  return static_cast<const T*>(o.data) + b * o.sb + t * o.st + h * o.sh;
}

// The dequantized store's value: float(T(e4m3(code) * scale)).
template <typename T>
__device__ __forceinline__ float dequantized(uint8_t code, float scale) {
  return to_float(from_float<T>(mul_rn(e4m3_bits_to_f32(code), scale)));
}

// s_j: one fma chain over the d dims of key row j, in order.
template <typename T, bool kFp8, int kHeadDim>
__device__ __forceinline__ float score(const Args& a, const float* query, Place p, int h) {
  const int64_t b = p.b;
  const int j = p.t;
  float s = 0.0f;
  if constexpr (kFp8) {
    const float scale = *element<float>(a.key_scales, b, j, h);
    const uint4* row = reinterpret_cast<const uint4*>(element<uint8_t>(a.keys, b, j, h));
#pragma unroll
    for (int v = 0; v < kHeadDim / 16; ++v) {
      const uint4 chunk = row[v];
      const uint8_t* codes = reinterpret_cast<const uint8_t*>(&chunk);
#pragma unroll
      for (int e = 0; e < 16; ++e)
        s = fma_rn(query[v * 16 + e], dequantized<T>(codes[e], scale), s);
    }
  } else {
    constexpr int kPer = 16 / sizeof(T);
    const uint4* row = reinterpret_cast<const uint4*>(element<T>(a.keys, b, j, h));
#pragma unroll
    for (int v = 0; v < kHeadDim / kPer; ++v) {
      const uint4 chunk = row[v];
      const T* values = reinterpret_cast<const T*>(&chunk);
#pragma unroll
      for (int e = 0; e < kPer; ++e) s = fma_rn(query[v * kPer + e], to_float(values[e]), s);
    }
  }
  return s;
}

// v_jc for the d / 16 columns from c0 of key row j, one load.
template <typename T, bool kFp8, int kHeadDim>
__device__ __forceinline__ void values_at(const Args& a, Place p, int h, int c0,
                                          float (&v)[kColumns<kHeadDim>]) {
  constexpr int kCols = kColumns<kHeadDim>;
  if constexpr (kFp8) {
    const float scale = *element<float>(a.value_scales, p.b, p.t, h);
    struct alignas(kCols) Codes {
      uint8_t x[kCols];
    };
    const Codes codes =
        *reinterpret_cast<const Codes*>(element<uint8_t>(a.values, p.b, p.t, h) + c0);
#pragma unroll
    for (int k = 0; k < kCols; ++k) v[k] = dequantized<T>(codes.x[k], scale);
  } else {
    // At most 16-byte alignment: rows are 16-byte aligned (the fusable check).
    struct alignas(kCols * sizeof(T) < 16 ? kCols * sizeof(T) : 16) Run {
      T x[kCols];
    };
    const Run run = *reinterpret_cast<const Run*>(element<T>(a.values, p.b, p.t, h) + c0);
#pragma unroll
    for (int k = 0; k < kCols; ++k) v[k] = to_float(run.x[k]);
  }
}

template <typename T, bool kFp8, int kHeadDim>
__global__ void __launch_bounds__(kThreads) cached_attention_kernel(Args a) {
  constexpr int kCols = kColumns<kHeadDim>;
  extern __shared__ float weights[];  // s_j, then e_j
  __shared__ float query[kHeadDim];
  __shared__ float scratch[32];  // block_reduce's
  __shared__ float group_sums[kValueGroups][kHeadDim];
  __shared__ float total;
  const int h = static_cast<int>(blockIdx.x);
  const int i = static_cast<int>(blockIdx.y);
  const int64_t r = blockIdx.z;
  // The caller checks the map on the host (forward_cross); the clamp keeps a
  // mistake from reading outside the memory.
  const int64_t b = a.key_rows != nullptr ? min(max(a.key_rows[r], int64_t{0}), a.key_batch - 1)
                                          : r / a.per_key_row;
  const int kv = h / a.group;
  const int key_count = seen_keys(a, r);
  const int seen = a.causal ? key_count - a.steps + i + 1 : key_count;
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32;
  if (t < kHeadDim) query[t] = to_float(element<T>(a.query, r, i, h)[t]);
  __syncthreads();

  float m = -FLT_MAX;
  for (int j = t; j < seen; j += kThreads) {
    const float s = score<T, kFp8, kHeadDim>(a, query, place(a, r, b, j), kv);
    weights[j] = s;
    m = fmaxf(m, s);
  }
  m = block_reduce(m, MaxOp{}, -FLT_MAX, scratch);
  for (int j = t; j < seen; j += kThreads) weights[j] = exp_f32(sub_rn(weights[j], m));
  __syncthreads();

  if (t < 32) {
    float partial = 0.0f;
    for (int j = lane; j < seen; j += 32) partial = add_rn(partial, weights[j]);
    partial = warp_reduce(partial, SumOp{});  // the definition's butterfly, xor 16 .. 1
    if (lane == 0) total = partial;
  }
  const int g = t / kGroupThreads;
  const int c0 = (t % kGroupThreads) * kCols;
  float acc[kCols] = {};
  for (int j = g; j < seen; j += kValueGroups) {
    const float w = weights[j];
    float v[kCols];
    values_at<T, kFp8, kHeadDim>(a, place(a, r, b, j), kv, c0, v);
#pragma unroll
    for (int k = 0; k < kCols; ++k) acc[k] = fma_rn(w, v[k], acc[k]);
  }
#pragma unroll
  for (int k = 0; k < kCols; ++k) group_sums[g][c0 + k] = acc[k];
  __syncthreads();
  if (t < kHeadDim) {
    const auto s = [&](int group) { return group_sums[group][t]; };
    const float sum = add_rn(add_rn(add_rn(s(0), s(1)), add_rn(s(2), s(3))),
                             add_rn(add_rn(s(4), s(5)), add_rn(s(6), s(7))));
    T* out = static_cast<T*>(a.out) + ((r * a.steps + i) * a.heads + h) * kHeadDim;
    out[t] = from_float<T>(div_rn(sum, total));
  }
}

Operand operand(const Tensor& t) {
  if (!t.defined()) return {};
  const auto& s = t.strides();
  return {t.raw_data(), s[0], s[1], s[2]};
}

}  // namespace

void cached_attention(const CachedAttentionInputs& in, const Tensor& out) {
  const Tensor& q = in.query;
  Args a;
  a.query = operand(q);
  a.keys = operand(in.keys);
  a.values = operand(in.values);
  a.key_scales = operand(in.key_scales);
  a.value_scales = operand(in.value_scales);
  a.out = out.raw_data();
  a.per_key_row = in.block_table.defined() ? 1 : std::max<int64_t>(q.size(0) / in.keys.size(0), 1);
  if (in.key_counts.defined()) a.key_counts = in.key_counts.data<int32_t>();
  if (in.block_table.defined()) {
    a.block_table = in.block_table.data<int32_t>();
    a.table_stride = in.block_table.strides()[0];
    a.block_size = static_cast<int>(in.block_size);
  }
  a.group = static_cast<int>(q.size(2) / in.keys.size(2));
  if (in.key_rows.defined()) a.key_rows = in.key_rows.data<int64_t>();
  a.key_batch = in.keys.size(0);
  if (in.past_tokens.defined()) a.past_tokens = in.past_tokens.data<int32_t>();
  a.steps = static_cast<int>(q.size(1));
  a.heads = static_cast<int>(q.size(2));
  a.key_count = static_cast<int>(in.key_count);
  a.causal = in.causal;
  const bool fp8 = in.keys.dtype() == DType::kU8;
  CudaDeviceGuard guard(q.device().index);
  const dim3 grid(static_cast<unsigned int>(q.size(2)), static_cast<unsigned int>(q.size(1)),
                  static_cast<unsigned int>(q.size(0)));
  const size_t shared = static_cast<size_t>(in.key_count) * sizeof(float);
  const auto launch = [&](auto kernel) { kernel<<<grid, kThreads, shared, current_stream()>>>(a); };
  dispatch_float(q.dtype(), "cached_attention", [&](auto tag) {
    using T = decltype(tag);
    switch (q.size(3)) {
      case 16:
        fp8 ? launch(cached_attention_kernel<T, true, 16>)
            : launch(cached_attention_kernel<T, false, 16>);
        break;
      case 32:
        fp8 ? launch(cached_attention_kernel<T, true, 32>)
            : launch(cached_attention_kernel<T, false, 32>);
        break;
      case 64:
        fp8 ? launch(cached_attention_kernel<T, true, 64>)
            : launch(cached_attention_kernel<T, false, 64>);
        break;
      default:  // 128 (cached_attention_fusable)
        fp8 ? launch(cached_attention_kernel<T, true, 128>)
            : launch(cached_attention_kernel<T, false, 128>);
    }
  });
  check_launch("cached_attention");
}

}  // namespace oasr::ops::cuda
