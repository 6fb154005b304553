// NeMo FastConformer transducers (RNN-T and TDT, src/models/fastconformer)
// against NeMo itself: random-weight models that fastconformer/
// make_fastconformer_case.py builds with NeMo 3.0 (the same 2-layer encoder
// shape as the CTC case, an RNNTDecoder with a 2-layer LSTM and an RNNTJoint;
// the TDT one with durations [0, 1, 2, 3, 4]) and NeMo's greedy_batch
// (label-looping) hypotheses on the three prompts of the CTC case, alone and
// as one padded batch. Tokens and their frames must be identical (the
// generator reports the smallest top-1 / top-2 margin along every greedy
// path, at least 2e-4, above the float32 noise of the joint's inputs); the
// encoder output and the first joint step are compared with tolerances.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/asr_engine.h"
#include "io/safetensors.h"
#include "io/tar_archive.h"
#include "models/fastconformer/fastconformer_model.h"
#include "models/fastconformer/nemo_source.h"
#include "ops/log_softmax.h"
#include "oracle/fastconformer/fixture_files.h"
#include "oracle/fastconformer/unpacked_nemo.h"
#include "quantize/apply.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::int64_values;
using testing::nemo_oracle_file;
using testing::nemo_prompt_waves;

constexpr float kEncodedAtol = 2e-4f;
constexpr float kJointAtol = 2e-4f;
const auto& kUtterances = testing::kNemoPrompts;
const char* const kHeads[] = {"rnnt", "tdt"};

struct Case {
  models::NemoSource source;
  std::unique_ptr<models::FastConformerModel> model;
};

const Case& the_case(const std::string& head) {
  static std::map<std::string, std::unique_ptr<Case>> cases;
  auto& c = cases[head];
  if (!c) {
    c = std::make_unique<Case>();
    c->source = models::load_nemo_checkpoint(testing::oracle_dir() / (head + ".nemo"));
    c->model = std::make_unique<models::FastConformerModel>(c->source.config);
    c->model->load_state_dict(*c->source.weights);
  }
  return *c;
}

const json& summary() {
  static const json loaded = [] {
    std::ifstream in(testing::oracle_dir() / "transducer.json");
    return json::parse(in);
  }();
  return loaded;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return a.shape() == b.shape() ? testing::max_abs_difference(a, b) : INFINITY;
}

TEST(FastConformerTransducerOracle, ConfigReadAsSaved) {
  const models::FastConformerConfig& rnnt = the_case("rnnt").source.config;
  EXPECT_EQ(rnnt.head, models::FastConformerHead::kRnnt);
  EXPECT_EQ(rnnt.transducer.pred_hidden, 32);
  EXPECT_EQ(rnnt.transducer.pred_rnn_layers, 2);
  EXPECT_EQ(rnnt.transducer.joint_hidden, 48);
  EXPECT_EQ(rnnt.transducer.max_symbols, 10);
  EXPECT_TRUE(rnnt.transducer.durations.empty());
  const models::FastConformerConfig& tdt = the_case("tdt").source.config;
  EXPECT_EQ(tdt.head, models::FastConformerHead::kTdt);
  EXPECT_EQ(tdt.transducer.durations, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(the_case("tdt").model->joint().classes(), 48 + 1 + 5);
}

TEST(FastConformerTransducerOracle, EncoderAndFirstJointStepMatchNemo) {
  for (const char* head : kHeads) {
    const Case& c = the_case(head);
    for (const char* u : kUtterances) {
      const std::string key = std::string(head) + "." + u;
      const Tensor features = nemo_oracle_file("reference").get(std::string(u) + ".features");
      const auto encoded = c.model->encode(features.transpose(0, 1).contiguous().unsqueeze(0),
                                           std::vector<int64_t>{features.size(1)});
      const Tensor enc = encoded.out.select(0, 0).contiguous();
      const float enc_diff =
          max_abs_diff(enc, nemo_oracle_file("transducer").get(key + ".encoded"));
      std::cout << key << ": encoder max |diff| " << enc_diff << "\n";
      EXPECT_LE(enc_diff, kEncodedAtol) << key;
      // <SOS> through the predictor, then the joint on frame 0; NeMo's joint
      // on the CPU returns log_softmax over all its outputs.
      layers::Lstm::State state = c.model->predictor().zero_state(1);
      Tensor sos = Tensor::empty({1}, DType::kI64);
      sos.data<int64_t>()[0] = c.source.config.blank_id();
      const Tensor g = c.model->joint().project_prednet(c.model->predictor().step(sos, state));
      const Tensor f = c.model->joint().project_encoder(enc.narrow(0, 0, 1));
      const Tensor logits =
          ops::log_softmax(c.model->joint().joint_after_projection(f, g), -1).select(0, 0);
      const float joint_diff =
          max_abs_diff(logits, nemo_oracle_file("transducer").get(key + ".first_logits"));
      std::cout << key << ": first joint step max |diff| " << joint_diff << "\n";
      EXPECT_LE(joint_diff, kJointAtol) << key;
    }
  }
}

TEST(FastConformerTransducerOracle, GreedySearchGivesNemosHypotheses) {
  const std::vector<std::vector<float>> audio = nemo_prompt_waves();
  for (const char* head : kHeads) {
    engine::EngineConfig config;
    config.ckpt_dir = testing::oracle_dir() / (std::string(head) + ".nemo");
    engine::ASREngine engine(config);
    const auto together = engine.transcribe(audio);
    // NeMo decoded the same three as one padded batch too.
    const std::vector<int64_t> batch_tokens =
        int64_values(nemo_oracle_file("transducer").get(std::string(head) + ".batch.greedy"));
    const std::vector<int64_t> batch_lengths =
        int64_values(nemo_oracle_file("transducer").get(std::string(head) + ".batch.lengths"));
    for (size_t i = 0; i < audio.size(); ++i) {
      const std::string key = std::string(head) + "." + kUtterances[i];
      const std::vector<int64_t> expected =
          int64_values(nemo_oracle_file("transducer").get(key + ".greedy"));
      EXPECT_EQ(together[i].tokens, expected) << key;
      EXPECT_EQ(together[i].text, summary().at(head).at("utterances").at(key).at("text")) << key;
      EXPECT_EQ(together[i].tokens, testing::nemo_batch_row(batch_tokens, batch_lengths, i))
          << key << " against NeMo's padded batch";
      // Token times: NeMo's frame of each token (80 ms frames) and, for TDT,
      // its predicted duration.
      const std::vector<int64_t> frames =
          int64_values(nemo_oracle_file("transducer").get(key + ".greedy_frames"));
      std::vector<int64_t> durations(frames.size(), 1);
      if (std::string(head) == "tdt") {
        durations = int64_values(nemo_oracle_file("transducer").get(key + ".greedy_durations"));
      }
      ASSERT_EQ(together[i].token_times.size(), frames.size()) << key;
      for (size_t k = 0; k < frames.size(); ++k) {
        const double start = 0.08 * static_cast<double>(frames[k]);
        const double end =
            0.08 * static_cast<double>(frames[k] + std::max<int64_t>(durations[k], 1));
        EXPECT_NEAR(together[i].token_times[k].start, start, 1e-9) << key << " token " << k;
        EXPECT_NEAR(together[i].token_times[k].end, end, 1e-9) << key << " token " << k;
      }
      const auto alone = engine.transcribe(std::vector<std::vector<float>>{audio[i]});
      EXPECT_EQ(alone.front().tokens, expected) << key << " alone";
    }
  }
}

TEST(FastConformerTransducerOracle, JoinerLayersAreNeverQuantized) {
  const Case& c = the_case("tdt");
  const quant::QuantLayout layout = models::fastconformer_quantization_layout(c.source.config);
  // By kind: the joiner's decoder_proj / output_linear are skipped with the
  // spec's reason, the predictor and the joint's encoder projection kept.
  const quant::QuantizationSpec spec = quant::spec_from_config(
      quant::QuantizationConfig::from_options("int8_w8a8", {}), *c.model, layout);
  std::map<std::string, std::string> skipped;
  for (const auto& s : spec.skipped) skipped[s.path] = s.reason;
  EXPECT_NE(skipped["joint.pred"].find("not quantizable"), std::string::npos);
  EXPECT_NE(skipped["joint.joint_net.2"].find("not quantizable"), std::string::npos);
  EXPECT_NE(skipped["joint.enc"].find("kept full precision"), std::string::npos);
  for (const auto& layer : spec.layers) {
    EXPECT_EQ(layer.path.rfind("encoder.layers.", 0), 0u) << layer.path << " was quantized";
  }
  EXPECT_FALSE(spec.layers.empty());
  // A spec that selects one by name is refused.
  for (const char* target : {"joint.pred", "joint.joint_net.2", "joint.*"}) {
    try {
      quant::spec_from_rules({{{target}, quant::scheme_preset("int8_w8a8")}}, std::nullopt, {},
                             *c.model, layout);
      ADD_FAILURE() << target << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not quantizable"), std::string::npos) << e.what();
    }
  }
}

TEST(FastConformerTransducerOracle, QuantizedTdtStillDecodes) {
  // Online int8 over the encoder's linear layers: the search runs on the
  // quantized encoder's output (random weights: no token claim).
  engine::EngineConfig config;
  config.ckpt_dir = testing::oracle_dir() / "tdt.nemo";
  config.quantization = quant::QuantizationConfig::from_options("int8_w8a8", {});
  engine::ASREngine engine(config);
  const auto out = engine.transcribe(nemo_prompt_waves());
  ASSERT_EQ(out.size(), 3u);
  for (const auto& t : out) EXPECT_EQ(t.token_times.size(), t.tokens.size());
  EXPECT_FALSE(engine.quantization_spec().layers.empty());
}

// An unpacked copy of an archive, to plant defects in.
fs::path unpacked_copy(const std::string& head, const std::string& name) {
  return testing::unpacked_nemo_copy(testing::oracle_dir() / (head + ".nemo"), head + "_" + name);
}

std::string refusal_after(const std::string& head, const std::string& from, const std::string& to) {
  const fs::path dir = unpacked_copy(head, "planted");
  const fs::path yaml = dir / "model_config.yaml";
  std::string text;
  {
    std::ifstream in(yaml);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return "";
  text.replace(at, from.size(), to);
  std::ofstream(yaml) << text;
  std::string why = "(accepted)";
  try {
    models::load_nemo_checkpoint(dir);
  } catch (const Error& e) {
    why = e.what();
  }
  fs::remove_all(dir);
  return why;
}

TEST(FastConformerTransducerOracle, RefusesUnservedTransducersByName) {
  // A multi-blank transducer: extra outputs without the TDT loss.
  std::string why = refusal_after("tdt", "loss_name: tdt", "loss_name: multiblank_rnnt");
  EXPECT_NE(why.find("joint.num_extra_outputs"), std::string::npos) << why;
  why = refusal_after("rnnt", "activation: relu", "activation: gelu");
  EXPECT_NE(why.find("joint.jointnet.activation"), std::string::npos) << why;
  why = refusal_after("rnnt", "normalization_mode: null", "normalization_mode: layer");
  EXPECT_NE(why.find("decoder.normalization_mode"), std::string::npos) << why;
  // A hybrid's auxiliary head must be a ConvASRDecoder.
  why = refusal_after("rnnt", "optim: null", "aux_ctc:\n  decoder: {}\noptim: null");
  EXPECT_NE(why.find("aux_ctc.decoder._target_"), std::string::npos) << why;
  why = refusal_after("tdt", "  num_extra_outputs: 5", "  num_extra_outputs: 4");
  EXPECT_NE(why.find("joint.num_extra_outputs"), std::string::npos) << why;
  why = refusal_after("rnnt", "pred_hidden: 32\n    pred_rnn_layers",
                      "pred_hidden: 32\n    rnn_hidden_size: 64\n    pred_rnn_layers");
  EXPECT_NE(why.find("decoder.prednet.rnn_hidden_size"), std::string::npos) << why;
}

TEST(FastConformerTransducerOracle, OtherHeadsMethodIsRefusedByName) {
  engine::EngineConfig config;
  config.ckpt_dir = testing::oracle_dir() / "rnnt.nemo";
  config.decode.set(engine::kDecodeMethodKey, "ctc_greedy_search");
  try {
    engine::ASREngine engine(config);
    FAIL() << "ctc_greedy_search was accepted for an RNN-T checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transducer_greedy_search"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace oasr
