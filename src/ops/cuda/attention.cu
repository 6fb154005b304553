#include "ops/cuda/attention.h"

#include <cstring>
#include <type_traits>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

constexpr int kHeadDim = static_cast<int>(kFusedAttentionHeadDim);
constexpr int kQkDim = 2 * kHeadDim;  // [q+u | q+v] . [k | p]
constexpr int kBlockQueries = 64;     // 16 per warp
constexpr int kBlockKeys = 64;
constexpr int kWarps = kBlockQueries / 16;
constexpr int kThreads = kWarps * 32;
// Blocks an SM holds (registers and shared memory allow 4): the kernel is
// latency-bound, so more resident warps hide the tile loads.
constexpr int kBlocksPerSm = 4;
// Shared-memory pitches in elements: +8 puts the 8 rows a fragment load
// touches on distinct banks (each row starts 4 banks after the previous).
constexpr int kQkPitch = kQkDim + 8;
constexpr int kVtPitch = kBlockKeys + 8;
constexpr int kVector = 8;  // elements per 16-byte load
constexpr float kLog2e = 1.4426950408889634f;

// Two values rounded to T, the first in the low half: one mma operand register.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  const T pair[2] = {from_float<T>(lo), from_float<T>(hi)};
  uint32_t bits;
  memcpy(&bits, pair, sizeof(bits));
  return bits;
}

// d += a (16x16, row-major fragment) * b (16x8, column-major fragment).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 2^x with the SFU's ex2.approx.ftz (about 2 ulp): the weights are rounded
// to the 16-bit dtype next, so a correctly rounded exp2 would buy nothing.
// The instruction is deterministic on one GPU architecture (what batch
// invariance needs); PTX does not promise its bits across architectures.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ uint32_t load_pair(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// The value the dtype rounds x to, as float (what the tensor core multiplies).
template <typename T>
__device__ __forceinline__ float rounded(float x) {
  return to_float(from_float<T>(x));
}

template <typename T>
__device__ __forceinline__ const T* row_of(const AttentionOperand& op, int64_t b, int64_t t,
                                           int64_t h) {
  return static_cast<const T*>(op.data) + b * op.batch_stride + t * op.step_stride +
         h * op.head_stride;
}

// One past the last key any of the block's query rows keeps: every thread
// gets it. With no mask, every key.
__device__ int kept_key_bound(const RelPositionAttentionArgs& a, int64_t b, int first_query,
                              int queries, int* scratch) {
  if (a.mask == nullptr) return static_cast<int>(a.key_steps);
  const int keys = static_cast<int>(a.key_steps);
  const int rows = a.mask_query_stride == 0 ? 1 : queries;
  int bound = 0;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = a.mask + b * a.mask_batch_stride +
                         static_cast<int64_t>(first_query + r) * a.mask_query_stride;
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += kThreads) {
      if (row[j] != 0 && j + 1 > bound) bound = j + 1;
    }
  }
  if (threadIdx.x == 0) *scratch = 0;
  __syncthreads();
  atomicMax(scratch, bound);
  __syncthreads();
  return *scratch;
}

template <typename T>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    rel_position_attention_kernel(const RelPositionAttentionArgs a) {
  __shared__ __align__(16) T q_tile[kBlockQueries][kQkPitch];
  __shared__ __align__(16) T k_tile[kBlockKeys][kQkPitch];
  __shared__ __align__(16) T v_tile_t[kHeadDim][kVtPitch];  // transposed: [d][key]
  __shared__ int bound_scratch;

  const int64_t b = blockIdx.z;
  const int64_t h = blockIdx.y;
  const int first_query = static_cast<int>(blockIdx.x) * kBlockQueries;
  const int query_steps = static_cast<int>(a.query_steps);
  const int queries = min(kBlockQueries, query_steps - first_query);
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int group = lane >> 2;  // the fragment row (and column of B) this lane holds
  const int quad = lane & 3;    // the lane's pair of columns within a fragment

  // [q + u | q + v] for the block's queries, rounded once to T.
  const T* u = static_cast<const T*>(a.pos_bias_u) + h * kHeadDim;
  const T* w = static_cast<const T*>(a.pos_bias_v) + h * kHeadDim;
  for (int chunk = tid; chunk < kBlockQueries * (kQkDim / kVector); chunk += kThreads) {
    const int row = chunk / (kQkDim / kVector);
    const int col = (chunk % (kQkDim / kVector)) * kVector;
    const int d = col % kHeadDim;
    T values[kVector];
    if (row < queries) {
      const T* bias = col < kHeadDim ? u : w;
      T q[kVector];
      *reinterpret_cast<uint4*>(q) =
          *reinterpret_cast<const uint4*>(row_of<T>(a.q, b, first_query + row, h) + d);
      for (int e = 0; e < kVector; ++e) {
        values[e] = from_float<T>(to_float(q[e]) + to_float(bias[d + e]));
      }
    } else {
      for (int e = 0; e < kVector; ++e) values[e] = from_float<T>(0.0f);
    }
    *reinterpret_cast<uint4*>(&q_tile[row][col]) = *reinterpret_cast<const uint4*>(values);
  }
  const int bound = kept_key_bound(a, b, first_query, queries, &bound_scratch);
  __syncthreads();

  // The warp's 16 query rows; their A fragments are read from shared memory
  // at each step (registers are what limits the resident blocks).
  const int row0 = warp * 16 + group;

  float out_acc[kHeadDim / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's share; the quad's sum at the end
  const float scale_log2 = a.scale * kLog2e;
  const uint8_t* mask_rows[2] = {nullptr, nullptr};
  if (a.mask != nullptr) {
    for (int r = 0; r < 2; ++r) {
      // A query row past the end reads row 0's mask (its output is not stored).
      const int query = first_query + row0 + 8 * r;
      const int64_t i = query < query_steps ? query : 0;
      mask_rows[r] = a.mask + b * a.mask_batch_stride + i * a.mask_query_stride;
    }
  }

  for (int first_key = 0; first_key < bound; first_key += kBlockKeys) {
    __syncthreads();  // the previous tile's readers are done
    for (int chunk = tid; chunk < kBlockKeys * (kQkDim / kVector); chunk += kThreads) {
      const int row = chunk / (kQkDim / kVector);
      const int col = (chunk % (kQkDim / kVector)) * kVector;
      const int key = first_key + row;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (key < bound) {
        const T* src = col < kHeadDim ? row_of<T>(a.k, b, key, h) + col
                                      : row_of<T>(a.p, 0, key, h) + (col - kHeadDim);
        value = *reinterpret_cast<const uint4*>(src);
      }
      *reinterpret_cast<uint4*>(&k_tile[row][col]) = value;
    }
    for (int chunk = tid; chunk < kBlockKeys * (kHeadDim / kVector); chunk += kThreads) {
      const int row = chunk / (kHeadDim / kVector);
      const int col = (chunk % (kHeadDim / kVector)) * kVector;
      const int key = first_key + row;
      T values[kVector];
      if (key < bound) {
        *reinterpret_cast<uint4*>(values) =
            *reinterpret_cast<const uint4*>(row_of<T>(a.v, b, key, h) + col);
      } else {
        for (int e = 0; e < kVector; ++e) values[e] = from_float<T>(0.0f);
      }
      for (int e = 0; e < kVector; ++e) v_tile_t[col + e][row] = values[e];
    }
    __syncthreads();

    // Scores of the warp's 16 rows against the tile's 64 keys.
    float score[kBlockKeys / 8][4] = {};
    for (int ks = 0; ks < kQkDim / 16; ++ks) {
      const int c = ks * 16 + 2 * quad;
      const uint32_t q_frag[4] = {load_pair(&q_tile[row0][c]), load_pair(&q_tile[row0 + 8][c]),
                                  load_pair(&q_tile[row0][c + 8]),
                                  load_pair(&q_tile[row0 + 8][c + 8])};
      for (int nt = 0; nt < kBlockKeys / 8; ++nt) {
        const T* key_row = k_tile[nt * 8 + group];
        mma_16816<T>(score[nt], q_frag, load_pair(key_row + c), load_pair(key_row + c + 8));
      }
    }
    // Scale into log2 units; masked keys and keys past the bound are -inf.
    float tile_max[2] = {-INFINITY, -INFINITY};
    if (a.mask == nullptr && first_key + kBlockKeys <= bound) {
      // A whole tile of kept keys: the same values as the general branch.
      for (int nt = 0; nt < kBlockKeys / 8; ++nt) {
        for (int e = 0; e < 4; ++e) {
          score[nt][e] *= scale_log2;
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], score[nt][e]);
        }
      }
    } else {
      for (int nt = 0; nt < kBlockKeys / 8; ++nt) {
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const int key = first_key + nt * 8 + 2 * quad + (e & 1);
          const bool keep = key < bound && (mask_rows[r] == nullptr || mask_rows[r][key] != 0);
          score[nt][e] = keep ? score[nt][e] * scale_log2 : -INFINITY;
          tile_max[r] = fmaxf(tile_max[r], score[nt][e]);
        }
      }
    }
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);
      // Nothing kept so far: nothing to rescale (and -inf - -inf is NaN).
      const float alpha = new_max == -INFINITY ? 1.0f : fast_exp2(row_max[r] - new_max);
      row_max[r] = new_max;
      row_sum[r] *= alpha;
      for (int dn = 0; dn < kHeadDim / 8; ++dn) {
        out_acc[dn][2 * r] *= alpha;
        out_acc[dn][2 * r + 1] *= alpha;
      }
    }
    // e = 2^(s - max), rounded to T: the weight both sums use.
    for (int nt = 0; nt < kBlockKeys / 8; ++nt) {
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const float s = score[nt][e];
        const float weight = s == -INFINITY ? 0.0f : rounded<T>(fast_exp2(s - row_max[r]));
        score[nt][e] = weight;
        row_sum[r] += weight;
      }
    }
    // out += e . v, 16 keys per step: two score fragments make one A fragment.
    for (int kb = 0; kb < kBlockKeys / 16; ++kb) {
      const uint32_t weights[4] = {
          pack_pair<T>(score[2 * kb][0], score[2 * kb][1]),
          pack_pair<T>(score[2 * kb][2], score[2 * kb][3]),
          pack_pair<T>(score[2 * kb + 1][0], score[2 * kb + 1][1]),
          pack_pair<T>(score[2 * kb + 1][2], score[2 * kb + 1][3]),
      };
      const int c = kb * 16 + 2 * quad;
      for (int dn = 0; dn < kHeadDim / 8; ++dn) {
        const T* value_row = v_tile_t[dn * 8 + group];
        mma_16816<T>(out_acc[dn], weights, load_pair(value_row + c), load_pair(value_row + c + 8));
      }
    }
  }

  for (int r = 0; r < 2; ++r) {
    float total = row_sum[r];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const int query = first_query + row0 + 8 * r;
    if (query >= query_steps) continue;
    // A row with nothing kept is all zeros (WeNet's masked_fill after softmax).
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    T* out =
        static_cast<T*>(a.out) + (b * a.query_steps + query) * (a.heads * kHeadDim) + h * kHeadDim;
    for (int dn = 0; dn < kHeadDim / 8; ++dn) {
      const uint32_t pair =
          pack_pair<T>(out_acc[dn][2 * r] * inverse, out_acc[dn][2 * r + 1] * inverse);
      *reinterpret_cast<uint32_t*>(out + dn * 8 + 2 * quad) = pair;
    }
  }
}

}  // namespace

bool rel_position_attention_supported(DType dtype, int device_index) {
  return (dtype == DType::kF16 || dtype == DType::kBF16) && compute_capability(device_index) >= 80;
}

void rel_position_attention(const RelPositionAttentionArgs& args) {
  if (args.batch == 0 || args.query_steps == 0 || args.heads == 0) return;
  CudaDeviceGuard guard(args.device_index);
  const dim3 grid(static_cast<unsigned int>((args.query_steps + kBlockQueries - 1) / kBlockQueries),
                  static_cast<unsigned int>(args.heads), static_cast<unsigned int>(args.batch));
  if (args.dtype == DType::kF16) {
    rel_position_attention_kernel<__half><<<grid, kThreads, 0, current_stream()>>>(args);
  } else {
    rel_position_attention_kernel<__nv_bfloat16><<<grid, kThreads, 0, current_stream()>>>(args);
  }
  check_launch("rel_position_attention");
}

}  // namespace oasr::ops::cuda
