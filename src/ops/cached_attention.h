// Attention of a decoder step's few queries over keys and values already in
// memory (an autoregressive KV cache, or the encoder's projected memory), in
// one pass that reads them where they are: no per-step copy of the cache into
// [rows, heads, tokens, head_dim], no score matrix in memory, and, for the
// fp8 KV cache (ops/kv_fp8.h), the e4m3 codes and their scales read directly.
//
// Definition, for query row r, head h, query i of n, and the keys it sees
// (j in [0, L): L = key_count, or key_count - n + i + 1 when causal), all in
// float32 with round-to-nearest (core/activations.h's fma_rn / add_rn / ...):
//
//   q_c     = float(query[r, i, h, c])
//   k_jc    = float(keys[b, j, h, c])                       served dtype T
//           = float(T(e4m3(code[b, j, h, c]) * scale[b, j, h]))  fp8 store: the value the
//                                                           dequantized cache would hold
//   s_j     = fma over c = 0, 1, ..., d-1 of q_c k_jc, from 0
//   m       = max_j s_j
//   e_j     = exp_f32(s_j - m)                             (core/activations.h, one body)
//   sum     = 32 partial sums p_l over j = l, l + 32, ... in order, then
//             p_l <- p_l + p_(l xor o) for o = 16, 8, 4, 2, 1; sum = p_0
//   a_g,c   = fma over j = g, g + 8, g + 16, ... of e_j v_jc, from 0   (g = 0 .. 7)
//   out[r, i, h, c] = T((((a_0,c + a_1,c) + (a_2,c + a_3,c)) + ((a_4,c + a_5,c) + (a_6,c + a_7,c)))
//                       / sum)
//
// with b = r / (R / B) the key row of query row r (beam search: the K beams
// of an utterance read its one encoder row), or b = key_rows[r] where a row
// map is given (greedy search after finished rows left). With past_tokens,
// L counts from the int32 the tensor holds where the kernel runs (causal
// only: key_count is then past_tokens[0] + n), so a recorded device graph
// replays each decoder step with that step's count (core/device_graph.h).
//
// Grouped heads (GQA): keys and values may hold KV heads with H % KV == 0;
// query head h then reads key head h / (H / KV) (transformers' repeat_kv).
//
// Paged keys (layers/paged_kv_cache.h): with a block table, keys and values
// are a pool of blocks [N, block_size, KV, d] and key j of query row r is
// slot j % block_size of block block_table[r, j / block_size]; key_counts
// (int32 [R], with or without a table) gives each row its own L (of its last
// query when causal), read where the attention runs; key_count bounds them
// all (the CPU refuses a count outside [n, or 1, key_count]; the CUDA body
// clamps it into that range, so a bad count cannot read outside the pool).
//
// The CPU body computes exactly this and the CUDA body
// (ops/cuda/cached_attention.h) in the same order, so they give the same
// bits; an fp8 store gives the same bits as the served-dtype store that
// holds its dequantized values. Each (r, h, i) reads only its own keys
// [0, L), so a row's result does not depend on its neighbours (batch
// invariance).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace oasr::ops {

struct CachedAttentionInputs {
  Tensor query;         // [R, n, H, d] in the served dtype T (float32 / float16 / bfloat16),
                        // already scaled; any strides with d contiguous
  Tensor keys;          // [B, >= key_count, KV, d] (paged: [N, block_size, KV, d]): T, or
                        // uint8 e4m3 codes with key_scales
  Tensor values;        // same form as keys
  Tensor key_scales;    // fp8: float32 [B, >= key_count, KV, 1] (paged: [N, block_size, KV,
                        // 1]); undefined otherwise
  Tensor value_scales;  // same
  int64_t key_count = 0;
  bool causal = false;  // query i of n sits at position key_count - n + i
  // Optional int64 [R] on the query's device: the key row of each query row
  // (any mapping; the caller checks its values lie in [0, B)).
  Tensor key_rows;
  // Optional int32 [1] on the query's device (causal only): the tokens before
  // this step's n, read when the attention runs. key_count then only bounds
  // it: the keys and values hold key_count >= past_tokens[0] + n tokens (a
  // count beyond that bound is clamped to it, so a bad count cannot read
  // outside the store).
  Tensor past_tokens;
  // Optional int32 [R, blocks_per_row] on the query's device: the pool block
  // of each row's block_size keys in order (entries past a row's count are
  // not read). keys / values (and scales) are then [N, block_size, KV, d].
  Tensor block_table;
  int64_t block_size = 0;
  // Optional int32 [R] on the query's device: each row's own key count.
  Tensor key_counts;
};

// Empty when the inputs follow the definition's shapes and dtypes, else the
// first reason they do not.
std::string cached_attention_refusal(const CachedAttentionInputs& in);

// Whether the CUDA kernel serves `in` (CUDA, d = 16, 32 or 64 with
// key_count <= 11264 or d = 128 with key_count <= 10240, 16-byte aligned
// rows): the Whisper decoder uses the unfused products otherwise; the
// Qwen2-Audio LM has no other path and refuses.
bool cached_attention_fusable(const CachedAttentionInputs& in);
// The part of that which the shapes decide (d and key_count), for
// a caller that must know before it builds inputs that it will get the
// kernel (a decoder step recorded as a device graph).
bool cached_attention_shape_fusable(int64_t head_dim, int64_t key_count);

// The definition above as [R, n, H * d] in T (heads merged in order). CPU
// (every dtype: the reference) or CUDA (where fusable); refuses anything else
// naming the reason.
Tensor cached_attention(const CachedAttentionInputs& in);

}  // namespace oasr::ops
