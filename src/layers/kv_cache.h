// KvCache: an autoregressive decoder's self-attention keys and values (the
// Whisper decoder's), as one component with an explicit layout and a fixed
// capacity, so that a different storage (the fp8 KV cache of a later issue:
// e4m3 values plus one scale per (token, head)) changes this class and not
// the decoder.
//
// Layout. Keys and values are two separate buffers, each
//
//     [layer][row][token][head][head_dim]          (row-major, dtype = Layout::dtype)
//
// of layers x rows x capacity_tokens x heads x head_dim elements, reserved
// at construction and never grown. A "row" is one decoding hypothesis (a beam
// or a batch entry); all rows hold the same number of tokens. Token-major
// inside a row keeps one token's heads together, which is what a per-(token,
// head) fp8 scale needs and what an append writes in one contiguous run.
//
// One decode step of n tokens:
//
//     for each layer l:
//       cache.append(l, k, v);           // k, v [rows, n, heads, head_dim] (or [rows, n,
//       heads*head_dim]) KvCache::View kv = cache.read(l);  // tokens [0, length() + n): the past
//       and the new ones
//       ... attention ...
//     cache.commit();                    // length() += n (every layer must have appended n)
//
// rollback() drops the uncommitted tokens of a failed step. The decoder never
// touches the buffers: it appends and reads through this interface, in the
// storage dtype on the storage device (float32 on the CPU; the served
// float16 / bfloat16 / float32 on CUDA). The CPU float32 store moves rows
// with memcpy; any other store with tensor copies (strided on the device).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace oasr::layers {

class KvCache {
 public:
  struct Layout {
    int64_t layers = 0;
    int64_t heads = 0;
    int64_t head_dim = 0;
    int64_t rows = 0;
    int64_t capacity_tokens = 0;  // tokens per row, fixed at creation
    DType dtype = DType::kF32;    // served dtype: float32, float16 or bfloat16
    Device device = Device::cpu();
    // The fp8 KV cache (spec "FP8 KV cache", ops/kv_fp8.h): store e4m3 codes
    // with one power-of-two scale per (token, head), quantized as a token is
    // appended; append() still takes and read() still gives `dtype`, the
    // read dequantized exactly. About half the bytes of float16 (1 + 4 /
    // head_dim bytes an element).
    bool fp8 = false;
  };

  // Reserves the storage; refuses non-positive sizes and an unserved dtype.
  explicit KvCache(const Layout& layout);

  const Layout& layout() const { return layout_; }
  int64_t length() const { return length_; }  // tokens committed (same for all rows)
  int64_t capacity() const { return layout_.capacity_tokens; }
  int64_t rows() const { return layout_.rows; }
  int64_t bytes() const;  // storage reserved for keys and values together

  // Writes n new tokens of `layer` after the ones it already holds (the
  // committed ones plus any appended earlier in this step). keys / values:
  // [rows, n, heads, head_dim] or [rows, n, heads * head_dim] in the storage
  // dtype, on the storage device. Refuses a write past the capacity, naming it.
  //
  // past_tokens (optional, a device store only): length() as an int32 [1] on
  // the storage device; the write then reads its position there (ops/
  // step_tokens.h), so a recorded device graph replays the step at the
  // position of each later step. Only a layer's first append of a step may
  // pass it (the position is the committed length).
  void append(int64_t layer, const Tensor& keys, const Tensor& values,
              const Tensor& past_tokens = Tensor());

  // Tokens [0, tokens(layer)) of `layer` as [rows, heads, tokens, head_dim]
  // in the storage dtype (contiguous, one batched GEMM operand per row and
  // head): copies in the attention's order; an fp8 store would dequantize
  // here.
  struct View {
    Tensor keys;
    Tensor values;
  };
  View read(int64_t layer) const;
  int64_t tokens(int64_t layer) const;  // committed + appended this step

  // The layer's storage as it is, for attention that reads it in place
  // (ops/cached_attention.h) instead of read()'s copy: keys and values
  // [rows, capacity, heads, head_dim] in the served dtype, or uint8 e4m3
  // codes with float32 scales [rows, capacity, heads, 1] (undefined for a
  // served-dtype store). Tokens [0, tokens(layer)) hold data.
  struct Stored {
    Tensor keys;
    Tensor values;
    Tensor key_scales;
    Tensor value_scales;
  };
  Stored stored(int64_t layer) const;

  // Ends a step: every layer must hold the same number of tokens; length()
  // becomes that number.
  void commit();
  // Forgets what was appended since the last commit (a failed step).
  void rollback();
  // The host's count after a replayed device graph wrote n tokens to every
  // layer (appended and committed on the device): length() += n. Refuses n
  // past the capacity, and a step with uncommitted tokens.
  void advance(int64_t n);
  // Keeps the first `tokens` committed tokens (0 <= tokens <= length()) and
  // forgets the rest, committed or not: a device graph's recording runs the
  // host's side of a step (this count included) without running its kernels,
  // so a recording that is declined steps back before the step runs eagerly.
  void truncate(int64_t tokens);
  // Empties the cache for the next utterance (the storage stays reserved).
  void clear();

  // Beam search: afterwards row r holds what row source_rows[r] held before
  // (for every layer, keys and values). source_rows has one entry per row,
  // each in [0, rows); a row may be the source of several rows. Refused with
  // uncommitted tokens.
  void reorder_rows(std::span<const int64_t> source_rows);

  // Keeps only `rows` (strictly ascending indices of current rows, at least
  // one): row i becomes what row rows[i] was, and rows() becomes rows.size().
  // The storage stays reserved. Refused with uncommitted tokens.
  void retain_rows(std::span<const int64_t> rows);

 private:
  int64_t token_elements() const { return layout_.heads * layout_.head_dim; }
  int64_t row_elements() const { return layout_.capacity_tokens * token_elements(); }
  int64_t layer_elements() const { return layout_.rows * row_elements(); }
  void check_layer(int64_t layer, const char* what) const;
  // The CPU float32 store (memcpy paths), or any other (tensor copies).
  bool host_f32() const {
    return layout_.device.is_cpu() && layout_.dtype == DType::kF32 && !layout_.fp8;
  }
  // Layer `layer` of `store` as [rows, capacity, heads, inner] for the
  // current row count (rows shrink with retain_rows; the layer stride too);
  // inner is the store's last dimension: head_dim, or 1 for the fp8 scales.
  Tensor layer_view(const Tensor& store, int64_t layer) const;
  // Row `row` of `layer` (all of it, [capacity, heads, inner]) at the
  // flat row index layer * rows_in_layer + row.
  Tensor row_view(const Tensor& store, int64_t flat_row) const;
  // Every buffer: keys and values, plus their scales in an fp8 cache.
  std::vector<Tensor*> stores();
  // Tokens [0, count) of `layer` as [rows, count, heads, head_dim] in the
  // served dtype (dequantized from an fp8 store).
  Tensor served_tokens(const Tensor& store, const Tensor& scales, int64_t layer,
                       int64_t count) const;

  Layout layout_;
  Tensor keys_;    // [layers, rows, capacity, heads, head_dim]: dtype, or uint8 e4m3 codes
  Tensor values_;  // same
  Tensor key_scales_, value_scales_;  // fp8: float32 [layers, rows, capacity, heads, 1]
  int64_t length_ = 0;
  std::vector<int64_t> layer_tokens_;  // per layer: committed + appended this step
};

}  // namespace oasr::layers
