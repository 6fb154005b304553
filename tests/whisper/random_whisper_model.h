// A small Whisper with random weights for tests that need a whole model but
// no real checkpoint: the layer count, heads and widths of tiny.en scaled
// down. Each LayerNorm's gamma spans two decades across channels, so the
// activations have the outlier channels SmoothQuant exists for.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"
#include "models/whisper/whisper_model.h"

namespace oasr::testing {

// d_model / heads is the head dimension (64 reaches the CUDA decoder kernel).
inline models::WhisperConfig small_whisper_config(int64_t d_model = 64, int64_t heads = 4) {
  models::WhisperConfig c;
  c.num_mel_bins = 16;
  c.d_model = d_model;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.encoder_attention_heads = heads;
  c.decoder_attention_heads = heads;
  c.encoder_ffn_dim = 2 * d_model;
  c.decoder_ffn_dim = 2 * d_model;
  c.vocab_size = 96;
  c.max_source_positions = 24;
  c.max_target_positions = 16;
  return c;
}

// Float32 on the CPU, weights N(0, 0.15^2), seeded.
inline std::unique_ptr<models::WhisperModel> random_whisper_model(
    const models::WhisperConfig& config, unsigned seed = 7) {
  auto model = std::make_unique<models::WhisperModel>(config);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, slot] : model->named_parameters()) {
    if (!slot->required) continue;
    Tensor t = Tensor::empty(slot->shape, DType::kF32);
    float* data = t.data<float>();
    const bool norm = name.find("layer_norm") != std::string::npos;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (norm && name.ends_with(".weight")) {
        data[i] = std::pow(10.0f, 2.0f * static_cast<float>(i % 7) / 6.0f - 1.0f);
      } else {
        data[i] = 0.15f * normal(rng);
      }
    }
    tensors.emplace_back(name, std::move(t));
  }
  model->load(OrderedTensorSource(std::move(tensors)));
  return model;
}

// A float32 log-mel input [batch, mels, 2 * max_source_positions].
inline Tensor random_whisper_mel(const models::WhisperConfig& config, int64_t batch = 1,
                                 unsigned seed = 11) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor mel =
      Tensor::empty({batch, config.num_mel_bins, 2 * config.max_source_positions}, DType::kF32);
  for (int64_t i = 0; i < mel.numel(); ++i) mel.data<float>()[i] = normal(rng);
  return mel;
}

}  // namespace oasr::testing
