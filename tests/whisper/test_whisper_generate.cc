// The Whisper search on the model (decode/whisper_search +
// decode/whisper_model_step + models::WhisperModel) against Hugging Face
// transformers' WhisperForConditionalGeneration.generate() on random-weight
// models (gen_whisper_generate.py): English-only and multilingual prompts,
// suppress_tokens and begin_suppress_tokens from the generation config,
// greedy and num_beams=5 with length_penalty 1.0 / 0.6 / 1.8, max_length 9
// (hypotheses run into it) and 40 (the model's max_target_positions), three
// utterances decoded as one batch as HF does.
//
// Tolerances: token ids must be equal (the weights make distributions peaked
// so fp32 GEMM blocking differences of ~1e-5 in the logits cannot reorder
// candidates). HF's sequences_scores are float32 averages of log-probs;
// compared with 2e-4 absolute (the model's logits differ from HF's by ~1e-5,
// tests/whisper/test_whisper_model.cc).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decode/whisper_search.h"
#include "io/safetensors.h"
#include "layers/checkpoint_source.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_model.h"
#include "models/whisper/whisper_model_step.h"
#include "support/test_support.h"

namespace oasr::decode {
namespace {

using nlohmann::json;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

const models::WhisperModel& model_named(const std::string& name) {
  static std::map<std::string, std::unique_ptr<models::WhisperModel>> models;
  auto& slot = models[name];
  if (!slot) {
    const auto dir = testing::oracle_dir() / name;
    std::ifstream in(dir / "config.json");
    const auto config = models::WhisperConfig::from_hf_json(json::parse(in));
    slot = std::make_unique<models::WhisperModel>(config);
    slot->load(CheckpointTensorSource(io::SafeTensorsCheckpoint::open(dir / "model.safetensors")));
  }
  return *slot;
}

WhisperSearchOptions options_of(const json& c) {
  WhisperSearchOptions o;
  o.prompt = c.at("prompt").get<std::vector<int64_t>>();
  o.eos_token_id = c.at("eos_token_id");
  o.pad_token_id = c.at("pad_token_id");
  o.suppress_tokens = c.at("suppress_tokens").get<std::vector<int64_t>>();
  o.begin_suppress_tokens = c.at("begin_suppress_tokens").get<std::vector<int64_t>>();
  o.max_length = c.at("max_length");
  o.num_beams = c.at("num_beams");
  o.length_penalty = c.at("length_penalty");
  return o;
}

// The encoder output of the model's three mel inputs, computed once.
const Tensor& encoder_out(const std::string& model_name) {
  static std::map<std::string, Tensor> outputs;
  Tensor& slot = outputs[model_name];
  if (!slot.defined())
    slot = model_named(model_name).encode(oracle().file.get(model_name + "/mel"));
  return slot;
}

// Runs the search over utterances [first, first + count).
std::vector<WhisperHypothesis> search(const json& c, int64_t first, int64_t count) {
  const models::WhisperModel& model = model_named(c.at("model"));
  const auto cross =
      model.cross_kv(encoder_out(c.at("model")).narrow(0, first, count).contiguous());
  const WhisperSearchOptions options = options_of(c);
  WhisperModelStep step(model, cross, whisper_cross_rows(count, options.num_beams),
                        options.max_length);
  return whisper_search(step, count, options);
}

void expect_matches_hf(const json& c, int64_t u, const WhisperHypothesis& got) {
  const std::string name = c.at("name");
  const std::string where = name + " utterance " + std::to_string(u);
  const Tensor sequences = oracle().file.get(name + "/sequences");
  const int64_t width = sequences.size(1);
  const auto prompt_len = static_cast<int64_t>(c.at("prompt").size());
  const int64_t eos = c.at("eos_token_id");
  std::vector<int64_t> row(sequences.data<int64_t>() + u * width,
                           sequences.data<int64_t>() + (u + 1) * width);
  // HF's short-form output: prompt, tokens, then eos (= pad) to the batch width.
  while (!row.empty() && row.back() == eos) row.pop_back();
  const std::vector<int64_t> prompt(row.begin(), row.begin() + prompt_len);
  EXPECT_EQ(prompt, c.at("prompt").get<std::vector<int64_t>>()) << where;
  const std::vector<int64_t> expected(row.begin() + prompt_len, row.end());
  EXPECT_EQ(got.tokens, expected) << where;
  EXPECT_EQ(got.reached_eos, static_cast<int64_t>(row.size()) < c.at("max_length").get<int64_t>())
      << where;
  if (c.at("num_beams").get<int64_t>() > 1) {
    EXPECT_NEAR(got.score, oracle().file.get(name + "/scores").data<float>()[u], 2e-4) << where;
  }
}

TEST(WhisperGenerate, BatchOfThreeMatchesHuggingFace) {
  ASSERT_FALSE(oracle().cases.empty());
  for (const json& c : oracle().cases) {
    const auto hyps = search(c, 0, 3);
    ASSERT_EQ(hyps.size(), 3u);
    for (int64_t u = 0; u < 3; ++u) expect_matches_hf(c, u, hyps[u]);
  }
}

// Batch composition changes nothing: each utterance alone gives HF's result.
TEST(WhisperGenerate, EachUtteranceAloneMatchesToo) {
  for (const json& c : oracle().cases) {
    const std::string name = c.at("name");
    if (name.find("max9") == std::string::npos) continue;  // the short ones keep this quick
    for (int64_t u = 0; u < 3; ++u) {
      const auto hyps = search(c, u, 1);
      ASSERT_EQ(hyps.size(), 1u);
      expect_matches_hf(c, u, hyps[0]);
    }
  }
}

}  // namespace
}  // namespace oasr::decode
