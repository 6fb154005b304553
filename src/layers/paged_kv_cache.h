// PagedKvCache: an autoregressive LM's self-attention keys and values for
// sequences that come and go (iteration-level batching, the Qwen2-Audio LM):
// one pool of fixed-size blocks per layer, a block table per sequence, so a
// sequence takes blocks as it grows and gives all of them back the moment it
// ends, and a step may hold any set of sequences of any lengths.
//
// Layout. Keys and values are two pools, each
//
//     [layer][block][slot][head][head_dim]      (row-major; dtype = Layout::dtype,
//                                                or uint8 e4m3 codes when fp8)
//
// with one float32 scale per (layer, block, slot, head) beside an fp8 pool
// (ops/kv_fp8.h's power-of-two scales, as layers::KvCache stores them).
// Token p of a sequence lives in slot p % block_size of block
// table[p / block_size]. Attention reads the pools in place through the
// step's block table and per-sequence key counts (ops/cached_attention.h).
//
// One forward over S sequences that each take n new tokens:
//
//     cache.begin_step(sequences, n);        // blocks for the new tokens; the step's table
//     for each layer l:
//       cache.append(l, k, v);               // k, v [S, n, heads, head_dim]
//       ops::cached_attention(cache.attention_inputs(l, q, /*causal=*/true));
//     cache.commit();                        // each sequence's length += n
//
// rollback() instead forgets the step (and gives back the blocks it took).
// Blocks are handed out lowest index first from a free list, so a run's
// placement is reproducible; where a block sits never changes a result.
//
// Beam search forks sequences (fork(source)): the new sequence shares the
// source's full blocks (a count of holders per block; a block is free when
// none holds it) and gets a copy of its partly filled last block, so a
// shared block is always full and never written again: tokens are appended
// only to a sequence's own last block or to new ones.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ops/cached_attention.h"

namespace oasr::layers {

class PagedKvCache {
 public:
  struct Layout {
    int64_t layers = 0;
    int64_t heads = 0;  // key / value heads
    int64_t head_dim = 0;
    int64_t block_size = 16;    // tokens a block
    int64_t blocks = 0;         // the pool, shared by all sequences
    DType dtype = DType::kF32;  // served dtype: float32, float16 or bfloat16
    Device device = Device::cpu();
    bool fp8 = false;  // e4m3 codes + one power-of-two scale per (token, head)
  };
  using SequenceId = int64_t;

  // Reserves the pools; refuses non-positive sizes and an unserved dtype.
  explicit PagedKvCache(const Layout& layout);

  const Layout& layout() const { return layout_; }
  int64_t bytes() const;  // the pools (and scales) together
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t blocks_for(int64_t tokens) const {
    return (tokens + layout_.block_size - 1) / layout_.block_size;
  }

  // A new, empty sequence (no blocks yet).
  SequenceId open();
  // A new sequence holding what `source` holds (see above: the full blocks
  // shared, the last partial one copied). Refused during a step, and
  // (kOutOfMemory, the cache unchanged) when no block is free for the copy.
  SequenceId fork(SequenceId source);
  // Gives the sequence's blocks back at once (a shared block when its last
  // holder lets go); the id is then unknown. Refused during a step that
  // holds it.
  void release(SequenceId sequence);
  int64_t length(SequenceId sequence) const;  // committed tokens
  int64_t sequences() const { return static_cast<int64_t>(sequences_.size()); }
  // Blocks a step of n more tokens for each of `sequences` would take.
  int64_t blocks_needed(std::span<const SequenceId> sequences, int64_t n) const;

  // Starts a step: n new tokens for each of the distinct `sequences`, in
  // that order (row s of append's tensors is sequences[s]). Takes the blocks
  // the new tokens need; refuses (kOutOfMemory, naming the need and the
  // free blocks, the cache unchanged) when the pool has too few.
  void begin_step(std::span<const SequenceId> sequences, int64_t n);
  // Writes the step's n tokens of `layer` (once per layer a step): keys /
  // values [S, n, heads, head_dim] or [S, n, heads * head_dim] in the served
  // dtype on the pool's device.
  void append(int64_t layer, const Tensor& keys, const Tensor& values);
  // The attention of `query` [S, n, query heads, head_dim] (already scaled)
  // over each sequence's tokens so far, this step's included, read in place.
  ops::CachedAttentionInputs attention_inputs(int64_t layer, const Tensor& query,
                                              bool causal) const;
  // The step's token positions, int64 [S, n] (length + i) on the pool's device.
  const Tensor& positions() const { return step_positions_; }
  void commit();    // every layer appended: lengths += n
  void rollback();  // forgets the step and gives back the blocks it took

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int64_t length = 0;
  };
  Sequence& find(SequenceId sequence, const char* what);
  const Sequence& find(SequenceId sequence, const char* what) const;
  // Layer `layer` of a pool as [blocks * block_size, inner * heads] rows.
  Tensor slot_rows(const Tensor& pool, int64_t layer) const;
  bool in_step() const { return !step_sequences_.empty(); }
  void give_back(std::span<const int32_t> blocks);  // one holder fewer each

  Layout layout_;
  Tensor keys_, values_;              // [layers, blocks, block_size, heads, head_dim]
  Tensor key_scales_, value_scales_;  // fp8: float32 [layers, blocks, block_size, heads, 1]
  std::vector<int32_t> free_;         // descending, so back() is the lowest free block
  std::vector<int32_t> holders_;      // per block: the sequences holding it
  std::unordered_map<SequenceId, Sequence> sequences_;
  SequenceId next_id_ = 0;
  // The step in progress.
  std::vector<SequenceId> step_sequences_;
  int64_t step_tokens_ = 0;
  std::vector<int32_t> step_taken_;  // blocks this step took (given back on rollback)
  std::vector<int64_t> layer_appended_;
  Tensor step_slots_;      // int64 [S * n]: the pool slot of each new token
  Tensor step_table_;      // int32 [S, blocks of the longest]
  Tensor step_counts_;     // int32 [S]: length + n
  Tensor step_positions_;  // int64 [S, n]
  int64_t step_max_keys_ = 0;
};

}  // namespace oasr::layers
