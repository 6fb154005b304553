// Whisper's quantization layout (models/whisper/whisper_materialize.h): every
// fold it declares must leave the full-precision network's function as it
// was (SmoothQuant rewrites X W^T as (X / s)(W s)^T, exact in real
// arithmetic), and every path it names must be one of the model's modules.
// A fold declared where a non-linear op or a second reader sits between
// producer and consumer would change the logits by far more than rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "layers/module.h"
#include "layers/quantizable.h"
#include "models/whisper/whisper_materialize.h"
#include "quant/calibration/observers.h"
#include "quantize/apply.h"
#include "quantize/apply_links.h"
#include "quantize/smoothquant.h"
#include "random_whisper_model.h"

namespace oasr::models {
namespace {

using testing::random_whisper_mel;
using testing::random_whisper_model;

WhisperConfig small_config() {
  return testing::small_whisper_config();
}
std::unique_ptr<WhisperModel> random_model(const WhisperConfig& c) {
  return random_whisper_model(c);
}
Tensor random_mel(const WhisperConfig& c) {
  return random_whisper_mel(c);
}

// Encoder output and the logits of a 4-token decoder prefix, as float32.
std::vector<float> run(const WhisperModel& model, const Tensor& mel) {
  const Tensor encoded = model.encode(mel);
  const WhisperModel::CrossKv cross = model.cross_kv(encoded);
  layers::KvCache cache = model.make_cache(1, 8);
  const Tensor tokens = Tensor::from_vector<int64_t>({3, 17, 42, 5}, {1, 4});
  const std::vector<int64_t> rows = {0};
  const Tensor logits = model.decode(tokens, cross, rows, cache).to(DType::kF32).contiguous();
  std::vector<float> out(logits.data<float>(), logits.data<float>() + logits.numel());
  const Tensor e = encoded.to(DType::kF32).contiguous();
  out.insert(out.end(), e.data<float>(), e.data<float>() + e.numel());
  return out;
}

void observe_all(Module& model, quant::InputObserver* observer) {
  for (auto& [path, module] : model.named_modules()) {
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module); layer != nullptr) {
      layer->set_input_observer(observer);
    }
  }
}

TEST(WhisperQuantizationLayout, NamesOnlyModulesOfTheModel) {
  const WhisperConfig config = small_config();
  const auto model = random_model(config);
  const auto modules = quant::modules_by_path(*model);
  const quant::QuantLayout layout = whisper_quantization_layout(config);
  // 2 encoder layers x (qkv, v->o, fc1, fc2) + 2 decoder layers x (qkv, v->o,
  // cross q, cross k/v, cross v->o, fc1, fc2).
  EXPECT_EQ(layout.smooth_groups.size(), 2u * 4u + 2u * 7u);
  EXPECT_EQ(layout.gemm_chains.size(), 4u);
  std::set<std::string> consumers;
  for (const quant::SmoothGroup& group : layout.smooth_groups) {
    if (!group.producer.empty()) {
      EXPECT_TRUE(modules.count(group.producer)) << group.producer;
    }
    for (const std::string& path : group.consumers) {
      EXPECT_TRUE(modules.count(path)) << path;
      EXPECT_TRUE(consumers.insert(path).second) << path << " is in two groups";
    }
  }
  // Every GEMM but the tied head is smoothed by exactly one group.
  int64_t linears = 0;
  for (const auto& [path, module] : modules) {
    if (dynamic_cast<const layers::QuantizableLayer*>(module) != nullptr &&
        module->type_name().find("Conv") == std::string::npos && path != "proj_out") {
      ++linears;
      EXPECT_TRUE(consumers.count(path)) << path << " is in no smoothing group";
    }
  }
  EXPECT_EQ(linears, static_cast<int64_t>(consumers.size()));
}

TEST(WhisperQuantizationLayout, SmoothQuantFoldsKeepTheFunction) {
  const WhisperConfig config = small_config();
  auto model = random_model(config);
  const Tensor mel = random_mel(config);
  quant::CalibrationRecorder recorder;
  observe_all(*model, &recorder);
  const std::vector<float> before = run(*model, mel);
  observe_all(*model, nullptr);

  const quant::QuantLayout layout = whisper_quantization_layout(config);
  const auto gamma = [&] {
    return quant::modules_by_path(*model)
        .at("model.encoder.layers.0.self_attn_layer_norm")
        ->param("weight");
  };
  const Tensor gamma_before = gamma().clone();
  std::set<std::string> quantized;
  for (const quant::SmoothGroup& group : layout.smooth_groups) {
    quantized.insert(group.consumers.begin(), group.consumers.end());
  }
  const quant::SmoothQuantResult result =
      quant::apply_smoothquant(*model, layout, recorder, 0.5, quantized);
  // The folds rewrote what they fold into: 2 + 3 norms a layer, the v_proj
  // rows of every attention, and every folded consumer's weight.
  const std::set<std::string> expected_rewritten = {
      "model.encoder.layers.0.self_attn_layer_norm.weight",
      "model.encoder.layers.1.final_layer_norm.bias",
      "model.decoder.layers.0.encoder_attn_layer_norm.weight",
      "model.decoder.layers.1.encoder_attn.v_proj.weight",
      "model.decoder.layers.1.encoder_attn.out_proj.weight",
      "model.encoder.layers.0.self_attn.v_proj.bias",
  };
  for (const std::string& name : expected_rewritten) {
    EXPECT_TRUE(result.rewritten.count(name)) << name;
  }
  // Runtime groups leave the weights alone and hand the consumer 1/s.
  EXPECT_TRUE(result.smooth_inv.count("model.decoder.layers.0.encoder_attn.k_proj"));
  EXPECT_TRUE(result.smooth_inv.count("model.encoder.layers.1.fc2"));
  EXPECT_FALSE(result.smooth_inv.count("model.encoder.layers.1.fc1"));

  const std::vector<float> after = run(*model, mel);
  ASSERT_EQ(before.size(), after.size());
  double max_abs = 0.0;
  double max_diff = 0.0;
  for (size_t i = 0; i < before.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(static_cast<double>(before[i])));
    max_diff = std::max(max_diff, std::abs(static_cast<double>(after[i]) - before[i]));
  }
  // float32 rounding of rescaled weights: ~1e-6 relative. A fold in the wrong
  // place (through a GELU, or into a norm with a second reader) moves the
  // outputs by O(1) relative.
  EXPECT_LT(max_diff, 1e-4 * max_abs) << "max |after - before| " << max_diff << " of " << max_abs;
  // And the folds were not no-ops: a folded norm's gamma moved.
  const Tensor gamma_after = gamma();
  double moved = 0.0;
  for (int64_t i = 0; i < gamma_after.numel(); ++i) {
    moved = std::max(moved, std::abs(static_cast<double>(gamma_after.data<float>()[i]) -
                                     gamma_before.data<float>()[i]));
  }
  EXPECT_GT(moved, 1e-3);
}

// Served quantized, the layout's pre-norm links arm: the encoder's two norms
// a layer and the decoder's final_layer_norm emit their GEMMs' 8-bit input.
TEST(WhisperQuantizationLayout, LinksArmTheDeclaredNorms) {
  const WhisperConfig config = small_config();
  auto model = random_model(config);
  const quant::QuantizationConfig online =
      quant::QuantizationConfig::parse({.scheme = "int8_w8a8"});
  quant::SpecOptions options;
  options.online = true;
  const quant::QuantLayout layout = whisper_quantization_layout(config);
  const quant::QuantizationSpec spec = quant::spec_from_config(online, *model, layout, options);
  quant::quantize_model_online(*model, spec);
  quant::BindOptions bind;
  bind.device = Device::cpu();
  quant::bind_quantization(*model, bind);
  const quant::LinkSummary links = quant::link_quantization(*model, layout);
  EXPECT_EQ(links.norm_links, 2 * config.encoder_layers + config.decoder_layers);
  EXPECT_EQ(links.chain_links, 0);  // fc2 quantizes per token online: no static scale to chain to
  // Per encoder layer, the standalone quantizes left: out_proj's and fc2's.
  EXPECT_EQ(links.standalone_quantize_launches_per_block, (std::vector<int64_t>{2, 2}));
  const auto before = run(*model, random_mel(config));
  quant::LinkOptions off;
  off.enabled = false;
  EXPECT_EQ(quant::link_quantization(*model, layout, off).norm_links, 0);
  // The fused producers give the unfused pairs' bits.
  EXPECT_EQ(run(*model, random_mel(config)), before);
}

}  // namespace
}  // namespace oasr::models
