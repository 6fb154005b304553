#include "models/whisper_blocks.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/softmax.h"

namespace oasr::models {
namespace {

// [B, T, H * d] -> [B, H, T, d], moving whole head_dim runs (Tensor's
// generic strided copy moves one element at a time).
Tensor split_heads(const Tensor& x, int64_t heads) {
  const Tensor c = x.contiguous();
  const int64_t batch = c.size(0);
  const int64_t steps = c.size(1);
  const int64_t d = c.size(2) / heads;
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

// [B, H, T, d] -> [B, T, H * d].
Tensor merge_heads(const Tensor& x) {
  const Tensor c = x.contiguous();
  const int64_t batch = c.size(0);
  const int64_t heads = c.size(1);
  const int64_t steps = c.size(2);
  const int64_t d = c.size(3);
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

// softmax(q k^T) v for q [B, H, Tq, d], k / v [B, H, Tk, d]; `mask` (uint8,
// broadcastable to the scores) or undefined. Large score matrices (the
// encoder's 1500 x 1500 per head) are made one (batch, head) slice at a
// time: the batched form would hold B * H * Tq * Tk floats at once (54 MB
// per utterance, 432 MB at batch 8), far beyond the caches, while one slice
// (9 MB) stays in L3 between its three passes. Every slice's products and
// softmax are the ones the batched ops compute for it (ops::matmul runs
// one GEMM per batch entry; softmax is per row), so the bits are the same.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  constexpr int64_t kSliceScores = 1 << 16;
  const int64_t slices = q.size(0) * q.size(1);
  const int64_t tq = q.size(2), tk = k.size(2), d = q.size(3);
  if (mask.defined() || slices == 1 || tq * tk < kSliceScores) {
    const Tensor scores = ops::matmul(q, k, /*transpose_b=*/true);
    const Tensor probs = mask.defined() ? ops::masked_softmax(scores, mask) : ops::softmax(scores);
    return ops::matmul(probs, v);
  }
  const Tensor qs = q.contiguous().view({slices, tq, d});
  const Tensor ks = k.contiguous().view({slices, tk, d});
  const Tensor vs = v.contiguous().view({slices, tk, v.size(3)});
  Tensor out = Tensor::empty({slices, tq, v.size(3)}, DType::kF32);
  for (int64_t i = 0; i < slices; ++i) {
    const Tensor scores = ops::matmul(qs.narrow(0, i, 1), ks.narrow(0, i, 1), /*transpose_b=*/true);
    out.narrow(0, i, 1).copy_(ops::matmul(ops::softmax(scores), vs.narrow(0, i, 1)));
  }
  return out.view({q.size(0), q.size(1), tq, v.size(3)});
}

void check_tokens_input(const Tensor& x, int64_t dim, const std::string& where) {
  OASR_CHECK(x.defined() && x.dim() == 3 && x.size(2) == dim, kInvalidArgument, where,
             ": input must be [batch, tokens, ", dim, "], got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
}

}  // namespace

WhisperAttention::WhisperAttention(int64_t dim, int64_t heads)
    : Module("WhisperAttention"), dim_(dim), heads_(heads), head_dim_(heads > 0 ? dim / heads : 0) {
  OASR_CHECK(heads > 0 && dim > 0 && dim % heads == 0, kInvalidArgument,
             "Whisper attention: d_model ", dim, " is not a multiple of the head count ", heads);
  // HF: head_dim ** -0.5 in double, applied to a float32 tensor as float32.
  scaling_ = static_cast<float>(std::pow(static_cast<double>(head_dim_), -0.5));
  // HF's registration order: k_proj (no bias), v_proj, q_proj, out_proj.
  k_proj_ = register_module("k_proj", std::make_shared<layers::Linear>(dim, dim, /*bias=*/false));
  v_proj_ = register_module("v_proj", std::make_shared<layers::Linear>(dim, dim));
  q_proj_ = register_module("q_proj", std::make_shared<layers::Linear>(dim, dim));
  out_proj_ = register_module("out_proj", std::make_shared<layers::Linear>(dim, dim));
}

void WhisperAttention::use_row_dot_projections(bool memory_too) {
  q_proj_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  out_proj_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  if (memory_too) {
    k_proj_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
    v_proj_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  }
}

Tensor WhisperAttention::scaled_query(const Tensor& x) const {
  return ops::scale(q_proj_->forward(x), scaling_);
}

Tensor WhisperAttention::forward(const Tensor& x) const {
  check_tokens_input(x, dim_, path());
  const Tensor q = split_heads(scaled_query(x), heads_);
  const Tensor k = split_heads(k_proj_->forward(x), heads_);
  const Tensor v = split_heads(v_proj_->forward(x), heads_);
  return out_proj_->forward(merge_heads(attend(q, k, v, Tensor())));
}

Tensor WhisperAttention::forward_cached(const Tensor& x, KvCache& cache, int64_t layer) const {
  check_tokens_input(x, dim_, path());
  const int64_t steps = x.size(1);
  // [R, n, D] is already the cache's [row][token][head][head_dim] order.
  cache.append(layer, k_proj_->forward(x), v_proj_->forward(x));
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
  }
  const Tensor q = split_heads(scaled_query(x), heads_);
  return out_proj_->forward(merge_heads(attend(q, kv.keys, kv.values, mask)));
}

std::pair<Tensor, Tensor> WhisperAttention::project_memory(const Tensor& memory) const {
  check_tokens_input(memory, dim_, path());
  return {split_heads(k_proj_->forward(memory), heads_),
          split_heads(v_proj_->forward(memory), heads_)};
}

Tensor WhisperAttention::forward_cross(const Tensor& x, const Tensor& keys, const Tensor& values,
                                       std::span<const int64_t> cross_rows) const {
  check_tokens_input(x, dim_, path());
  const int64_t rows = x.size(0);
  const int64_t steps = x.size(1);
  OASR_CHECK(keys.defined() && keys.dim() == 4 && keys.size(1) == heads_ &&
                 keys.size(3) == head_dim_ && values.defined() && values.shape() == keys.shape(),
             kInvalidArgument, path(), ": cross-attention keys and values must be [B, ", heads_,
             ", frames, ", head_dim_, "] (WhisperModel::cross_kv), got ",
             keys.defined() ? shape_str(keys.shape()) : std::string("undefined"));
  const int64_t memory_rows = keys.size(0);
  OASR_CHECK(static_cast<int64_t>(cross_rows.size()) == rows, kInvalidArgument, path(), ": ",
             cross_rows.size(), " cross rows given for ", rows, " decoder rows (one per row)");
  bool identity = memory_rows == rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = cross_rows[static_cast<size_t>(r)];
    OASR_CHECK(b >= 0 && b < memory_rows, kInvalidArgument, path(), ": cross_rows[", r, "] = ", b,
               " is not a row of the encoder output (", memory_rows, " rows)");
    identity = identity && b == r;
  }
  const Tensor q = scaled_query(x);  // [R, n, D]
  if (identity) {
    return out_proj_->forward(merge_heads(attend(split_heads(q, heads_), keys, values, Tensor())));
  }
  // Group the decoder rows by the memory row they read, and fold each group's
  // queries into one [1, H, m * n, d] operand against that row's keys.
  std::map<int64_t, std::vector<int64_t>> groups;
  for (int64_t r = 0; r < rows; ++r) groups[cross_rows[static_cast<size_t>(r)]].push_back(r);
  Tensor context = Tensor::empty({rows, steps, dim_}, DType::kF32);
  const Tensor qc = q.contiguous();
  const size_t row_bytes = static_cast<size_t>(steps * dim_) * sizeof(float);
  for (const auto& [memory_row, members] : groups) {
    const int64_t m = static_cast<int64_t>(members.size());
    Tensor gathered = Tensor::empty({1, m * steps, dim_}, DType::kF32);
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(gathered.data<float>() + i * steps * dim_,
                  qc.data<float>() + members[static_cast<size_t>(i)] * steps * dim_, row_bytes);
    }
    const Tensor k = keys.narrow(0, memory_row, 1).contiguous();
    const Tensor v = values.narrow(0, memory_row, 1).contiguous();
    const Tensor out = merge_heads(attend(split_heads(gathered, heads_), k, v, Tensor()));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(context.data<float>() + members[static_cast<size_t>(i)] * steps * dim_,
                  out.data<float>() + i * steps * dim_, row_bytes);
    }
  }
  return out_proj_->forward(context);
}

WhisperEncoderLayer::WhisperEncoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperEncoderLayer") {
  self_attn_ = register_module("self_attn", std::make_shared<WhisperAttention>(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  fc1_ = register_module(
      "fc1", std::make_shared<layers::LinearActivation>(dim, ffn_dim, Activation::kGeluErf));
  fc2_ = register_module("fc2", std::make_shared<layers::Linear>(ffn_dim, dim));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<layers::LayerNorm>(dim));
}

Tensor WhisperEncoderLayer::forward(const Tensor& x) const {
  const Tensor attended = self_attn_->forward(self_attn_layer_norm_->forward(x));
  const ops::AddLayerNormResult mid = final_layer_norm_->add_forward(attended, x);
  return ops::add(mid.sum, fc2_->forward(fc1_->forward(mid.normalized)));
}

WhisperDecoderLayer::WhisperDecoderLayer(int64_t dim, int64_t heads, int64_t ffn_dim)
    : Module("WhisperDecoderLayer") {
  self_attn_ = register_module("self_attn", std::make_shared<WhisperAttention>(dim, heads));
  self_attn_layer_norm_ =
      register_module("self_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  encoder_attn_ = register_module("encoder_attn", std::make_shared<WhisperAttention>(dim, heads));
  encoder_attn_layer_norm_ =
      register_module("encoder_attn_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  fc1_ = register_module(
      "fc1", std::make_shared<layers::LinearActivation>(dim, ffn_dim, Activation::kGeluErf));
  fc2_ = register_module("fc2", std::make_shared<layers::Linear>(ffn_dim, dim));
  final_layer_norm_ = register_module("final_layer_norm", std::make_shared<layers::LayerNorm>(dim));
  // A decoder step has a few rows (beams x utterances x new tokens): the
  // row-dot linear reads each weight once and keeps rows independent.
  self_attn_->use_row_dot_projections(/*memory_too=*/true);
  encoder_attn_->use_row_dot_projections(/*memory_too=*/false);
  fc1_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  fc2_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
}

Tensor WhisperDecoderLayer::forward(const Tensor& x, KvCache& cache, int64_t layer,
                                    const Tensor& cross_keys, const Tensor& cross_values,
                                    std::span<const int64_t> cross_rows) const {
  const Tensor attended =
      self_attn_->forward_cached(self_attn_layer_norm_->forward(x), cache, layer);
  const ops::AddLayerNormResult after_self = encoder_attn_layer_norm_->add_forward(attended, x);
  const Tensor crossed =
      encoder_attn_->forward_cross(after_self.normalized, cross_keys, cross_values, cross_rows);
  const ops::AddLayerNormResult after_cross =
      final_layer_norm_->add_forward(crossed, after_self.sum);
  return ops::add(after_cross.sum, fc2_->forward(fc1_->forward(after_cross.normalized)));
}

}  // namespace oasr::models
