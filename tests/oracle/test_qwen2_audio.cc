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
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "audio/whisper_mel.h"
#include "core/error.h"
#include "decode/byte_bpe_tokenizer.h"
#include "engine/asr_engine.h"
#include "engine/continuous_batch.h"
#include "io/safetensors.h"
#include "models/qwen2_audio/qwen2_audio_dir.h"
#include "models/qwen2_audio/qwen2_audio_generation.h"
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

using testing::int64_values;
using testing::max_abs_difference;

int64_t argmax(const Tensor& logits) {
  const Tensor x = logits.to(DType::kF32).contiguous();
  const auto* p = static_cast<const float*>(x.raw_data());
  int64_t best = 0;
  for (int64_t i = 1; i < x.numel(); ++i) best = p[i] > p[best] ? i : best;
  return best;
}

// The generator's utterances as the engine serves them: the audio, and
// transformers' greedy tokens without the final eos and text.
struct Served {
  std::vector<std::vector<float>> waves;
  std::vector<std::vector<int64_t>> tokens;
  std::vector<std::string> texts;
};

Served served_utterances(const Case& c) {
  Served out;
  for (const json& u : c.summary.at("utterances")) {
    const std::string key = u.at("id").get<std::string>();
    const Tensor audio = c.reference.get(key + ".audio");
    const auto* samples = static_cast<const float*>(audio.raw_data());
    out.waves.emplace_back(samples, samples + audio.numel());
    std::vector<int64_t> tokens = int64_values(c.reference.get(key + ".greedy"));
    if (!tokens.empty() && tokens.back() == c.source.generation.eos_token_ids.front()) {
      tokens.pop_back();
    }
    out.tokens.push_back(tokens);
    out.texts.push_back(u.at("text").get<std::string>());
  }
  return out;
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
              << max_abs_difference(features.slice(1, 0, frames), expected_features) << "\n";
    EXPECT_TRUE(testing::all_close(features.slice(1, 0, frames).contiguous(), expected_features,
                                   kFeatureAtol, 0.0f));

    const std::vector<int64_t> frame_counts{frames};
    const std::vector<Tensor> projected =
        c.model->encode_audio(features.unsqueeze(0), frame_counts);
    const Tensor expected_projected = c.reference.get(key + ".projected");
    ASSERT_EQ(projected[0].shape(), expected_projected.shape());
    ASSERT_EQ(projected[0].size(0), u.at("audio_tokens").get<int64_t>());
    std::cout << key << ": projected max |diff| "
              << max_abs_difference(projected[0], expected_projected) << "\n";
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
    ASSERT_EQ(ids, int64_values(c.reference.get(key + ".input_ids")));

    const Tensor embeds = c.model->embed_prompt(ids, projected[0]).unsqueeze(0);
    // Small blocks, so the prompt and the steps span several.
    layers::PagedKvCache cache = c.model->make_cache(64, 4);
    const layers::PagedKvCache::SequenceId sequence[] = {cache.open()};
    Tensor logits = c.model->forward(embeds, sequence, cache);
    const Tensor expected_logits = c.reference.get(key + ".prefill_logits");
    std::cout << key << ": prefill logits max |diff| "
              << max_abs_difference(logits.select(0, 0), expected_logits) << "\n";
    EXPECT_TRUE(testing::all_close(logits.select(0, 0).contiguous(), expected_logits, kLogitAtol,
                                   kLogitRtol));

    std::vector<int64_t> tokens;
    for (int64_t step = 0; step < c.source.generation.max_new_tokens; ++step) {
      const int64_t token = argmax(logits.select(0, 0));
      tokens.push_back(token);
      if (std::find(eos.begin(), eos.end(), token) != eos.end()) break;
      logits =
          c.model->step(Tensor::from_vector(std::vector<int64_t>{token}, {1}), sequence, cache);
    }
    EXPECT_EQ(tokens, int64_values(c.reference.get(key + ".greedy")));
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
  const Served served = served_utterances(c);
  const auto& waves = served.waves;
  const auto& expected_tokens = served.tokens;
  const auto& expected_text = served.texts;
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

// Iteration-level batching (models/qwen2_audio/qwen2_audio_generation.h):
// requests of different prompt lengths and token budgets, joining a running
// batch at different steps, and requests preempted when the pool runs short
// and started over, each give exactly the tokens they give alone.
// Beam search with 3 beams gives generate(num_beams=3)'s tokens (the
// generator's beam_search(): transformers' BeamSearchScorer) and its
// sequences_scores: float32 on both sides, the per-token log-probabilities
// differing by the logits' 4e-5, so the length-normalised score within 2e-4.
// The same requests beside greedy ones in one continuous batch (the server's
// path) get the same tokens.
TEST(Qwen2AudioOracle, BeamSearchGivesTransformersTokensAndScores) {
  const Case& c = the_case();
  const Served served = served_utterances(c);
  std::vector<std::vector<int64_t>> expected;
  std::vector<float> scores;
  for (const json& u : c.summary.at("utterances")) {
    const std::string key = u.at("id").get<std::string>();
    expected.push_back(int64_values(c.reference.get(key + ".beam3")));
    scores.push_back(c.reference.get(key + ".beam3_score").data<float>()[0]);
  }
  engine::EngineConfig config;
  config.ckpt_dir = testing::oracle_dir() / "model";
  config.max_batch_size = 2;
  const engine::ASREngine asr(config);
  engine::DecodeOverrides beam;
  beam.set("decode_method", "beam_search");
  beam.set("beam_size", int64_t{3});
  const std::vector<engine::Transcript> got = asr.transcribe(served.waves, beam);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i]) << "utterance " << i;
    EXPECT_NE(got[i].tokens, served.tokens[i])
        << "utterance " << i << ": beam == greedy proves little";
    EXPECT_NEAR(got[i].score, scores[i], 2e-4) << "utterance " << i;
    std::cout << "utterance " << i << ": sequences_scores " << got[i].score << " vs " << scores[i]
              << "\n";
  }
  engine::ContinuousBatch batch = engine::ContinuousBatch(asr);
  std::map<int64_t, std::vector<int64_t>> want;
  for (size_t round = 0; round < 2; ++round) {
    for (size_t i = 0; i < served.waves.size(); ++i) {
      const bool beamed = (round + i) % 2 == 1;
      const int64_t ticket =
          batch.submit(served.waves[i], beamed ? beam : engine::DecodeOverrides{},
                       "utterance " + std::to_string(i));
      want[ticket] = beamed ? expected[i] : served.tokens[i];
    }
  }
  std::map<int64_t, std::vector<int64_t>> answered;
  while (batch.pending() > 0) {
    for (auto& [ticket, result] : batch.step()) {
      ASSERT_TRUE(result.ok()) << result.error->what();
      answered[ticket] = result.transcript->tokens;
    }
  }
  EXPECT_EQ(answered, want);
  engine::DecodeOverrides one_beam = beam;
  one_beam.set("beam_size", int64_t{1});
  EXPECT_THROW(asr.transcribe(served.waves, one_beam), Error);
}

TEST(Qwen2AudioOracle, ContinuousBatchingGivesEachRequestItsTokensAlone) {
  const Case& c = the_case();
  const auto tokenizer =
      decode::ByteLevelBpeTokenizer::from_tokenizer_json(c.source.tokenizer_path);
  const int64_t audio_token = c.source.config.audio_token_index;
  std::vector<models::Qwen2AudioRequest> requests;
  const std::vector<int64_t> budgets = {16, 5, 11, 16, 3, 9};
  size_t next_budget = 0;
  for (const json& u : c.summary.at("utterances")) {
    const std::string key = u.at("id").get<std::string>();
    const Tensor projected = c.reference.get(key + ".projected");
    // The whole utterance, its first half, and its first 7 audio tokens.
    for (const int64_t rows : {projected.size(0), projected.size(0) / 2, int64_t{7}}) {
      models::Qwen2AudioRequest request;
      for (const int64_t id : tokenizer.encode(c.summary.at("prompt").get<std::string>())) {
        if (id == audio_token) {
          request.ids.insert(request.ids.end(), static_cast<size_t>(rows), audio_token);
        } else {
          request.ids.push_back(id);
        }
      }
      request.audio = projected.narrow(0, 0, rows).contiguous();
      request.max_new_tokens = budgets[next_budget++ % budgets.size()];
      requests.push_back(request);
    }
  }
  const std::vector<int64_t> eos = c.source.generation.eos_token_ids;
  const auto run = [&](const models::Qwen2AudioBatchLimits& limits, size_t join_later,
                       models::Qwen2AudioContinuousBatch::Stats* stats) {
    models::Qwen2AudioContinuousBatch generation(*c.model, eos, limits);
    std::vector<std::vector<int64_t>> out(requests.size());
    size_t submitted = 0;
    for (; submitted < requests.size() - join_later; ++submitted) {
      generation.submit(requests[submitted]);
    }
    int64_t iterations = 0;
    while (!generation.idle() || submitted < requests.size()) {
      // The rest join one by one while the others decode.
      if (iterations++ >= 2 && submitted < requests.size())
        generation.submit(requests[submitted++]);
      for (auto& done : generation.iterate()) out[static_cast<size_t>(done.ticket)] = done.tokens;
    }
    if (stats != nullptr) *stats = generation.stats();
    return out;
  };
  std::vector<std::vector<int64_t>> alone;
  for (size_t i = 0; i < requests.size(); ++i) {
    models::Qwen2AudioContinuousBatch generation(*c.model, eos, {1, 64, 16});
    generation.submit(requests[i]);
    std::vector<int64_t> tokens;
    while (!generation.idle()) {
      for (auto& done : generation.iterate()) tokens = done.tokens;
    }
    EXPECT_FALSE(tokens.empty()) << "request " << i;
    std::cout << "request " << i << ": prompt " << requests[i].ids.size() << ", " << tokens.size()
              << " tokens of " << requests[i].max_new_tokens << "\n";
    alone.push_back(tokens);
  }
  models::Qwen2AudioContinuousBatch::Stats stats;
  EXPECT_EQ(run({4, 256, 4}, 3, &stats), alone) << "4 at once, 3 joining later";
  EXPECT_GE(stats.most_running, 3);
  // Pools of barely more than one request's worst case, in blocks of 1 and
  // 4 tokens: sequences run short of blocks and the newest is preempted
  // and started over.
  int64_t longest = 0;
  for (const auto& r : requests) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.ids.size()) + r.max_new_tokens);
  }
  int64_t preemptions = 0;
  for (const int64_t block_size : {1, 4}) {
    for (const int64_t spare : {2, 8, 20}) {
      const int64_t blocks = (longest + block_size - 1) / block_size + spare;
      EXPECT_EQ(run({6, blocks, block_size}, 0, &stats), alone)
          << blocks << " blocks of " << block_size;
      std::cout << blocks << " blocks of " << block_size << ": " << stats.preemptions
                << " preemptions, " << stats.decode_steps << " decode steps, " << stats.prefills
                << " prefills, at most " << stats.most_running << " running\n";
      preemptions += stats.preemptions;
    }
  }
  EXPECT_GT(preemptions, 0);
}

// On a GPU: float32 serving gives transformers' tokens; every served dtype
// gives each utterance the tokens it gets alone when it shares the running
// batch (the engine at max batch 1, 2 and 4), and fp8 KV too.
TEST(Qwen2AudioOracle, CudaServesTheTokensOfTransformersAndOfEachRowAlone) {
  OASR_SKIP_WITHOUT_CUDA();
  const Case& c = the_case();
  const Served served = served_utterances(c);
  const auto& waves = served.waves;
  const auto& expected = served.tokens;
  // Each utterance twice, so a batch of 2 or 4 mixes lengths and budgets.
  std::vector<std::vector<float>> load = waves;
  load.insert(load.end(), waves.begin(), waves.end());
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    for (const char* kv : {"", "fp8_e4m3"}) {
      SCOPED_TRACE(std::string(dtype) + " kv " + kv);
      std::vector<std::vector<int64_t>> alone;
      for (const int64_t batch : {1, 2, 4}) {
        engine::EngineConfig config;
        config.ckpt_dir = testing::oracle_dir() / "model";
        config.device = "cuda";
        config.dtype = dtype;
        config.max_batch_size = batch;
        if (*kv != '\0') {
          config.quantization = quant::QuantizationConfig::parse({.kv_cache = kv});
        }
        const engine::ASREngine asr(config);
        const std::vector<engine::Transcript> got = asr.transcribe(load);
        ASSERT_EQ(got.size(), load.size());
        std::vector<std::vector<int64_t>> tokens;
        for (const auto& t : got) tokens.push_back(t.tokens);
        if (batch == 1) {
          alone = tokens;
          if (std::string(dtype) == "float32" && *kv == '\0') {
            for (size_t i = 0; i < waves.size(); ++i) EXPECT_EQ(tokens[i], expected[i]) << i;
          }
        } else {
          EXPECT_EQ(tokens, alone) << "max batch " << batch;
        }
      }
      size_t equal = 0;
      for (size_t i = 0; i < waves.size(); ++i) equal += alone[i] == expected[i];
      std::cout << dtype << " kv '" << kv << "': " << equal << " of " << waves.size()
                << " utterances with transformers' float32 tokens\n";
    }
  }
  // Beam search on the device (each step's candidates ranked there, the
  // beams forking the paged prompt): float32 gives generate(num_beams=3)'s
  // tokens. Its sequences_scores sit 5.4e-3 and 3.0e-3 from transformers'
  // (H100, 2026-12-07), where the CPU's are within 1e-6: the float32 device
  // path's log-probabilities differ more than the CPU's, not yet traced to
  // a kernel; 1e-2 still catches a wrong length normalisation (7e-2 here).
  engine::EngineConfig config;
  config.ckpt_dir = testing::oracle_dir() / "model";
  config.device = "cuda";
  config.max_batch_size = 2;
  const engine::ASREngine asr(config);
  engine::DecodeOverrides beam;
  beam.set("decode_method", "beam_search");
  beam.set("beam_size", int64_t{3});
  const std::vector<engine::Transcript> got = asr.transcribe(waves, beam);
  ASSERT_EQ(got.size(), waves.size());
  for (size_t i = 0; i < waves.size(); ++i) {
    const std::string key = c.summary.at("utterances").at(i).at("id").get<std::string>();
    EXPECT_EQ(got[i].tokens, int64_values(c.reference.get(key + ".beam3")))
        << "beam, utterance " << i;
    const float reference = c.reference.get(key + ".beam3_score").data<float>()[0];
    EXPECT_NEAR(got[i].score, reference, 1e-2) << i;
    std::cout << "beam utterance " << i << ": sequences_scores " << got[i].score << " vs "
              << reference << "\n";
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
