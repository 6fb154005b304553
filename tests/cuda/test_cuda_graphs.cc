// CUDA graphs (core/device_graph.h, core/device_graph_cache.h) on the GPU:
//  - a recorded block of ops (GEMM, LayerNorm, padded-frame zeroing from
//    device lengths, an add) replayed with new input contents returns the
//    bits the eager run of the same inputs returns, as fresh tensors;
//  - work that copies to the host or keeps memory besides its outputs is
//    declined, and eager work runs normally afterwards;
//  - the cache's policy: measure, then record and replay, per shape;
//  - a small U2++ encoder (d_k 64, so the fused attention serves) in
//    float16, unquantized and int8_w8a8: forward() replayed from a shape's
//    second call gives the eager bits (OASR_CUDA_GRAPHS=0) for new features
//    and new lengths, full-context and chunked.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/device_graph.h"
#include "core/device_graph_cache.h"
#include "core/tensor.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/u2pp_model.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/layer_norm.h"
#include "ops/sequence_mask.h"
#include "quantize/apply.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using testing::bit_equal;

Tensor normal(const Shape& shape, uint32_t seed, float scale = 1.0f, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(offset, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

constexpr int64_t kBatch = 3;
constexpr int64_t kFrames = 37;
constexpr int64_t kDim = 64;

// x [B, T, D] fp16 (host), lengths int64 [B] (host); the weights on the device.
struct BlockInputs {
  std::vector<Tensor> host;
  std::vector<Tensor> device() const {
    std::vector<Tensor> out;
    for (const Tensor& t : host) out.push_back(t.to(Device::cuda()));
    return out;
  }
};

BlockInputs block_inputs(uint32_t seed, std::vector<int64_t> lengths) {
  BlockInputs in;
  in.host = {normal({kBatch, kFrames, kDim}, seed).to(DType::kF16),
             normal({kDim, kDim}, 11, 0.2f).to(DType::kF16),
             normal({kDim}, 12, 0.1f).to(DType::kF16),
             normal({kDim}, 13, 0.2f, 1.0f).to(DType::kF16),
             normal({kDim}, 14, 0.1f).to(DType::kF16),
             Tensor::from_vector(lengths, {kBatch})};
  return in;
}

std::vector<Tensor> block(const std::vector<Tensor>& in) {
  const Tensor x = in[0].to(Device::cuda());  // a no-op for the graph's own inputs
  Tensor y = ops::linear(x, in[1], in[2]);
  y = ops::layer_norm(y, in[3], in[4], 1e-5f);
  y = ops::zero_tail_frames(y, in[5].to(Device::cuda()));
  return {y, ops::add(y, x)};
}

std::vector<Tensor> to_host(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.to(Device::cpu()));
  return out;
}

TEST(CudaGraph, ReplayGivesTheEagerBitsForNewInputs) {
  OASR_SKIP_WITHOUT_CUDA();
  const BlockInputs first = block_inputs(1, {37, 20, 1});
  const MeasuredRun measured = run_measured(Device::cuda(), block, first.device());
  ASSERT_GT(measured.arena_bytes, 0u);
  EXPECT_TRUE(
      bit_equal(measured.outputs[0].to(Device::cpu()), block(first.device())[0].to(Device::cpu())));
  std::string why;
  const auto graph =
      DeviceGraph::record(Device::cuda(), block, first.device(), measured.arena_bytes, &why);
  ASSERT_TRUE(graph) << why;
  std::vector<Tensor> kept;
  for (uint32_t seed = 2; seed <= 4; ++seed) {
    const BlockInputs next = block_inputs(seed, {static_cast<int64_t>(seed * 9), 37, 0});
    const std::vector<Tensor> eager = to_host(block(next.device()));
    // Host inputs (copied in by run) and device inputs both serve.
    const std::vector<Tensor> replayed = graph->run(seed == 3 ? next.host : next.device());
    ASSERT_EQ(replayed.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(replayed[i].device().is_cuda());
      EXPECT_TRUE(bit_equal(replayed[i].to(Device::cpu()), eager[i])) << "seed " << seed;
    }
    kept.push_back(replayed[0]);
  }
  // Each replay returned its own tensors: the first result is intact.
  const BlockInputs again = block_inputs(2, {18, 37, 0});
  EXPECT_TRUE(bit_equal(kept[0].to(Device::cpu()), block(again.device())[0].to(Device::cpu())));
  EXPECT_NE(kept[0].raw_data(), kept[1].raw_data());
}

TEST(CudaGraph, RefusesInputsOfAnotherShape) {
  OASR_SKIP_WITHOUT_CUDA();
  const BlockInputs in = block_inputs(1, {37, 20, 1});
  const MeasuredRun measured = run_measured(Device::cuda(), block, in.device());
  std::string why;
  const auto graph =
      DeviceGraph::record(Device::cuda(), block, in.device(), measured.arena_bytes, &why);
  ASSERT_TRUE(graph) << why;
  std::vector<Tensor> wrong = in.device();
  wrong[0] = wrong[0].narrow(1, 0, 10).contiguous();
  try {
    graph->run(wrong);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 does not match"), std::string::npos) << e.what();
  }
}

TEST(CudaGraph, DeclinesHostCopiesAndKeptMemory) {
  OASR_SKIP_WITHOUT_CUDA();
  const BlockInputs in = block_inputs(1, {37, 20, 1});
  const DeviceWork reads_host = [](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> out = block(inputs);
    const Tensor host = out[0].to(Device::cpu());  // a host copy inside the work
    return std::vector<Tensor>{out[0], host};
  };
  const MeasuredRun measured = run_measured(Device::cuda(), reads_host, in.device());
  ASSERT_GT(measured.arena_bytes, 0u);
  std::string why;
  EXPECT_FALSE(
      DeviceGraph::record(Device::cuda(), reads_host, in.device(), measured.arena_bytes, &why));
  EXPECT_NE(why.find("capture failed"), std::string::npos) << why;
  // Eager work is unaffected by the failed capture.
  EXPECT_TRUE(
      bit_equal(block(in.device())[0].to(Device::cpu()), measured.outputs[0].to(Device::cpu())));

  static Tensor cache;  // a cache built inside the work: memory kept besides the outputs
  const DeviceWork caches = [](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> out = block(inputs);
    cache = ops::add(out[0], out[0]);
    return std::vector<Tensor>{out[0]};
  };
  const MeasuredRun unclean = run_measured(Device::cuda(), caches, in.device());
  EXPECT_EQ(unclean.arena_bytes, 0u);
  EXPECT_FALSE(DeviceGraph::record(Device::cuda(), caches, in.device(), 0, &why));
  cache = Tensor();
}

TEST(CudaGraphCache, MeasuresThenRecordsThenReplaysPerShape) {
  OASR_SKIP_WITHOUT_CUDA();
  DeviceGraphCache cache;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const BlockInputs in = block_inputs(seed, {37, static_cast<int64_t>(seed * 5), 2});
    const std::vector<Tensor> got = cache.run("block", Device::cuda(), block, in.device());
    const std::vector<Tensor> eager = to_host(block(in.device()));
    EXPECT_TRUE(bit_equal(got[0].to(Device::cpu()), eager[0])) << "call " << seed;
    EXPECT_TRUE(bit_equal(got[1].to(Device::cpu()), eager[1])) << "call " << seed;
  }
  DeviceGraphCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.eager, 1);
  EXPECT_EQ(stats.recorded, 1);
  EXPECT_EQ(stats.replayed, 3);
  EXPECT_EQ(stats.declined, 0) << stats.last_decline;
  EXPECT_GT(stats.arena_bytes, 0u);
  // Another key is another graph: measured first.
  const BlockInputs in = block_inputs(9, {1, 2, 3});
  cache.run("other", Device::cuda(), block, in.device());
  EXPECT_EQ(cache.stats().eager, 2);
}

// ---- the U2++ encoder -------------------------------------------------------------

models::U2ppConfig small_u2pp_config() {
  models::U2ppConfig c;
  c.vocab_size = 24;
  models::U2ppEncoderConfig& e = c.encoder;
  e.input_dim = 80;
  e.output_size = 128;
  e.attention_heads = 2;  // d_k 64: the fused attention serves
  e.linear_units = 256;
  e.num_blocks = 2;
  e.cnn_module_kernel = 15;
  e.causal = true;
  e.use_dynamic_chunk = true;
  e.cnn_module_norm = models::U2ppConvNorm::kLayerNorm;
  e.pos_table_len = 512;
  models::U2ppDecoderConfig& d = c.decoder;
  d.attention_heads = 2;
  d.linear_units = 64;
  d.num_blocks = 1;
  d.pos_table_len = 128;
  return c;
}

std::unique_ptr<models::U2ppModel> small_model(bool int8) {
  const models::U2ppConfig config = small_u2pp_config();
  auto model = std::make_unique<models::U2ppModel>(config);
  std::mt19937 rng(7);
  uint32_t seed = 100;
  for (auto& [name, slot] : model->named_parameters()) {
    if (slot->dtype != DType::kF32) continue;  // num_batches_tracked
    const bool norm_weight =
        name.find("norm") != std::string::npos && name.compare(name.size() - 7, 7, ".weight") == 0;
    slot->value = normal(slot->shape, seed++, norm_weight ? 0.2f : 0.1f, norm_weight ? 1.0f : 0.0f);
  }
  if (int8) {
    const quant::QuantLayout layout = models::u2pp_quantization_layout(config);
    const quant::QuantizationSpec spec = quant::spec_from_config(
        quant::QuantizationConfig::from_options("int8_w8a8", {}), *model, layout);
    quant::quantize_model_online(*model, spec);
  }
  model->to(DType::kF16);
  model->to(Device::cuda());
  if (int8) {
    quant::BindOptions bind;
    bind.device = Device::cuda();
    quant::bind_quantization(*model, bind);
  }
  return model;
}

Tensor encode(const models::U2ppModel& model, const Tensor& feats, std::vector<int64_t> lengths,
              int64_t chunk, bool graphs) {
  setenv("OASR_CUDA_GRAPHS", graphs ? "1" : "0", 1);
  models::U2ppEncodeOptions options;
  options.decoding_chunk_size = chunk;
  const auto out = model.encode(feats, Tensor::from_vector(lengths, {feats.size(0)}), options);
  unsetenv("OASR_CUDA_GRAPHS");
  return out.out.to(Device::cpu());
}

class CudaGraphEncoder : public ::testing::TestWithParam<bool> {};

TEST_P(CudaGraphEncoder, ReplaysGiveTheEagerBits) {
  OASR_SKIP_WITHOUT_CUDA();
  const auto model = small_model(GetParam());
  for (int64_t chunk : {-1, 8}) {
    for (uint32_t call = 0; call < 4; ++call) {
      const Tensor feats = normal({3, 203, 80}, 50 + call);
      const std::vector<int64_t> lengths = {203, 150 - 20 * call, 90 + call};
      const Tensor graphed = encode(*model, feats, lengths, chunk, true);
      const Tensor eager = encode(*model, feats, lengths, chunk, false);
      EXPECT_TRUE(bit_equal(graphed, eager)) << "chunk " << chunk << " call " << call;
    }
  }
  const DeviceGraphCache::Stats stats = model->encoder().graph_stats();
  EXPECT_EQ(stats.declined, 0) << stats.last_decline;
  EXPECT_EQ(stats.recorded, 2);  // one per chunk setting
  EXPECT_EQ(stats.replayed, 6);
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaGraphEncoder, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "int8_w8a8" : "float16"; });

}  // namespace
}  // namespace oasr
