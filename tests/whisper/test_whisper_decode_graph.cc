// The Whisper decoder step as the search runs it on CUDA (models/whisper/
// whisper_model_step.h: the position and cross rows read on the device, the
// step recorded as a CUDA graph from a row count's second call and replayed
// after) against WhisperModel::decode() with the host's position and rows,
// bit for bit at every step, through a beam reorder and finished rows
// leaving (a mapping no longer regular), with the served-dtype and the fp8
// KV cache. A random-weight model of Whisper's head size (64) is enough:
// the claim is that both paths run the same arithmetic.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/env.h"
#include "models/whisper/whisper_model.h"
#include "models/whisper/whisper_model_step.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using models::WhisperConfig;
using models::WhisperModel;

Tensor random_tensor(const Shape& shape, float sigma, std::mt19937_64& rng, float mean = 0.0f) {
  std::normal_distribution<float> normal(mean, sigma);
  int64_t count = 1;
  for (const int64_t s : shape) count *= s;
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(rng);
  return Tensor::from_vector(values, shape);
}

std::unique_ptr<WhisperModel> random_model(DType dtype, Device device, bool fp8_cache) {
  WhisperConfig config;
  config.vocab_size = 300;
  config.num_mel_bins = 80;
  config.d_model = 128;
  config.encoder_layers = 1;
  config.encoder_attention_heads = 2;
  config.decoder_layers = 2;
  config.decoder_attention_heads = 2;
  config.encoder_ffn_dim = 256;
  config.decoder_ffn_dim = 256;
  config.max_source_positions = 16;
  config.max_target_positions = 32;
  auto model = std::make_unique<WhisperModel>(config);
  std::mt19937_64 rng(20261206);
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, slot] : model->named_parameters()) {
    if (name == "proj_out.weight") continue;  // tied to embed_tokens
    const bool norm_scale = name.find("layer_norm.weight") != std::string::npos;
    tensors.emplace(
        name, random_tensor(slot->shape, norm_scale ? 0.1f : 0.2f, rng, norm_scale ? 1.0f : 0.0f));
  }
  model->load(MapTensorSource(tensors));
  model->set_fp8_kv_cache(fp8_cache);
  model->to(dtype);
  model->to(device);
  return model;
}

// The cross memory with row i a copy of row rows[i], read by decoder row i:
// the reference's mapping is the identity, which decode() serves with the
// in-place kernel, as the step serves any mapping (a query row's result
// depends on its own key row only: ops/cached_attention.h).
WhisperModel::CrossKv gathered(const WhisperModel::CrossKv& cross,
                               const std::vector<int64_t>& rows) {
  const auto gather = [&](const std::vector<Tensor>& from) {
    std::vector<Tensor> out;
    for (const Tensor& t : from) {
      const Tensor host = t.to(Device::cpu()).contiguous();
      Shape shape = host.shape();
      shape[0] = static_cast<int64_t>(rows.size());
      Tensor g = Tensor::empty(shape, host.dtype());
      for (size_t i = 0; i < rows.size(); ++i) {
        g.narrow(0, static_cast<int64_t>(i), 1).copy_(host.narrow(0, rows[i], 1));
      }
      out.push_back(g.to(t.device()));
    }
    return out;
  };
  WhisperModel::CrossKv out;
  out.keys = gather(cross.keys);
  out.values = gather(cross.values);
  out.key_scales = gather(cross.key_scales);
  out.value_scales = gather(cross.value_scales);
  return out;
}

std::vector<int64_t> identity(size_t n) {
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(i);
  return out;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& where) {
  const Tensor x = a.to(Device::cpu()).contiguous();
  const Tensor y = b.to(Device::cpu()).contiguous();
  ASSERT_EQ(x.shape(), y.shape()) << where;
  ASSERT_EQ(x.dtype(), y.dtype()) << where;
  ASSERT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << where;
}

struct Case {
  DType dtype;
  bool fp8_cache;
};

class WhisperDecodeGraph : public ::testing::TestWithParam<Case> {};

TEST_P(WhisperDecodeGraph, ReplayedStepsGiveTheHostPathsBits) {
  OASR_SKIP_WITHOUT_CUDA();
  if (!env::cuda_graphs_enabled() || !env::fused_attention_enabled()) {
    GTEST_SKIP() << "OASR_CUDA_GRAPHS=0 or OASR_FUSED_ATTENTION=0: the step runs without a graph";
  }
  const Case c = GetParam();
  const Device gpu = Device::cuda(0);
  const std::unique_ptr<WhisperModel> model = random_model(c.dtype, gpu, c.fp8_cache);
  std::mt19937_64 rng(7);
  // Two utterances' encoder output, 16 frames each; two beams an utterance.
  const Tensor encoder_out = random_tensor({2, 16, 128}, 1.0f, rng).to(c.dtype).to(gpu);
  const WhisperModel::CrossKv cross = model->cross_kv(encoder_out);
  std::vector<int64_t> rows = {0, 0, 1, 1};
  decode::WhisperModelStep step(*model, cross, rows, /*capacity_tokens=*/24);
  layers::KvCache cache = model->make_cache(4, 24);
  WhisperModel::CrossKv reference_cross = gathered(cross, rows);
  std::uniform_int_distribution<int64_t> token(0, 299);
  for (int64_t s = 0; s < 16; ++s) {
    const std::string where = std::string(dtype_name(c.dtype)) + (c.fp8_cache ? " fp8 cache" : "") +
                              " step " + std::to_string(s);
    const int64_t n = s == 0 ? 3 : 1;  // the prompt, then one token a row
    std::vector<int64_t> ids;
    for (size_t i = 0; i < rows.size() * static_cast<size_t>(n); ++i) ids.push_back(token(rng));
    const Tensor tokens = Tensor::from_vector(ids, {static_cast<int64_t>(rows.size()), n});
    const Tensor logits = model->decode(tokens, reference_cross, identity(rows.size()), cache);
    expect_same_bits(step.step(tokens), logits.select(1, n - 1).contiguous(), where);
    ASSERT_EQ(step.cache().length(), cache.length()) << where;
    if (s == 5) {  // a beam step: row 0 takes row 1's place, row 3 row 2's
      const std::vector<int64_t> sources = {1, 1, 2, 2};
      step.reorder(sources);
      cache.reorder_rows(sources);
    }
    if (s == 8) {  // row 1 finished: rows 0, 2, 3 read memory rows 0, 1, 1
      const std::vector<int64_t> kept = {0, 2, 3};
      ASSERT_TRUE(step.retain(kept));
      cache.retain_rows(kept);
      rows = {0, 1, 1};
      reference_cross = gathered(cross, rows);
    }
    if (s == 11) {  // rows 0 and 2 left: one row reading memory row 1
      const std::vector<int64_t> kept = {2};
      ASSERT_TRUE(step.retain(kept));
      cache.retain_rows(kept);
      rows = {1};
      reference_cross = gathered(cross, rows);
    }
  }
  const DeviceGraphCache::Stats stats = step.graph_stats();
  std::cout << "recorded " << stats.recorded << " replayed " << stats.replayed << " declined "
            << stats.declined << " " << stats.last_decline << "\n";
  EXPECT_EQ(stats.declined, 0) << stats.last_decline;
  // Per row count (4, 3, 1): a measured step, a recording, then replays.
  EXPECT_EQ(stats.recorded, 3);
  EXPECT_EQ(stats.replayed, 12);  // 7 at 4 rows, 2 at 3, 3 at 1 (recordings replay too)
}

INSTANTIATE_TEST_SUITE_P(Stores, WhisperDecodeGraph,
                         ::testing::Values(Case{DType::kF16, false}, Case{DType::kF16, true},
                                           Case{DType::kF32, false}, Case{DType::kBF16, true}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) +
                                  (info.param.fp8_cache ? "_fp8" : "");
                         });

}  // namespace
}  // namespace oasr
