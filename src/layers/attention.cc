#include "layers/attention.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/env.h"
#include "core/error.h"
#include "ops/attention.h"
#include "ops/cached_attention.h"
#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/kv_fp8.h"
#include "ops/softmax.h"

namespace oasr::layers {
namespace {

bool host_float(const Tensor& x) {
  return x.device().is_cpu() && x.dtype() == DType::kF32;
}

// Score matrices of at least this many entries per (batch row, head) are
// made in slices on the host (see MultiHeadAttention::context and
// relative_context below).
constexpr int64_t kSliceScores = int64_t{1} << 16;
// Queries per slice of the relative-position attention: its working set is
// a few [kQueryBlock, Tk] float32 matrices (8 MB each at Tk = 4000).
constexpr int64_t kQueryBlock = 512;

// The unfused relative-position attention on the host, one (batch row, head,
// block of queries) at a time: probs(scale * (q_u k^T + q_v p^T)) v into
// [B, H, Tq, d]. The batched form holds B * H * Tq * Tk floats several times
// over (four 400 MB tensors per layer for 200 s of U2++ audio); a slice
// holds kQueryBlock * Tk. Each slice's products, sum, scaling and softmax
// are what the batched ops compute for its rows -- ops::matmul runs one GEMM
// per batch entry and a GEMM row's fma chain does not depend on the other
// rows; the sum and scaling are elementwise and the softmax is per row -- so
// the bits agree. `mask`: undefined or uint8 [B or 1, 1, Tq or 1, Tk].
Tensor relative_context(const Tensor& q_u, const Tensor& q_v, const Tensor& k_heads,
                        const Tensor& v_heads, const Tensor& p_heads, const Tensor& mask,
                        float score_scale) {
  const int64_t batch = q_u.size(0), heads = q_u.size(1), tq = q_u.size(2);
  Tensor out = Tensor::empty({batch, heads, tq, v_heads.size(3)}, DType::kF32);
  for (int64_t b = 0; b < batch; ++b) {
    Tensor row_mask;
    if (mask.defined()) row_mask = mask.size(0) == 1 ? mask : mask.narrow(0, b, 1);
    for (int64_t h = 0; h < heads; ++h) {
      const Tensor k_slice = k_heads.narrow(0, b, 1).narrow(1, h, 1);
      const Tensor v_slice = v_heads.narrow(0, b, 1).narrow(1, h, 1);
      const Tensor p_slice = p_heads.narrow(1, h, 1);
      for (int64_t r0 = 0; r0 < tq; r0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, tq - r0);
        const Tensor content = ops::matmul(q_u.narrow(0, b, 1).narrow(1, h, 1).narrow(2, r0, rows),
                                           k_slice, /*transpose_b=*/true);
        const Tensor position =
            ops::matmul(q_v.narrow(0, b, 1).narrow(1, h, 1).narrow(2, r0, rows), p_slice, true);
        const Tensor scores = ops::scale(ops::add(content, position), score_scale);
        Tensor probs;
        if (row_mask.defined()) {
          const Tensor m = row_mask.size(2) == 1 ? row_mask : row_mask.narrow(2, r0, rows);
          probs = ops::masked_softmax(scores, m);
        } else {
          probs = ops::softmax(scores);
        }
        out.narrow(0, b, 1).narrow(1, h, 1).narrow(2, r0, rows).copy_(ops::matmul(probs, v_slice));
      }
    }
  }
  return out;
}

// [B, T, H * d] -> contiguous [B, H, T, d]. On the host in float32 whole
// head_dim runs move at once (Tensor's generic strided copy moves one element
// at a time); elsewhere the strided copy. Both only copy, so the bits agree.
Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t batch = x.size(0);
  const int64_t steps = x.size(1);
  const int64_t d = x.size(2) / heads;
  if (!host_float(x)) return x.view({batch, steps, heads, d}).transpose(1, 2).contiguous();
  const Tensor c = x.contiguous();
  Tensor out = Tensor::empty({batch, heads, steps, d}, DType::kF32);
  const float* src = c.data<float>();
  float* dst = out.data<float>();
  const size_t run = static_cast<size_t>(d) * sizeof(float);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(dst + ((b * heads + h) * steps + t) * d,
                    src + ((b * steps + t) * heads + h) * d, run);
      }
    }
  }
  return out;
}

// [B, H, T, d] -> contiguous [B, T, H * d].
Tensor merge_heads(const Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t heads = x.size(1);
  const int64_t steps = x.size(2);
  const int64_t d = x.size(3);
  if (!host_float(x)) return x.transpose(1, 2).contiguous().view({batch, steps, heads * d});
  const Tensor c = x.contiguous();
  Tensor out = Tensor::empty({batch, steps, heads * d}, DType::kF32);
  const float* src = c.data<float>();
  float* dst = out.data<float>();
  const size_t run = static_cast<size_t>(d) * sizeof(float);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < steps; ++t) {
        std::memcpy(dst + ((b * steps + t) * heads + h) * d,
                    src + ((b * heads + h) * steps + t) * d, run);
      }
    }
  }
  return out;
}

const char* role_name(AttentionProjection role) {
  switch (role) {
    case AttentionProjection::kQuery:
      return "query";
    case AttentionProjection::kKey:
      return "key";
    case AttentionProjection::kValue:
      return "value";
    case AttentionProjection::kOut:
      return "output";
  }
  return "?";
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionSpec& spec)
    : Module(spec.type_name),
      dim_(spec.dim),
      heads_(spec.heads),
      head_dim_(spec.heads > 0 ? spec.dim / spec.heads : 0),
      scaling_(spec.scaling),
      score_scale_(spec.score_scale) {
  OASR_CHECK(spec.heads > 0 && spec.dim > 0 && spec.dim % spec.heads == 0, kInvalidArgument,
             spec.type_name, ": width ", spec.dim, " is not a multiple of the head count ",
             spec.heads);
  OASR_CHECK(spec.score_scale > 0.0f, kInternal, spec.type_name, ": no score scale given");
  for (const AttentionSpec::Projection& p : spec.projections) {
    auto linear = register_module(p.name, std::make_shared<Linear>(dim_, dim_, p.bias));
    std::shared_ptr<Linear>& slot = projection_slot(p.role);
    OASR_CHECK(slot == nullptr, kInternal, spec.type_name, ": two ", role_name(p.role),
               " projections");
    slot = std::move(linear);
  }
  for (AttentionProjection role : {AttentionProjection::kQuery, AttentionProjection::kKey,
                                   AttentionProjection::kValue, AttentionProjection::kOut}) {
    OASR_CHECK(projection_slot(role) != nullptr, kInternal, spec.type_name, ": no ",
               role_name(role), " projection");
  }
}

std::shared_ptr<Linear>& MultiHeadAttention::projection_slot(AttentionProjection role) {
  switch (role) {
    case AttentionProjection::kQuery:
      return query_;
    case AttentionProjection::kKey:
      return key_;
    case AttentionProjection::kValue:
      return value_;
    case AttentionProjection::kOut:
      break;
  }
  return out_;
}

const Linear& MultiHeadAttention::projection(AttentionProjection role) const {
  return *const_cast<MultiHeadAttention*>(this)->projection_slot(role);
}

void MultiHeadAttention::use_row_dot_projections(bool memory_too) {
  query_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  out_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  if (memory_too) {
    key_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
    value_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  }
}

void MultiHeadAttention::check_input(const Shape& shape, const char* what) const {
  OASR_CHECK(shape.size() == 3 && shape[2] == dim_, kInvalidArgument, path(), ": ", what,
             " must be [batch, tokens, ", dim_, "], got ", shape_str(shape));
}

Tensor MultiHeadAttention::project_query(const GemmInput& x) const {
  const Tensor q = query_->forward(x);
  return scaling_ == ScoreScaling::kQuery ? ops::scale(q, score_scale_) : q;
}

Tensor MultiHeadAttention::scores(const Tensor& q, const Tensor& k) const {
  const Tensor products = ops::matmul(q, k, /*transpose_b=*/true);
  return scaling_ == ScoreScaling::kScores ? ops::scale(products, score_scale_) : products;
}

Tensor MultiHeadAttention::context_from_scores(const Tensor& scores, const Tensor& v,
                                               const Tensor& mask) const {
  const Tensor probs = mask.defined() ? ops::masked_softmax(scores, mask) : ops::softmax(scores);
  return merge_heads(ops::matmul(probs, v));
}

// Large score matrices without a mask (Whisper's encoder: 1500 x 1500 per
// head) are made one (batch, head) slice at a time on the host: the batched
// form would hold B * H * Tq * Tk floats at once (54 MB per utterance,
// 432 MB at batch 8), far beyond the caches, while one slice (9 MB) stays in
// L3 between its three passes. Every slice's products, scaling and softmax
// are the ones the batched ops compute for it (ops::matmul runs one GEMM per
// batch entry; scaling is elementwise, softmax per row), so the bits agree.
Tensor MultiHeadAttention::context(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& mask) const {
  const int64_t slices = q.size(0) * q.size(1);
  const int64_t tq = q.size(2), tk = k.size(2), d = q.size(3);
  if (mask.defined() || slices == 1 || tq * tk < kSliceScores || !host_float(q)) {
    return context_from_scores(scores(q, k), v, mask);
  }
  const Tensor qs = q.contiguous().view({slices, tq, d});
  const Tensor ks = k.contiguous().view({slices, tk, d});
  const Tensor vs = v.contiguous().view({slices, tk, v.size(3)});
  Tensor heads = Tensor::empty({slices, tq, v.size(3)}, DType::kF32);
  for (int64_t i = 0; i < slices; ++i) {
    const Tensor slice_scores = scores(qs.narrow(0, i, 1), ks.narrow(0, i, 1));
    heads.narrow(0, i, 1).copy_(ops::matmul(ops::softmax(slice_scores), vs.narrow(0, i, 1)));
  }
  return merge_heads(heads.view({q.size(0), q.size(1), tq, v.size(3)}));
}

Tensor MultiHeadAttention::forward(const GemmInput& query, const GemmInput& memory,
                                   const Tensor& mask) const {
  check_input(query.shape(), "query");
  check_input(memory.shape(), "memory");
  const int64_t batch = query.size(0);
  const int64_t steps = query.size(1);
  const int64_t memory_batch = memory.size(0);
  OASR_CHECK(memory_batch == batch || memory_batch == 1, kInvalidArgument, path(),
             ": memory batch ", memory_batch, " must equal the query batch ", batch, " or be 1");
  const Tensor k = split_heads(key_->forward(memory), heads_);
  const Tensor v = split_heads(value_->forward(memory), heads_);
  const Tensor q = project_query(query);
  if (memory_batch == batch) return out_->forward(context(split_heads(q, heads_), k, v, mask));
  // One memory for all B rows: fold the batch into the query steps,
  // [B, Tq, H, d] -> [1, H, B * Tq, d], so each head is one product.
  OASR_CHECK(!mask.defined() || mask.numel() == mask.size(-1), kInvalidArgument, path(),
             ": a memory shared by the batch takes a key mask [1, 1, 1, Tk], got ",
             shape_str(mask.shape()));
  const Tensor folded = q.view({batch, steps, heads_, head_dim_})
                            .transpose(0, 2)  // [H, Tq, B, d]
                            .transpose(1, 2)  // [H, B, Tq, d]
                            .contiguous()
                            .view({1, heads_, batch * steps, head_dim_});
  // The mask varies over keys only when shared: keep its last dimension.
  const Tensor key_mask = mask.defined() ? mask.reshape({1, 1, 1, mask.size(-1)}) : Tensor();
  const auto attend = [&](const Tensor& queries, const Tensor& keys, const Tensor& values) {
    const Tensor s = scores(queries, keys);
    return ops::matmul(key_mask.defined() ? ops::masked_softmax(s, key_mask) : ops::softmax(s),
                       values);
  };
  const int64_t rows = batch * steps;
  Tensor folded_context;  // [1, H, B * Tq, d]
  if (host_float(folded) && rows * k.size(2) >= kSliceScores) {
    // On the host one (head, block of query rows) at a time, as
    // relative_context: the rescoring of 10 hypotheses of 300 tokens
    // against 200 s of audio held two [4, 3000, 5000] float32 tensors (0.5 GB)
    // at once. A GEMM row's fma chain, the scaling and the per-row softmax
    // do not depend on the other rows or heads, so the bits agree.
    folded_context = Tensor::empty({1, heads_, rows, head_dim_}, DType::kF32);
    for (int64_t h = 0; h < heads_; ++h) {
      const Tensor k_head = k.narrow(1, h, 1), v_head = v.narrow(1, h, 1);
      for (int64_t r0 = 0; r0 < rows; r0 += kQueryBlock) {
        const int64_t block = std::min(kQueryBlock, rows - r0);
        folded_context.narrow(1, h, 1)
            .narrow(2, r0, block)
            .copy_(attend(folded.narrow(1, h, 1).narrow(2, r0, block), k_head, v_head));
      }
    }
  } else {
    folded_context = attend(folded, k, v);
  }
  const Tensor context = folded_context.view({heads_, batch, steps, head_dim_})
                             .transpose(0, 1)  // [B, H, Tq, d]
                             .transpose(1, 2)  // [B, Tq, H, d]
                             .contiguous()
                             .view({batch, steps, heads_ * head_dim_});
  return out_->forward(context);
}

Tensor MultiHeadAttention::in_place_attention(const Tensor& q, const Tensor& keys,
                                              const Tensor& values, const Tensor& key_scales,
                                              const Tensor& value_scales, int64_t key_count,
                                              bool causal, const Tensor& key_rows,
                                              const Tensor& past_tokens) const {
  if (!env::fused_attention_enabled() || scaling_ != ScoreScaling::kQuery) return Tensor();
  ops::CachedAttentionInputs in;
  in.query = q.view({q.size(0), q.size(1), heads_, head_dim_});
  in.keys = keys;
  in.values = values;
  in.key_scales = key_scales;
  in.value_scales = value_scales;
  in.key_count = key_count;
  in.causal = causal;
  in.key_rows = key_rows;
  in.past_tokens = past_tokens;
  if (!ops::cached_attention_fusable(in)) return Tensor();  // e.g. off CUDA
  return out_->forward(ops::cached_attention(in));
}

Tensor MultiHeadAttention::forward_cached(const Tensor& x, KvCache& cache, int64_t layer,
                                          const Tensor& past_tokens) const {
  check_input(x.shape(), "input");
  const int64_t steps = x.size(1);
  // [R, n, D] is already the cache's [row][token][head][head_dim] order.
  cache.append(layer, key_->forward(x), value_->forward(x), past_tokens);
  const Tensor q = project_query(x);
  {
    // The fused kernel reads the store where it is (e4m3 codes included):
    // no copy of the cache per step (ops/cached_attention.h). With
    // past_tokens it counts the keys on the device, bounded by the capacity.
    const KvCache::Stored s = cache.stored(layer);
    const Tensor fused =
        in_place_attention(q, s.keys, s.values, s.key_scales, s.value_scales,
                           past_tokens.defined() ? cache.capacity() : cache.tokens(layer), true,
                           Tensor(), past_tokens);
    if (fused.defined()) return fused;
  }
  OASR_CHECK(!past_tokens.defined(), kInternal, path(),
             ": a step position on the device needs the fused cached attention (CUDA, head_dim ",
             "64, OASR_FUSED_ATTENTION on); the caller must not pass one otherwise");
  const KvCache::View kv = cache.read(layer);
  const int64_t keys = kv.keys.size(2);
  Tensor mask;
  if (steps > 1) {
    // Query i sits at position keys - steps + i and sees keys up to it.
    mask = Tensor::zeros({steps, keys}, DType::kU8);
    uint8_t* m = mask.data<uint8_t>();
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t last = keys - steps + i;
      for (int64_t j = 0; j <= last; ++j) m[i * keys + j] = 1;
    }
    mask = mask.to(x.device());
  }
  return out_->forward(context(split_heads(q, heads_), kv.keys, kv.values, mask));
}

std::pair<Tensor, Tensor> MultiHeadAttention::project_memory(const GemmInput& memory) const {
  check_input(memory.shape(), "memory");
  return {split_heads(key_->forward(memory), heads_), split_heads(value_->forward(memory), heads_)};
}

Tensor MultiHeadAttention::forward_cross(const Tensor& x, const AttentionMemory& memory,
                                         std::span<const int64_t> cross_rows,
                                         const Tensor& device_rows) const {
  check_input(x.shape(), "input");
  const int64_t rows = x.size(0);
  const int64_t steps = x.size(1);
  const Tensor& stored_keys = memory.keys;
  OASR_CHECK(stored_keys.defined() && stored_keys.dim() == 4 && stored_keys.size(1) == heads_ &&
                 stored_keys.size(3) == head_dim_ && memory.values.defined() &&
                 memory.values.shape() == stored_keys.shape(),
             kInvalidArgument, path(), ": cross-attention keys and values must be [B, ", heads_,
             ", frames, ", head_dim_, "] (project_memory's), got ",
             stored_keys.defined() ? shape_str(stored_keys.shape()) : std::string("undefined"));
  if (memory.fp8()) {
    const Shape scale_shape = {stored_keys.size(0), heads_, stored_keys.size(2), 1};
    OASR_CHECK(stored_keys.dtype() == DType::kU8 && memory.values.dtype() == DType::kU8 &&
                   memory.value_scales.defined() && memory.key_scales.shape() == scale_shape &&
                   memory.value_scales.shape() == scale_shape,
               kInvalidArgument, path(),
               ": fp8 cross-attention memory must be uint8 codes with float32 scales ",
               shape_str(scale_shape));
  }
  const int64_t memory_rows = stored_keys.size(0);
  OASR_CHECK(static_cast<int64_t>(cross_rows.size()) == rows, kInvalidArgument, path(), ": ",
             cross_rows.size(), " cross rows given for ", rows, " decoder rows (one per row)");
  bool identity = memory_rows == rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = cross_rows[static_cast<size_t>(r)];
    OASR_CHECK(b >= 0 && b < memory_rows, kInvalidArgument, path(), ": cross_rows[", r, "] = ", b,
               " is not a row of the encoder output (", memory_rows, " rows)");
    identity = identity && b == r;
  }
  const Tensor q = project_query(x);  // [R, n, D]
  // Beam search's layout: rows b * m .. b * m + m - 1 read memory row b, for
  // every b. The m rows' queries of a memory row are consecutive in q, so
  // [R, n, D] is [B, m * n, D] as it is: one attention call, no copy.
  bool folded = rows % memory_rows == 0;
  const int64_t per_row = folded ? rows / memory_rows : 0;
  for (int64_t r = 0; folded && r < rows; ++r) {
    folded = cross_rows[static_cast<size_t>(r)] == r / per_row;
  }
  if (folded || device_rows.defined()) {
    // Row r reads memory row r / per_row (the in-place kernel's own
    // mapping), or the row device_rows names (any mapping).
    const auto tokens_major = [](const Tensor& t) { return t.defined() ? t.transpose(1, 2) : t; };
    const Tensor fused = in_place_attention(
        q, tokens_major(memory.keys), tokens_major(memory.values), tokens_major(memory.key_scales),
        tokens_major(memory.value_scales), stored_keys.size(2), false, device_rows);
    if (fused.defined()) return fused;
  }
  // The other paths read the served dtype: the values the kernel reads,
  // dequantized once per call.
  const auto served = [&](const Tensor& data, const Tensor& scales) {
    if (!scales.defined()) return data;
    const int64_t vectors = data.numel() / head_dim_;
    return ops::dequantize_pow2_e4m3(data.contiguous().view({vectors, head_dim_}),
                                     scales.contiguous().view({vectors}), q.dtype())
        .view(data.shape());
  };
  const Tensor keys = served(memory.keys, memory.key_scales);
  const Tensor values = served(memory.values, memory.value_scales);
  if (identity) return out_->forward(context(split_heads(q, heads_), keys, values, Tensor()));
  if (folded) {
    const Tensor grouped = q.contiguous().view({memory_rows, per_row * steps, dim_});
    const Tensor out = context(split_heads(grouped, heads_), keys, values, Tensor());
    return out_->forward(out.view({rows, steps, dim_}));
  }
  if (!host_float(q)) {
    // Any other mapping on a device (greedy search after finished rows
    // left): each row's keys and values gathered in one call per tensor.
    const Tensor ids =
        Tensor::from_vector(std::vector<int64_t>(cross_rows.begin(), cross_rows.end()), {rows})
            .to(q.device());
    const auto gather = [&](const Tensor& memory) {
      const Tensor table = memory.contiguous().view({memory_rows, -1});
      return ops::embedding(ids, table)
          .view({rows, memory.size(1), memory.size(2), memory.size(3)});
    };
    return out_->forward(context(split_heads(q, heads_), gather(keys), gather(values), Tensor()));
  }
  // Group the decoder rows by the memory row they read, and fold each group's
  // queries into one [1, H, m * n, d] operand against that row's keys.
  std::map<int64_t, std::vector<int64_t>> groups;
  for (int64_t r = 0; r < rows; ++r) groups[cross_rows[static_cast<size_t>(r)]].push_back(r);
  Tensor merged = Tensor::empty({rows, steps, dim_}, q.dtype(), q.device());
  for (const auto& [memory_row, members] : groups) {
    const int64_t m = static_cast<int64_t>(members.size());
    Tensor gathered = Tensor::empty({1, m * steps, dim_}, q.dtype(), q.device());
    for (int64_t i = 0; i < m; ++i) {
      gathered.narrow(1, i * steps, steps).copy_(q.narrow(0, members[static_cast<size_t>(i)], 1));
    }
    const Tensor k = keys.narrow(0, memory_row, 1).contiguous();
    const Tensor v = values.narrow(0, memory_row, 1).contiguous();
    const Tensor out = context(split_heads(gathered, heads_), k, v, Tensor());
    for (int64_t i = 0; i < m; ++i) {
      merged.narrow(0, members[static_cast<size_t>(i)], 1).copy_(out.narrow(1, i * steps, steps));
    }
  }
  return out_->forward(merged);
}

RelPositionMultiHeadAttention::RelPositionMultiHeadAttention(const AttentionSpec& spec,
                                                             const std::string& position_name,
                                                             RelativeShift shift)
    : MultiHeadAttention(spec), shift_(shift) {
  OASR_CHECK(spec.scaling == ScoreScaling::kScores, kInternal, spec.type_name,
             ": relative-position attention scales its summed scores (ScoreScaling::kScores)");
  position_ = register_module(position_name, std::make_shared<Linear>(dim_, dim_, false));
  register_parameter("pos_bias_u", {heads_, head_dim_});
  register_parameter("pos_bias_v", {heads_, head_dim_});
}

RelPositionMultiHeadAttention::Output RelPositionMultiHeadAttention::forward(
    const GemmInput& x, const Tensor& mask, const Tensor& pos_emb, const Tensor& att_cache,
    bool return_cache) const {
  check_input(x.shape(), "x");
  const int64_t batch = x.size(0);
  // The projections by head, [B, T, H, d], still in their [B, T, H * d]
  // storage: the fused kernel reads each head in place.
  const auto by_head = [&](const Tensor& t) {
    return t.view({t.size(0), t.size(1), heads_, head_dim_});
  };
  Tensor q = by_head(query_->forward(x));
  Tensor k = by_head(key_->forward(x));
  Tensor v = by_head(value_->forward(x));
  if (att_cache.defined() && att_cache.numel() > 0) {
    OASR_CHECK(att_cache.dim() == 4 && att_cache.size(0) == batch && att_cache.size(1) == heads_ &&
                   att_cache.size(3) == 2 * head_dim_,
               kInvalidArgument, path(), ": att_cache must be [", batch, ", ", heads_,
               ", cached frames, ", 2 * head_dim_, "], got ", shape_str(att_cache.shape()));
    // The cache is [B, H, cached, 2 * d]: keys, then values.
    k = ops::concat({att_cache.narrow(3, 0, head_dim_), k.transpose(1, 2)}, 2).transpose(1, 2);
    v = ops::concat({att_cache.narrow(3, head_dim_, head_dim_), v.transpose(1, 2)}, 2)
            .transpose(1, 2);
  }
  if (shift_ == RelativeShift::kTransformerXl) {
    OASR_CHECK(!return_cache && !(att_cache.defined() && att_cache.numel() > 0), kUnsupported,
               path(), ": the Transformer-XL shifted attention serves no streaming cache");
    return {shifted_forward(q, k, v, pos_emb, mask), Tensor()};
  }
  const int64_t keys = k.size(1);
  OASR_CHECK(pos_emb.dim() == 3 && pos_emb.size(0) == 1 && pos_emb.size(1) == keys,
             kInvalidArgument, path(), ": pos_emb must be [1, ", keys,
             ", D] (one row per key), got ", shape_str(pos_emb.shape()));
  const Tensor p = by_head(position_->forward(pos_emb));  // [1, Tk, H, d]

  Output output;
  if (return_cache) output.cache = ops::concat({k.transpose(1, 2), v.transpose(1, 2)}, 3);
  if (env::fused_attention_enabled()) {
    ops::RelPositionAttentionInputs in{
        q, k, v, p, param("pos_bias_u"), param("pos_bias_v"), mask, score_scale_};
    if (ops::rel_position_attention_fusable(in)) {
      output.out = out_->forward(ops::rel_position_attention(in));
      return output;
    }
  }
  // Unfused: (q + pos_bias_u) and (q + pos_bias_v) as [B, H, T, d]; the
  // positions repeated per batch row.
  const Tensor q_u = ops::add(q, param("pos_bias_u")).transpose(1, 2).contiguous();
  const Tensor q_v = ops::add(q, param("pos_bias_v")).transpose(1, 2).contiguous();
  const Tensor k_heads = k.transpose(1, 2).contiguous();  // [B, H, Tk, d]
  const Tensor v_heads = v.transpose(1, 2).contiguous();
  Tensor p_heads = p.transpose(1, 2).contiguous();  // [1, H, Tk, d]
  const bool slice_mask = !mask.defined() || (mask.dim() == 4 && mask.size(1) == 1);
  if (host_float(q_u) && slice_mask && q_u.size(2) * keys >= kSliceScores) {
    output.out = out_->forward(
        merge_heads(relative_context(q_u, q_v, k_heads, v_heads, p_heads, mask, score_scale_)));
    return output;
  }
  if (batch > 1) {
    p_heads = ops::concat(std::vector<Tensor>(static_cast<size_t>(batch), p_heads), 0);
  }
  const Tensor content = ops::matmul(q_u, k_heads, /*transpose_b=*/true);
  const Tensor position = ops::matmul(q_v, p_heads, /*transpose_b=*/true);
  output.out = out_->forward(
      context_from_scores(ops::scale(ops::add(content, position), score_scale_), v_heads, mask));
  return output;
}

Tensor RelPositionMultiHeadAttention::shifted_forward(const Tensor& q, const Tensor& k,
                                                      const Tensor& v, const Tensor& pos_emb,
                                                      const Tensor& mask) const {
  const int64_t batch = q.size(0);
  const int64_t frames = q.size(1);
  const int64_t rows = 2 * frames - 1;
  OASR_CHECK(pos_emb.dim() == 3 && pos_emb.size(0) == 1 && pos_emb.size(1) == rows &&
                 pos_emb.size(2) == dim_,
             kInvalidArgument, path(), ": pos_emb must be [1, ", rows, ", ", dim_,
             "] (relative positions ", frames - 1, " .. ", -(frames - 1), "), got ",
             shape_str(pos_emb.shape()));
  const Tensor p = position_->forward(pos_emb).view({1, rows, heads_, head_dim_});
  const Tensor q_u = ops::add(q, param("pos_bias_u")).transpose(1, 2).contiguous();
  const Tensor q_v = ops::add(q, param("pos_bias_v")).transpose(1, 2).contiguous();
  const Tensor k_heads = k.transpose(1, 2).contiguous();  // [B, H, T, d]
  const Tensor v_heads = v.transpose(1, 2).contiguous();
  Tensor p_heads = p.transpose(1, 2).contiguous();  // [1, H, 2T - 1, d]
  if (batch > 1) {
    p_heads = ops::concat(std::vector<Tensor>(static_cast<size_t>(batch), p_heads), 0);
  }
  const Tensor content = ops::matmul(q_u, k_heads, /*transpose_b=*/true);   // [B, H, T, T]
  const Tensor position = ops::matmul(q_v, p_heads, /*transpose_b=*/true);  // [B, H, T, 2T - 1]
  // rel_shift: entry (i, j) <- position (i, T - 1 - i + j). A zero column in
  // front makes each row 2T long, so reading the [B, H, T, 2T] block as
  // [B, H, 2T, T] and dropping its first row leaves row i shifted left by
  // T - 1 - i once read back as [B, H, T, 2T - 1] (NeMo's pad / view).
  const Tensor zero =
      Tensor::zeros({batch, heads_, frames, 1}, position.dtype(), position.device());
  const Tensor padded = ops::concat({zero, position}, 3).view({batch, heads_, 2 * frames, frames});
  const Tensor shifted = padded.narrow(2, 1, rows)
                             .contiguous()
                             .view({batch, heads_, frames, rows})
                             .narrow(3, 0, frames)
                             .contiguous();
  return out_->forward(
      context_from_scores(ops::scale(ops::add(content, shifted), score_scale_), v_heads, mask));
}

}  // namespace oasr::layers
