// The host's relative-position attention in slices (layers/attention.cc,
// relative_context): for score matrices of 2^16 entries and more it runs one
// (batch row, head, block of 512 queries) at a time to bound its memory; the
// result must be the batched definition's bit for bit -- the products,
// their sum, the scaling and the (masked) softmax over whole [B, H, Tq, Tk]
// tensors, as the layer computes them for short inputs. Checked for inputs
// of one and of two query blocks, without a mask, with a padding mask
// [B, 1, 1, Tk] and with a chunk mask [B, 1, Tq, Tk].
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

}  // namespace
}  // namespace oasr
