// The shared options layer (engine/engine_options.h): key=value pairs and
// JSON fill the same EngineConfig / DecodeOverrides / QuantizationConfig,
// and every bad value is refused naming its key and flag.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_options.h"

namespace oasr {
namespace {

using engine::OptionList;

std::string refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return {};
}

void expect_contains(const std::string& text, const std::vector<std::string>& pieces) {
  for (const std::string& piece : pieces) {
    EXPECT_NE(text.find(piece), std::string::npos) << "'" << piece << "' not in: " << text;
  }
}

TEST(EngineOptions, KeyValuePairsFillTheConfigAndOnlyWhatIsGiven) {
  const engine::EngineConfig config = engine::engine_config_from_options(
      {{"ckpt_dir", "exp/u2pp"},
       {"device", "cuda:1"},
       {"dtype", "bfloat16"},
       {"max_batch_size", "16"},
       {"threads", "2"},
       {"decoding_method", "ctc_prefix_beam_search"},
       {"beam_size", "4"},
       {"chunk_size", "-1"},
       {"quantization", "int8_w8a8"},
       {"quantization_option", "ignore=encoder.encoders.0.*,ctc.*"},
       {"quantization_option", "kv_cache=fp8_e4m3"}});
  EXPECT_EQ(config.ckpt_dir, "exp/u2pp");
  EXPECT_EQ(config.device, "cuda:1");
  EXPECT_EQ(config.dtype, "bfloat16");
  EXPECT_EQ(config.max_batch_size, 16);
  EXPECT_EQ(config.threads, 2);
  EXPECT_EQ(config.decode.method, "ctc_prefix_beam_search");
  EXPECT_EQ(config.decode.beam_size, 4);
  EXPECT_EQ(config.decode.chunk_size, -1);
  EXPECT_FALSE(config.decode.ctc_weight.has_value());
  EXPECT_FALSE(config.decode.left_chunks.has_value());
  EXPECT_FALSE(config.decode.length_penalty.has_value());
  EXPECT_EQ(config.quantization.scheme, "int8_w8a8");
  EXPECT_EQ(config.quantization.ignore,
            (std::vector<std::string>{"encoder.encoders.0.*", "ctc.*"}));
  EXPECT_EQ(config.quantization.kv_cache, "fp8_e4m3");

  const engine::EngineConfig defaults = engine::engine_config_from_options({{"ckpt_dir", "d"}});
  EXPECT_EQ(defaults.device, "cpu");
  EXPECT_EQ(defaults.max_batch_size, 8);
  EXPECT_TRUE(defaults.decode.empty());
  EXPECT_TRUE(defaults.quantization.empty());
}

TEST(EngineOptions, JsonGivesWhatTheSamePairsGive) {
  const nlohmann::json object = {{"ckpt_dir", "exp/u2pp"},
                                 {"max_batch_size", 4},
                                 {"ctc_weight", 0.25},
                                 {"reverse_weight", "0.5"},
                                 {"decode_method", "attention_rescoring"},
                                 {"quantization", "fp8_w8a8"},
                                 {"quantization_option", {"ignore=ctc.*"}}};
  const engine::EngineConfig from_json = engine::engine_config_from_json(object);
  const engine::EngineConfig from_pairs =
      engine::engine_config_from_options({{"ckpt_dir", "exp/u2pp"},
                                          {"max_batch_size", "4"},
                                          {"ctc_weight", "0.25"},
                                          {"reverse_weight", "0.5"},
                                          {"decode_method", "attention_rescoring"},
                                          {"quantization", "fp8_w8a8"},
                                          {"quantization_option", "ignore=ctc.*"}});
  EXPECT_EQ(from_json.dump(), from_pairs.dump());
  EXPECT_EQ(from_json.decode.ctc_weight, 0.25);
  EXPECT_EQ(from_json.decode.reverse_weight, 0.5);
  EXPECT_EQ(from_json.decode.method, "attention_rescoring");
  EXPECT_EQ(from_json.quantization.ignore, std::vector<std::string>{"ctc.*"});

  // The spec's dict form of quantization.
  const engine::EngineConfig dict = engine::engine_config_from_json(
      {{"ckpt_dir", "d"},
       {"quantization", {{"scheme", "int8_w8a8"}, {"ignore", "encoder.encoders.0.*"}}}});
  EXPECT_EQ(dict.quantization.scheme, "int8_w8a8");
  EXPECT_EQ(dict.quantization.ignore, std::vector<std::string>{"encoder.encoders.0.*"});
}

TEST(EngineOptions, BadKeysAndValuesAreRefusedByName) {
  const auto pairs = [](OptionList options) {
    return [options] { engine::engine_config_from_options(options); };
  };
  expect_contains(refusal(pairs({{"beam", "4"}})),
                  {"unknown engine option 'beam'", "beam_size", "quantization_option"});
  expect_contains(refusal(pairs({{"beam_size", "4"}, {"beam_size", "5"}})),
                  {"beam_size (--beam-size) is given more than once"});
  expect_contains(refusal(pairs({{"beam_size", "abc"}})),
                  {"beam_size (--beam-size) takes an integer, got 'abc'"});
  expect_contains(refusal(pairs({{"beam_size", "3.5"}})), {"beam_size", "got '3.5'"});
  expect_contains(refusal(pairs({{"max_batch_size", ""}})), {"max_batch_size", "got ''"});
  expect_contains(refusal(pairs({{"ctc_weight", "0.3x"}})),
                  {"ctc_weight (--ctc-weight) takes a number, got '0.3x'"});
  expect_contains(refusal(pairs({{"length_penalty", "1e999"}})), {"length_penalty", "1e999"});
  expect_contains(refusal(pairs({{"threads", "-1"}})), {"threads (--threads) must be >= 0"});
  expect_contains(refusal(pairs({{"quantization", "int4_w4a16"}})), {"int4_w4a16"});
  expect_contains(refusal(pairs({{"quantization_option", "ignore=x"}})), {"ignore"});
  expect_contains(refusal([] { engine::split_option("beam_size"); }),
                  {"'beam_size' is not key=value"});

  expect_contains(refusal([] {
                    engine::engine_config_from_json({{"beam_size", true}});
                  }),
                  {"option 'beam_size' takes an integer, got true"});
  expect_contains(refusal([] { engine::engine_config_from_json(nlohmann::json::array()); }),
                  {"must be an object"});
  expect_contains(refusal([] {
                    engine::engine_config_from_json({{"quantization", {{"scheme", "int8_w8a8"}}},
                                                     {"quantization_option", {"ignore=ctc.*"}}});
                  }),
                  {"drop quantization_option"});
}

TEST(EngineOptions, ARequestTakesDecodeOptionsOnly) {
  const engine::DecodeOverrides request = engine::decode_overrides_from_options(
      {{"decode_method", "beam_search"}, {"beam_size", "3"}, {"length_penalty", "0.8"}});
  EXPECT_EQ(request.method, "beam_search");
  EXPECT_EQ(request.beam_size, 3);
  EXPECT_EQ(request.length_penalty, 0.8);
  EXPECT_FALSE(request.chunk_size.has_value());
  EXPECT_EQ(engine::decode_overrides_from_json({{"chunk_size", 16}}).chunk_size, 16);
  expect_contains(
      refusal([] {
        engine::decode_overrides_from_options({{"device", "cuda"}});
      }),
      {"option 'device' is fixed when the engine is built", "decode_method, beam_size"});
  expect_contains(refusal([] {
                    engine::decode_overrides_from_json({{"quantization", "int8_w8a8"}});
                  }),
                  {"'quantization' is fixed when the engine is built"});
}

TEST(EngineOptions, KeysAreTheFlagsWithoutDashes) {
  const std::vector<std::string> keys = engine::engine_option_keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"ckpt_dir",
                                            "device",
                                            "dtype",
                                            "max_batch_size",
                                            "threads",
                                            "decode_method",
                                            "beam_size",
                                            "ctc_weight",
                                            "reverse_weight",
                                            "chunk_size",
                                            "left_chunks",
                                            "length_penalty",
                                            "timestamps",
                                            "long_form",
                                            "temperatures",
                                            "compression_ratio_threshold",
                                            "logprob_threshold",
                                            "no_speech_threshold",
                                            "quantization",
                                            "quantization_option"}));
}

// Whisper's long-form and fallback keys: a comma list or a JSON array of
// temperatures, numbers for the thresholds; bad values refused by name
// (the values' ranges when the options are resolved).
TEST(EngineOptions, LongFormAndFallbackKeys) {
  const engine::DecodeOverrides pairs =
      engine::decode_overrides_from_options({{"long_form", "windows"},
                                             {"temperatures", "0,0.2,0.5"},
                                             {"compression_ratio_threshold", "2.0"},
                                             {"logprob_threshold", "-0.5"},
                                             {"no_speech_threshold", "0.7"}});
  EXPECT_EQ(pairs.long_form, "windows");
  EXPECT_EQ(pairs.temperatures, (std::vector<double>{0.0, 0.2, 0.5}));
  EXPECT_EQ(pairs.compression_ratio_threshold, 2.0);
  EXPECT_EQ(pairs.logprob_threshold, -0.5);
  EXPECT_EQ(pairs.no_speech_threshold, 0.7);
  const engine::DecodeOverrides from_json = engine::decode_overrides_from_json(
      nlohmann::json{{"temperatures", {0, 0.4, 1}}, {"long_form", "sequential"}});
  EXPECT_EQ(from_json.temperatures, (std::vector<double>{0.0, 0.4, 1.0}));
  EXPECT_EQ(from_json.long_form, "sequential");
  EXPECT_EQ(
      engine::decode_overrides_from_json(nlohmann::json{{"temperatures", "0.1"}}).temperatures,
      (std::vector<double>{0.1}));
  expect_contains(refusal([] {
                    engine::decode_overrides_from_options({{"temperatures", "0,,0.2"}});
                  }),
                  {"temperatures (--temperatures)", "comma list", "0,,0.2"});
  expect_contains(
      refusal([] {
        engine::decode_overrides_from_json(nlohmann::json{{"temperatures", {0, "hot"}}});
      }),
      {"temperatures", "comma list"});
  expect_contains(refusal([] {
                    engine::decode_overrides_from_options({{"logprob_threshold", "low"}});
                  }),
                  {"logprob_threshold (--logprob-threshold)", "'low'"});
  // Ranges: checked when resolved into DecodeOptions.
  engine::DecodeOptions d;
  d.long_form = "chunks";
  expect_contains(refusal([&] { d.validate(); }), {"long_form (--long-form)", "chunks"});
  d.long_form = "sequential";
  d.temperatures = {0.0, -0.2};
  expect_contains(refusal([&] { d.validate(); }), {"temperatures (--temperatures)", "value 2"});
  d.temperatures = {};
  expect_contains(refusal([&] { d.validate(); }), {"temperatures", "at least one"});
  d.temperatures = {0.0};
  d.no_speech_threshold = 1.5;
  expect_contains(refusal([&] { d.validate(); }), {"no_speech_threshold", "[0, 1]"});
}

}  // namespace
}  // namespace oasr
