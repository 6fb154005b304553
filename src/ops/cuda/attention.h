// CUDA body of ops/attention.h: WeNet's relative-position self-attention in
// one kernel, the scores never reaching memory.
//
// WeNet's rel-pos term has no shift, so per head
//   scores = ((q + u) . k^T + (q + v) . p^T) * scale = [q+u | q+v] . [k | p]^T * scale,
// a plain attention with a 128-wide query/key (two 64-wide halves) and a
// 64-wide value. One block holds 64 queries of one (batch row, head); it walks
// the keys in tiles of 64 with the online (running max) softmax, on mma.sync
// m16n8k16 in the served 16-bit dtype with float32 accumulation.
//
// Numerics, per query row: q+u and q+v are rounded once to the dtype; each
// score is one float32 dot product of 128 terms (the tensor core's order);
// e = 2^(score * scale * log2(e) - running max) by the SFU's ex2.approx
// (about 2 float32 ulps), rounded to the dtype before it multiplies v and
// before it is summed; the output is the
// float32 sum of e * v over the sum of e, rounded once. Against the unfused
// path (two rounded products, a rounded sum, a rounded softmax) this rounds
// less; against a float64 definition it is within a few dtype ulps of the
// largest |v|.
//
// Batch invariance: a block reads keys [0, bound) only, where bound is one past
// the last kept key of its query rows (the key count when there is no mask),
// in tiles starting at key 0; keys at or past bound are loaded as zeros and
// masked. So a row gives the same bits alone (unpadded, no mask) or inside a
// padded batch whose mask keeps its own keys, whatever its neighbours hold.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace oasr::ops::cuda {

inline constexpr int64_t kFusedAttentionHeadDim = 64;

// One [B, T, H, 64] operand: element (b, t, h, d) at
// data + b * batch_stride + t * step_stride + h * head_stride + d (elements).
struct AttentionOperand {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t step_stride = 0;
  int64_t head_stride = 0;
};

struct RelPositionAttentionArgs {
  AttentionOperand q;                // [B, Tq, H, 64]
  AttentionOperand k;                // [B, Tk, H, 64]
  AttentionOperand v;                // [B, Tk, H, 64]
  AttentionOperand p;                // [1, Tk, H, 64]: the projected positions, shared by the batch
  const void* pos_bias_u = nullptr;  // [H, 64], contiguous
  const void* pos_bias_v = nullptr;  // [H, 64], contiguous
  // nullptr keeps every key; else mask[b * mask_batch_stride + i * mask_query_stride + j]
  // nonzero keeps key j for query i of row b (mask_query_stride 0: one key mask per row).
  const uint8_t* mask = nullptr;
  int64_t mask_batch_stride = 0;
  int64_t mask_query_stride = 0;
  void* out = nullptr;  // [B, Tq, H * 64], contiguous; head h at columns [64h, 64h + 64)
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t query_steps = 0;
  int64_t key_steps = 0;
  float scale = 1.0f;
  DType dtype = DType::kF16;
  int device_index = 0;
};

// Whether the kernel serves `dtype` (float16, bfloat16) on sm_80 or newer.
bool rel_position_attention_supported(DType dtype, int device_index);

// The caller has checked shapes, dtypes, devices, and that every pointer and
// stride keeps 16-byte alignment (multiples of 8 elements).
void rel_position_attention(const RelPositionAttentionArgs& args);

}  // namespace oasr::ops::cuda
