// Qwen2-Audio (src/models/qwen2_audio) against transformers'
// Qwen2AudioForConditionalGeneration on a random-weight model that
// qwen2_audio/make_qwen2_audio_case.py saves with save_pretrained (sharded
// safetensors, Qwen2's byte-level BPE, Whisper's 128-mel extractor), loaded
// by oasr as it is: per utterance, the log-mel of the processor, the audio
// tower's pooled output and the projector's, the tokenized prompt with
// <|AUDIO|> expanded, the logits at the prompt's last place, and greedy
// search's tokens and text.
//
// Tolerances (float32 on both sides, different GEMM blockings and
// summation orders; measured differences are printed per case). The
// processor computes the log-mel with transformers' torch path (float32
// STFT), which audio/whisper_mel.h documents as within 5e-5 of oasr's (and
// of HF's numpy path, which oasr matches bit for bit): measured 2.0e-5. That
// difference reaches the projector's output (values up to |6|) as 3.3e-5 at
// most, hence 1e-4 there; the logits (O(10)) differ by 4e-5 at most. The
// greedy tokens must be identical: the generator reports the smallest
// top-1 / top-2 logit margin over the greedy steps (0.16 at seed 2), far
// above the float32 noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "audio/whisper_mel.h"
#include "core/error.h"
#include "decode/byte_bpe_tokenizer.h"
#include "engine/asr_engine.h"
#include "io/safetensors.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"
#include "models/qwen2_audio/qwen2_audio_model.h"
#include "ops/concat.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kFeatureAtol = 5e-5f;
constexpr float kTowerAtol = 1e-4f;
constexpr float kLogitAtol = 1e-4f;
constexpr float kLogitRtol = 1e-5f;

struct Case {
  models::Qwen2AudioSource source;
  std::unique_ptr<models::Qwen2AudioModel> model;
  io::SafeTensorsFile reference;
  json summary;
};

const Case& the_case() {
  static const Case* loaded = [] {
    auto* c = new Case{};
    const fs::path root = testing::oracle_dir();
    c->source = models::load_qwen2_audio_dir(root / "model");
    c->model = std::make_unique<models::Qwen2AudioModel>(c->source.config);
    c->model->load(*c->source.weights);
    c->reference = io::SafeTensorsFile::open(root / "reference" / "reference.safetensors");
    c->summary = json::parse(c->reference.metadata().at("summary"));
    return c;
  }();
  return *loaded;
}

std::vector<int64_t> ids_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const int64_t*>(c.raw_data());
  return std::vector<int64_t>(p, p + c.numel());
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::kF32).contiguous();
  const Tensor y = b.to(DType::kF32).contiguous();
  float worst = 0.0f;
  const auto* p = static_cast<const float*>(x.raw_data());
  const auto* q = static_cast<const float*>(y.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) worst = std::max(worst, std::abs(p[i] - q[i]));
  return worst;
}

int64_t argmax(const Tensor& logits) {
  const Tensor x = logits.to(DType::kF32).contiguous();
  const auto* p = static_cast<const float*>(x.raw_data());
  int64_t best = 0;
  for (int64_t i = 1; i < x.numel(); ++i) best = p[i] > p[best] ? i : best;
  return best;
}

TEST(Qwen2AudioOracle, DirectoryReadAsSaved) {
  const Case& c = the_case();
  const models::Qwen2AudioConfig& config = c.source.config;
  EXPECT_EQ(config.audio.d_model, 64);
  EXPECT_EQ(config.audio.num_mel_bins, 128);           // HF default (not in the file)
  EXPECT_EQ(config.audio.max_source_positions, 1500);  // HF default
  EXPECT_EQ(config.text.num_key_value_heads, 2);
  EXPECT_EQ(config.text.rope_theta, 1e6);
  EXPECT_FLOAT_EQ(static_cast<float>(config.text.rms_norm_eps), 1e-5f);
  EXPECT_FALSE(config.text.tie_word_embeddings);  // HF default
  EXPECT_EQ(c.source.weights_path.filename(), "model.safetensors.index.json");
  EXPECT_EQ(c.source.generation.eos_token_ids, std::vector<int64_t>{400});
  EXPECT_EQ(c.source.generation.max_new_tokens, 16);
}

TEST(Qwen2AudioOracle, MatchesTransformers) {
  const Case& c = the_case();
  const auto tokenizer =
      decode::ByteLevelBpeTokenizer::from_tokenizer_json(c.source.tokenizer_path);
  const audio::WhisperLogMel mel(c.source.config.audio.num_mel_bins);
  const int64_t audio_token = c.source.config.audio_token_index;
  const std::vector<int64_t> eos = c.source.generation.eos_token_ids;
  for (const json& u : c.summary.at("utterances")) {
    const std::string key = u.at("id").get<std::string>();
    SCOPED_TRACE(key);
    const Tensor audio = c.reference.get(key + ".audio");
    const auto* samples = static_cast<const float*>(audio.raw_data());
    const Tensor features = mel.compute(std::span<const float>(samples, audio.numel()));
    // The processor's feature_attention_mask: one frame per started hop.
    const int64_t frames = (audio.numel() + 159) / 160;
    ASSERT_EQ(frames, u.at("mel_frames").get<int64_t>());
    const Tensor expected_features = c.reference.get(key + ".features");
    std::cout << key << ": log-mel max |diff| "
              << max_abs_diff(features.slice(1, 0, frames), expected_features) << "\n";
    EXPECT_TRUE(testing::all_close(features.slice(1, 0, frames).contiguous(), expected_features,
                                   kFeatureAtol, 0.0f));

    const std::vector<int64_t> frame_counts{frames};
    const std::vector<Tensor> projected =
        c.model->encode_audio(features.unsqueeze(0), frame_counts);
    const Tensor expected_projected = c.reference.get(key + ".projected");
    ASSERT_EQ(projected[0].shape(), expected_projected.shape());
    ASSERT_EQ(projected[0].size(0), u.at("audio_tokens").get<int64_t>());
    std::cout << key << ": projected max |diff| " << max_abs_diff(projected[0], expected_projected)
              << "\n";
    EXPECT_TRUE(testing::all_close(projected[0], expected_projected, kTowerAtol, 0.0f));

    // The prompt as the processor builds it: the ASR prompt tokenized, its
    // one <|AUDIO|> expanded to one placeholder per audio token.
    std::vector<int64_t> ids;
    for (const int64_t id : tokenizer.encode(c.summary.at("prompt").get<std::string>())) {
      if (id == audio_token) {
        ids.insert(ids.end(), static_cast<size_t>(projected[0].size(0)), audio_token);
      } else {
        ids.push_back(id);
      }
    }
    ASSERT_EQ(ids, ids_of(c.reference.get(key + ".input_ids")));

    const Tensor embeds = c.model->embed_prompt(ids, projected[0]).unsqueeze(0);
    layers::KvCache cache = c.model->make_cache(1, static_cast<int64_t>(ids.size()) + 16);
    Tensor logits = c.model->prefill(embeds, cache);
    const Tensor expected_logits = c.reference.get(key + ".prefill_logits");
    std::cout << key << ": prefill logits max |diff| "
              << max_abs_diff(logits.select(0, 0), expected_logits) << "\n";
    EXPECT_TRUE(testing::all_close(logits.select(0, 0).contiguous(), expected_logits, kLogitAtol,
                                   kLogitRtol));

    std::vector<int64_t> tokens;
    for (int64_t step = 0; step < c.source.generation.max_new_tokens; ++step) {
      const int64_t token = argmax(logits.select(0, 0));
      tokens.push_back(token);
      if (std::find(eos.begin(), eos.end(), token) != eos.end()) break;
      logits = c.model->step(Tensor::from_vector(std::vector<int64_t>{token}, {1}), cache);
    }
    EXPECT_EQ(tokens, ids_of(c.reference.get(key + ".greedy")));
    EXPECT_EQ(tokenizer.decode(tokens, /*skip_special_tokens=*/true),
              u.at("text").get<std::string>());
  }
}

// The served path: the architecture registry finds the directory, the
// shared load sequence builds the model, the recognizer prompts, decodes
// greedily and detokenizes. Its tokens are the generator's without the
// final eos, alone and with the other utterance in the batch.
TEST(Qwen2AudioOracle, EngineTranscribesAsTransformers) {
  const Case& c = the_case();
  std::vector<std::vector<float>> waves;
  std::vector<std::vector<int64_t>> expected_tokens;
  std::vector<std::string> expected_text;
  for (const json& u : c.summary.at("utterances")) {
    const std::string key = u.at("id").get<std::string>();
    const Tensor audio = c.reference.get(key + ".audio");
    const auto* samples = static_cast<const float*>(audio.raw_data());
    waves.emplace_back(samples, samples + audio.numel());
    std::vector<int64_t> tokens = ids_of(c.reference.get(key + ".greedy"));
    if (!tokens.empty() && tokens.back() == c.source.generation.eos_token_ids.front()) {
      tokens.pop_back();
    }
    expected_tokens.push_back(tokens);
    expected_text.push_back(u.at("text").get<std::string>());
  }
  for (const int64_t batch : {1, 2}) {
    SCOPED_TRACE("max_batch_size " + std::to_string(batch));
    engine::EngineConfig config;
    config.ckpt_dir = testing::oracle_dir() / "model";
    config.max_batch_size = batch;
    const engine::ASREngine asr(config);
    const std::vector<engine::Transcript> got = asr.transcribe(waves);
    ASSERT_EQ(got.size(), waves.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, expected_tokens[i]) << "utterance " << i;
      EXPECT_EQ(got[i].text, expected_text[i]) << "utterance " << i;
    }
  }
}

TEST(Qwen2AudioOracle, RefusesAMismatchedPlaceholderCount) {
  const Case& c = the_case();
  const int64_t audio_token = c.source.config.audio_token_index;
  const Tensor audio = Tensor::zeros({3, c.source.config.text.hidden_size}, DType::kF32);
  const std::vector<int64_t> ids{1, audio_token, audio_token, 2};
  try {
    (void)c.model->embed_prompt(ids, audio);
    FAIL() << "two placeholders for three audio tokens were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 audio placeholder tokens"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("3 audio tokens"), std::string::npos) << e.what();
  }
}

// A copy of the generated directory with one file edited (a JSON edit, or
// the file removed), and the refusal that loading it must give.
struct BadDirectory {
  const char* what;
  const char* file;
  std::function<void(json&)> edit;   // empty: remove the file
  std::vector<const char*> message;  // each must appear in the error
};

TEST(Qwen2AudioOracle, RefusesBadDirectoriesByName) {
  const fs::path source = testing::oracle_dir() / "model";
  const std::vector<BadDirectory> cases = {
      {"rope scaling",
       "config.json",
       [](json& c) {
         c["text_config"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
       },
       {"text_config", "rope_scaling", "yarn"}},
      {"sliding window",
       "config.json",
       [](json& c) { c["text_config"]["use_sliding_window"] = true; },
       {"use_sliding_window"}},
      {"another activation",
       "config.json",
       [](json& c) { c["text_config"]["hidden_act"] = "gelu"; },
       {"hidden_act", "\"gelu\"", "silu"}},
      {"kv heads not dividing",
       "config.json",
       [](json& c) { c["text_config"]["num_key_value_heads"] = 3; },
       {"num_attention_heads 4", "num_key_value_heads 3"}},
      {"audio token outside the vocabulary",
       "config.json",
       [](json& c) { c["audio_token_index"] = 100000; },
       {"audio_token_index 100000"}},
      {"a size of the wrong type",
       "config.json",
       [](json& c) { c["audio_config"]["d_model"] = "64"; },
       {"audio_config", "\"d_model\" must be an integer"}},
      {"more layers than the shards hold",
       "config.json",
       [](json& c) { c["text_config"]["num_hidden_layers"] = 3; },
       {"num_hidden_layers"}},
      {"another mel count",
       "preprocessor_config.json",
       [](json& c) { c["feature_size"] = 80; },
       {"preprocessor_config.json", "feature_size is 80"}},
      {"no preprocessor config", "preprocessor_config.json", {}, {"preprocessor_config.json"}},
      {"no tokenizer", "tokenizer.json", {}, {"tokenizer.json", "missing"}},
      {"no weights index", "model.safetensors.index.json", {}, {"no weights"}},
      {"eos outside the vocabulary",
       "generation_config.json",
       [](json& c) {
         c["eos_token_id"] = {400, 5000};
       },
       {"eos_token_id 5000"}},
  };
  for (const BadDirectory& bad : cases) {
    SCOPED_TRACE(bad.what);
    testing::TempDir dir;
    fs::copy(source, dir.path(), fs::copy_options::recursive);
    const fs::path file = dir.path() / bad.file;
    if (bad.edit) {
      json contents = json::parse(std::ifstream(file));
      bad.edit(contents);
      std::ofstream(file) << contents.dump();
    } else {
      fs::remove(file);
    }
    try {
      engine::EngineConfig config;
      config.ckpt_dir = dir.path();
      const engine::ASREngine asr(config);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      std::cout << bad.what << ": " << e.what() << "\n";
      for (const char* part : bad.message) {
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
            << "missing '" << part << "' in: " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace oasr
