// Multi-head attention, written once for every architecture: WeNet's
// MultiHeadedAttention and RelPositionMultiHeadedAttention (U2++), Hugging
// Face's WhisperAttention. The architectures differ in what their upstream
// definitions name and round, which an AttentionSpec states: the projection
// names and biases in registration order (so state-dict paths stay the
// upstream's), and where 1 / sqrt(head_dim) is applied. Every projection is a
// layers::Linear, so quantization reaches all of them, and a fused attention
// kernel plugged in here serves every model (docs/architecture.md, "Layers").
//
// Masks are uint8 (nonzero = attend), broadcastable to the scores
// [B, H, Tq, Tk] with PyTorch's rule. Masked keys get probability exactly 0
// and a query with no key left attends to nothing (a zero context), as in
// WeNet. An undefined mask attends everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "layers/kv_cache.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace oasr::layers {

enum class AttentionProjection { kQuery, kKey, kValue, kOut };

// Where the score scale is applied; the two orders round differently.
enum class ScoreScaling {
  kScores,  // (q k^T) * scale: WeNet
  kQuery,   // (q * scale) k^T: Hugging Face Whisper
};

struct AttentionSpec {
  struct Projection {
    AttentionProjection role;
    std::string name;  // the upstream state-dict name ("linear_q", "q_proj")
    bool bias = true;
  };

  std::string type_name;  // the upstream class, for messages
  int64_t dim = 0;
  int64_t heads = 0;
  // All four roles once each, in the upstream's registration order.
  std::vector<Projection> projections;
  ScoreScaling scaling = ScoreScaling::kScores;
  // 1 / sqrt(head_dim) rounded to float32 the way the upstream computes it.
  float score_scale = 0.0f;
};

// The keys and values of a cross-attention memory, [B, heads, T, head_dim]
// (project_memory's layout): the served dtype, or, under the fp8 KV cache,
// uint8 float8_e4m3fn codes of that shape with float32 power-of-two scales
// [B, heads, T, 1] (one per token and head; ops/kv_fp8.h).
struct AttentionMemory {
  Tensor keys, values;
  Tensor key_scales, value_scales;  // fp8 only
  bool fp8() const { return key_scales.defined(); }
};

class MultiHeadAttention : public Module {
 public:
  explicit MultiHeadAttention(const AttentionSpec& spec);

  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }
  int64_t head_dim() const { return head_dim_; }
  const Linear& projection(AttentionProjection role) const;

  // Self- or cross-attention: query [B, Tq, D] attends over memory
  // [Bm, Tk, D] (keys and values are both projected from memory). Bm is B,
  // or 1 for one memory shared by all B queries (attention rescoring: N
  // hypotheses over one utterance), projected once, with the queries of all
  // rows in one product per head; the mask then has batch size 1.
  // query / memory: served-dtype tensors, or a pre-norm's 8-bit output for
  // the projections that read it (self-attention passes the same one twice).
  Tensor forward(const GemmInput& query, const GemmInput& memory, const Tensor& mask) const;

  // The KV-cache hooks of an autoregressive decoder.
  //
  // Causal self-attention over `cache`: x [R, n, D] holds n new positions per
  // row; their keys and values are appended to `layer` of the cache, and
  // query i attends the keys up to its own position.
  // past_tokens (optional): the cache's length() as an int32 [1] on the
  // device, which the append and the attention then read there (a recorded
  // device graph replays later steps with it refreshed). It needs the fused
  // kernel (CUDA, OASR_FUSED_ATTENTION on) and is refused without it.
  Tensor forward_cached(const Tensor& x, KvCache& cache, int64_t layer,
                        const Tensor& past_tokens = Tensor()) const;
  // Cross-attention memory, computed once per utterance: keys and values
  // [B, heads, T, head_dim] of an encoder output [B, T, D].
  std::pair<Tensor, Tensor> project_memory(const GemmInput& memory) const;
  // Cross-attention: x [R, n, D]; row r attends memory row cross_rows[r] of
  // `memory` (AttentionMemory, below). Rows reading the same memory row go
  // through one product per head, so R beams over one utterance never copy
  // its keys. fp8 memory is read in place by the CUDA kernel, and
  // dequantized (ops/kv_fp8.h) for the other paths.
  // device_rows (optional): cross_rows as an int64 [R] on the device, so the
  // fused kernel serves any mapping in one launch whose kernels do not
  // depend on it (a recorded device graph; greedy search after finished
  // rows left).
  Tensor forward_cross(const Tensor& x, const AttentionMemory& memory,
                       std::span<const int64_t> cross_rows,
                       const Tensor& device_rows = Tensor()) const;

  // A decoder step has a few rows (beams x utterances x new tokens): the
  // projections that see only a step's new tokens run the CPU row-dot linear
  // (ops/gemm.h), so a step's bits do not depend on how many rows share it.
  // `memory_too` adds key / value (self-attention), which cross-attention
  // leaves on BLAS for its long memory.
  void use_row_dot_projections(bool memory_too);

 protected:
  // ops::cached_attention of q [R, n, D] over keys / values [B, T, H, d]
  // (e4m3 codes with their scales, or undefined scales) through the output
  // projection, where it serves them (CUDA, the score scale in the query,
  // OASR_FUSED_ATTENTION on, the kernel's shapes); else undefined, and the
  // caller runs the unfused products.
  // key_rows / past_tokens: ops::CachedAttentionInputs' (optional).
  Tensor in_place_attention(const Tensor& q, const Tensor& keys, const Tensor& values,
                            const Tensor& key_scales, const Tensor& value_scales, int64_t key_count,
                            bool causal, const Tensor& key_rows = Tensor(),
                            const Tensor& past_tokens = Tensor()) const;
  // The query projection, times the score scale where the spec puts it
  // there: [B, T, D].
  Tensor project_query(const GemmInput& x) const;
  // softmax(scores) (masked) times v [B, H, Tk, d], heads merged:
  // [B, Tq, D], the output projection's input. `scores` carry the scale.
  Tensor context_from_scores(const Tensor& scores, const Tensor& v, const Tensor& mask) const;
  // The same from q [B, H, Tq, d] (split from project_query) and k / v
  // [B, H, Tk, d]: the scores first.
  Tensor context(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) const;
  // Scores q k^T with the scale applied where the spec says.
  Tensor scores(const Tensor& q, const Tensor& k) const;
  std::shared_ptr<Linear>& projection_slot(AttentionProjection role);
  void check_input(const Shape& shape, const char* what) const;

  int64_t dim_;
  int64_t heads_;
  int64_t head_dim_;
  ScoreScaling scaling_;
  float score_scale_;
  std::shared_ptr<Linear> query_;
  std::shared_ptr<Linear> key_;
  std::shared_ptr<Linear> value_;
  std::shared_ptr<Linear> out_;
};

// How the position term lines up with the keys.
enum class RelativeShift {
  // WeNet: one position row per key, p = linear_pos(rows of the keys).
  kNone,
  // Transformer-XL's rel_shift as NeMo computes it: pos_emb holds 2T - 1
  // rows for relative positions T-1 down to -(T-1), and query i, key j read
  // row (T - 1) - (i - j) of (q + pos_bias_v) p^T.
  kTransformerXl,
};

// Transformer-XL style self-attention:
//   scores = ((q + pos_bias_u) k^T + shift((q + pos_bias_v) p^T)) * scale,
// p = linear_pos(pos_emb), shift as RelativeShift says. With a streaming
// cache (WeNet) the keys and values are [cached frames, current frames].
// Scores are scaled (ScoreScaling::kScores); the spec's scaling field must
// say so.
class RelPositionMultiHeadAttention : public MultiHeadAttention {
 public:
  // `position_name`: the position projection's state-dict name (no bias);
  // the biases are the parameters pos_bias_u / pos_bias_v [heads, head_dim].
  RelPositionMultiHeadAttention(const AttentionSpec& spec, const std::string& position_name,
                                RelativeShift shift = RelativeShift::kNone);

  struct Output {
    Tensor out;    // [B, T, D]
    Tensor cache;  // [B, H, Tk, 2 head_dim]: keys then values (WeNet's layout); only on request
  };

  // x [B, T, D] (the served-dtype tensor or the pre-norm's 8-bit output,
  // shared by the query / key / value projections); pos_emb [1, Tk, D] with
  // Tk = cached frames + T (kTransformerXl: [1, 2T - 1, D], no cache);
  // att_cache undefined / empty or [B, H, cached, 2 head_dim] (the last
  // dimension holds keys then values).
  Output forward(const GemmInput& x, const Tensor& mask, const Tensor& pos_emb,
                 const Tensor& att_cache, bool return_cache) const;

 private:
  // The kTransformerXl forward (unfused products; no cache).
  Tensor shifted_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pos_emb,
                         const Tensor& mask) const;

  RelativeShift shift_;
  std::shared_ptr<Linear> position_;
};

}  // namespace oasr::layers
