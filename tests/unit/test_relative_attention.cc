// The host's relative-position attention in slices (layers/attention.cc,
// relative_context): for score matrices of 2^16 entries and more it runs one
// (batch row, head, block of 512 queries) at a time to bound its memory; the
// result must be the batched definition's bit for bit -- the products,
// their sum, the scaling and the (masked) softmax over whole [B, H, Tq, Tk]
// tensors, as the layer computes them for short inputs. Checked for inputs
// of one and of two query blocks, without a mask, with a padding mask
// [B, 1, 1, Tk] and with a chunk mask [B, 1, Tq, Tk]. The same for the
// cross-attention of B queries over one shared memory (attention
// rescoring's hypotheses over one utterance), sliced per (head, block of
// 512 folded query rows).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "layers/attention.h"
#include "layers/linear.h"
#include "models/u2pp/u2pp_blocks.h"
#include "ops/concat.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/softmax.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using layers::RelPositionMultiHeadAttention;
using testing::normal_tensor;

constexpr int64_t kDim = 64;
constexpr int64_t kHeads = 4;
constexpr int64_t kHeadDim = kDim / kHeads;

// U2++'s attention (WeNet's names and scale 1 / sqrt(16)) with random weights.
std::shared_ptr<RelPositionMultiHeadAttention> make_attention(std::mt19937& rng) {
  auto attention = models::make_wenet_rel_position_attention(kHeads, kDim, true, true, true);
  std::map<std::string, Tensor> state;
  for (auto& [name, slot] : attention->named_parameters()) {
    state[name] = normal_tensor(slot->shape, rng, 0.3f);
  }
  attention->load_state_dict(MapTensorSource(state));
  return attention;
}

Tensor project(const Module& attention, const char* name, const Tensor& x) {
  return dynamic_cast<const layers::Linear&>(*attention.child(name)).forward(x);
}

// [B, T, H * d] -> [B, H, T, d]
Tensor heads_first(const Tensor& x) {
  return x.view({x.size(0), x.size(1), kHeads, kHeadDim}).transpose(1, 2).contiguous();
}

// The batched definition over whole tensors.
Tensor batched(const RelPositionMultiHeadAttention& attention, const Tensor& x,
               const Tensor& pos_emb, const Tensor& mask) {
  const int64_t batch = x.size(0);
  const Tensor q = project(attention, "linear_q", x);
  const Tensor q_u = heads_first(
      ops::add(q.view({batch, x.size(1), kHeads, kHeadDim}), attention.param("pos_bias_u"))
          .view({batch, x.size(1), kDim}));
  const Tensor q_v = heads_first(
      ops::add(q.view({batch, x.size(1), kHeads, kHeadDim}), attention.param("pos_bias_v"))
          .view({batch, x.size(1), kDim}));
  const Tensor k = heads_first(project(attention, "linear_k", x));
  const Tensor v = heads_first(project(attention, "linear_v", x));
  Tensor p = heads_first(project(attention, "linear_pos", pos_emb));
  p = ops::concat(std::vector<Tensor>(static_cast<size_t>(batch), p), 0);
  const Tensor scores =
      ops::scale(ops::add(ops::matmul(q_u, k, true), ops::matmul(q_v, p, true)), 0.25f);
  const Tensor probs = mask.defined() ? ops::masked_softmax(scores, mask) : ops::softmax(scores);
  const Tensor context =
      ops::matmul(probs, v).transpose(1, 2).contiguous().view({batch, x.size(1), kDim});
  return project(attention, "linear_out", context);
}

TEST(RelativeAttention, SlicedOnTheHostEqualsTheBatchedDefinitionBitForBit) {
  std::mt19937 rng(20261205);
  const auto attention = make_attention(rng);
  for (const int64_t frames : {int64_t{100}, int64_t{300}, int64_t{600}}) {
    // 100 frames: batched (1e4 scores); 300: one block; 600: 512 + 88 queries.
    const Tensor x = normal_tensor({2, frames, kDim}, rng, 1.0f);
    const Tensor pos_emb = normal_tensor({1, frames, kDim}, rng, 1.0f);
    Tensor padding = Tensor::zeros({2, 1, 1, frames}, DType::kU8);
    Tensor chunks = Tensor::zeros({2, 1, frames, frames}, DType::kU8);
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t valid = b == 0 ? frames : frames - 37;
      for (int64_t t = 0; t < valid; ++t) padding.data<uint8_t>()[b * frames + t] = 1;
      for (int64_t i = 0; i < frames; ++i) {
        for (int64_t j = 0; j < valid && j < (i / 16 + 1) * 16; ++j) {
          chunks.data<uint8_t>()[(b * frames + i) * frames + j] = 1;
        }
      }
    }
    for (const Tensor& mask : {Tensor(), padding, chunks}) {
      const Tensor got = attention->forward(x, mask, pos_emb, Tensor(), false).out;
      EXPECT_TRUE(testing::bit_equal(got, batched(*attention, x, pos_emb, mask)))
          << frames << " frames, mask " << (mask.defined() ? shape_str(mask.shape()) : "none");
    }
  }
}

// The cross-attention of B hypotheses over one shared memory, by its
// definition over whole tensors: queries folded to [1, H, B * Tq, d], one
// product per head against the memory's keys, scaled, the softmax masked
// over keys, the product with the values, unfolded.
Tensor shared_memory_batched(const layers::MultiHeadAttention& attention, const Tensor& x,
                             const Tensor& memory, const Tensor& mask) {
  const int64_t batch = x.size(0), steps = x.size(1);
  const Tensor q = project(attention, "linear_q", x);
  const Tensor folded = q.view({batch, steps, kHeads, kHeadDim})
                            .transpose(0, 2)
                            .transpose(1, 2)
                            .contiguous()
                            .view({1, kHeads, batch * steps, kHeadDim});
  const Tensor k = heads_first(project(attention, "linear_k", memory));
  const Tensor v = heads_first(project(attention, "linear_v", memory));
  const Tensor scores = ops::scale(ops::matmul(folded, k, true), 0.25f);  // WeNet: 1 / sqrt(16)
  const Tensor probs = ops::masked_softmax(scores, mask);
  const Tensor context = ops::matmul(probs, v)
                             .view({kHeads, batch, steps, kHeadDim})
                             .transpose(0, 1)
                             .transpose(1, 2)
                             .contiguous()
                             .view({batch, steps, kDim});
  return project(attention, "linear_out", context);
}

TEST(RelativeAttention, SharedMemoryCrossAttentionSlicedEqualsTheBatchedDefinitionBitForBit) {
  std::mt19937 rng(20261206);
  const auto attention = models::make_wenet_attention(kHeads, kDim);
  std::map<std::string, Tensor> state;
  for (auto& [name, slot] : attention->named_parameters()) {
    state[name] = normal_tensor(slot->shape, rng, 0.3f);
  }
  attention->load_state_dict(MapTensorSource(state));
  // 10 hypotheses of 70 tokens over 900 frames: 700 folded rows (one block
  // of 512 and one of 188) x 900 keys, sliced; over 40 frames, batched.
  for (const int64_t frames : {int64_t{40}, int64_t{900}}) {
    const Tensor x = normal_tensor({10, 70, kDim}, rng, 1.0f);
    const Tensor memory = normal_tensor({1, frames, kDim}, rng, 1.0f);
    Tensor mask = Tensor::zeros({1, 1, frames}, DType::kU8);
    for (int64_t t = 0; t < frames - 13; ++t) mask.data<uint8_t>()[t] = 1;
    const Tensor got = attention->forward(x, memory, mask);
    EXPECT_TRUE(testing::bit_equal(
        got, shared_memory_batched(*attention, x, memory, mask.view({1, 1, 1, frames}))))
        << frames << " frames";
  }
}

}  // namespace
}  // namespace oasr
