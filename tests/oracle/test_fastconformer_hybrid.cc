// A hybrid NeMo FastConformer (EncDecHybridRNNTCTCBPEModel: a TDT
// transducer and aux_ctc's CTC head on one encoder, the parakeet-tdt_ctc
// family) against NeMo itself: fastconformer/make_fastconformer_case.py
// --heads hybrid builds it with NeMo 3.0 (the TDT case's decoder and joint,
// a ConvASRDecoder), saves hybrid.nemo and records, per prompt and for the
// three as one padded batch, NeMo's default (TDT) greedy_batch hypothesis
// and its CTC decoding's. Tokens, frames and durations must be identical
// (the generator reports the smallest top-1 / top-2 margins on every path,
// at least 3e-4); the CTC log-probabilities are compared with the CPU
// tests' tolerance.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/asr_engine.h"
#include "io/safetensors.h"
#include "models/fastconformer/fastconformer_model.h"
#include "models/fastconformer/nemo_source.h"
#include "oracle/fastconformer/fixture_files.h"
#include "oracle/fastconformer/unpacked_nemo.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using nlohmann::json;
using testing::int64_values;

constexpr float kLogProbAtol = 2e-4f;
const auto& kUtterances = testing::kNemoPrompts;

std::filesystem::path checkpoint() {
  return testing::oracle_dir() / "hybrid.nemo";
}

const json& summary() {
  static const json loaded = [] {
    std::ifstream in(testing::oracle_dir() / "hybrid.json");
    return json::parse(in);
  }();
  return loaded;
}

const io::SafeTensorsFile& reference() {
  return testing::nemo_oracle_file("hybrid");
}

// NeMo's padded batch: row i's tokens.
std::vector<int64_t> batch_row(const std::string& name, size_t row) {
  return testing::nemo_batch_row(int64_values(reference().get("batch." + name)),
                                 int64_values(reference().get("batch." + name + "_lengths")), row);
}

TEST(FastConformerHybridOracle, ReadAsSavedWithBothHeads) {
  const models::NemoSource source = models::load_nemo_checkpoint(checkpoint());
  EXPECT_EQ(source.config.head, models::FastConformerHead::kTdt);
  EXPECT_TRUE(source.config.has_aux_ctc);
  models::FastConformerModel model(source.config);
  model.load_state_dict(*source.weights);
  EXPECT_EQ(model.type_name(), "EncDecHybridRNNTCTCBPEModel");
  // The CTC head over NeMo's encoder output gives NeMo's log-probabilities.
  for (const char* u : kUtterances) {
    const Tensor encoded = reference().get(std::string(u) + ".encoded").unsqueeze(0);
    const Tensor ours = model.ctc_log_probs(encoded).select(0, 0);
    const Tensor expected = reference().get(std::string(u) + ".ctc_log_probs");
    ASSERT_EQ(ours.shape(), expected.shape()) << u;
    const float diff = testing::max_abs_difference(ours, expected);
    std::cout << u << ": CTC head log-probs max |diff| " << diff << "\n";
    EXPECT_LE(diff, kLogProbAtol) << u;
  }
}

TEST(FastConformerHybridOracle, TransducerHeadByDefault) {
  engine::EngineConfig config;
  config.ckpt_dir = checkpoint();
  engine::ASREngine engine(config);
  const std::vector<std::vector<float>> audio = testing::nemo_prompt_waves();
  const auto together = engine.transcribe(audio);
  for (size_t i = 0; i < audio.size(); ++i) {
    const std::string key = kUtterances[i];
    const std::vector<int64_t> expected = int64_values(reference().get(key + ".greedy"));
    EXPECT_EQ(together[i].tokens, expected) << key;
    EXPECT_EQ(together[i].tokens, batch_row("tdt_greedy", i)) << key << " against NeMo's batch";
    EXPECT_EQ(together[i].text, summary().at("utterances").at(key).at("text")) << key;
    const std::vector<int64_t> frames = int64_values(reference().get(key + ".greedy_frames"));
    const std::vector<int64_t> durations = int64_values(reference().get(key + ".greedy_durations"));
    ASSERT_EQ(together[i].token_times.size(), frames.size()) << key;
    for (size_t k = 0; k < frames.size(); ++k) {
      EXPECT_NEAR(together[i].token_times[k].start, 0.08 * static_cast<double>(frames[k]), 1e-9);
      EXPECT_NEAR(together[i].token_times[k].end,
                  0.08 * static_cast<double>(frames[k] + std::max<int64_t>(durations[k], 1)), 1e-9);
    }
    EXPECT_EQ(engine.transcribe(std::vector<std::vector<float>>{audio[i]}).front().tokens, expected)
        << key << " alone";
  }
}

TEST(FastConformerHybridOracle, CtcHeadOnRequest) {
  engine::EngineConfig config;
  config.ckpt_dir = checkpoint();
  config.decode.set(engine::kDecodeMethodKey, "ctc_greedy_search");
  engine::ASREngine engine(config);
  const std::vector<std::vector<float>> audio = testing::nemo_prompt_waves();
  const auto together = engine.transcribe(audio);
  for (size_t i = 0; i < audio.size(); ++i) {
    const std::string key = kUtterances[i];
    const std::vector<int64_t> expected = int64_values(reference().get(key + ".ctc_greedy"));
    EXPECT_EQ(together[i].tokens, expected) << key;
    EXPECT_EQ(together[i].tokens, batch_row("ctc_greedy", i)) << key << " against NeMo's batch";
    EXPECT_EQ(together[i].text, summary().at("utterances").at(key).at("ctc_text")) << key;
    EXPECT_EQ(together[i].token_times.size(), expected.size()) << key;
  }
}

TEST(FastConformerHybridOracle, RefusesAMismatchedAuxiliaryVocabulary) {
  const auto dir = testing::unpacked_nemo_copy(checkpoint(), "hybrid_vocabulary");
  const auto yaml = dir / "model_config.yaml";
  std::string text;
  {
    std::ifstream in(yaml);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The aux_ctc decoder's vocabulary is the second list in the file; rename
  // its last entry.
  const size_t aux = text.find("aux_ctc:");
  ASSERT_NE(aux, std::string::npos);
  const size_t last = text.find("  - q", aux);
  ASSERT_NE(last, std::string::npos);
  text.replace(last, 5, "  - Q");
  std::ofstream(yaml) << text;
  try {
    models::load_nemo_checkpoint(dir);
    ADD_FAILURE() << "a hybrid whose heads disagree on the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aux_ctc.decoder.vocabulary"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oasr
