// The shared options layer (engine/engine_options.h): key=value pairs and
// JSON fill the same EngineConfig / DecodeOverrides / QuantizationConfig,
// and every bad value is refused naming its key and flag.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine_options.h"
#include "models/architecture.h"

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
  // decoding_method is decode_method's alias; values take the declared kinds.
  EXPECT_EQ(config.decode.find<std::string>("decode_method"), "ctc_prefix_beam_search");
  EXPECT_EQ(config.decode.find<int64_t>("beam_size"), 4);
  EXPECT_EQ(config.decode.find<int64_t>("chunk_size"), -1);
  EXPECT_FALSE(config.decode.has("ctc_weight"));
  EXPECT_FALSE(config.decode.has("left_chunks"));
  EXPECT_FALSE(config.decode.has("length_penalty"));
  EXPECT_EQ(config.decode.items().size(), 3u);
  EXPECT_EQ(config.quantization.scheme(), "int8_w8a8");
  EXPECT_EQ(config.quantization.ignore(),
            (std::vector<std::string>{"encoder.encoders.0.*", "ctc.*"}));
  EXPECT_EQ(config.quantization.kv_cache(), "fp8_e4m3");

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
  EXPECT_EQ(from_json.decode, from_pairs.decode);
  EXPECT_EQ(from_json.decode.find<double>("ctc_weight"), 0.25);
  EXPECT_EQ(from_json.decode.find<double>("reverse_weight"), 0.5);
  EXPECT_EQ(from_json.decode.find<std::string>("decode_method"), "attention_rescoring");
  EXPECT_EQ(from_json.quantization.ignore(), std::vector<std::string>{"ctc.*"});

  // The spec's dict form of quantization.
  const engine::EngineConfig dict = engine::engine_config_from_json(
      {{"ckpt_dir", "d"},
       {"quantization", {{"scheme", "int8_w8a8"}, {"ignore", "encoder.encoders.0.*"}}}});
  EXPECT_EQ(dict.quantization.scheme(), "int8_w8a8");
  EXPECT_EQ(dict.quantization.ignore(), std::vector<std::string>{"encoder.encoders.0.*"});
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
                  {"beam_size (--beam-size) takes an integer in [1, 128], got 'abc'"});
  expect_contains(refusal(pairs({{"beam_size", "3.5"}})), {"beam_size", "got '3.5'"});
  expect_contains(refusal(pairs({{"max_batch_size", ""}})), {"max_batch_size", "got ''"});
  expect_contains(refusal(pairs({{"ctc_weight", "0.3x"}})),
                  {"ctc_weight (--ctc-weight) takes a finite number >= 0, got '0.3x'"});
  expect_contains(refusal(pairs({{"length_penalty", "1e999"}})), {"length_penalty", "1e999"});
  expect_contains(refusal(pairs({{"threads", "-1"}})), {"threads (--threads) must be >= 0"});
  expect_contains(refusal(pairs({{"quantization", "int4_w4a16"}})), {"int4_w4a16"});
  expect_contains(refusal(pairs({{"quantization_option", "ignore=x"}})), {"ignore"});
  expect_contains(refusal([] { engine::split_option("beam_size"); }),
                  {"'beam_size' is not key=value"});

  expect_contains(refusal([] {
                    engine::engine_config_from_json({{"beam_size", true}});
                  }),
                  {"option 'beam_size' takes an integer in [1, 128], got true"});
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
  EXPECT_EQ(request.find<std::string>("decode_method"), "beam_search");
  EXPECT_EQ(request.find<int64_t>("beam_size"), 3);
  EXPECT_EQ(request.find<double>("length_penalty"), 0.8);
  EXPECT_FALSE(request.has("chunk_size"));
  EXPECT_EQ(engine::decode_overrides_from_json({{"chunk_size", 16}}).find<int64_t>("chunk_size"),
            16);
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

// The decode keys are every registered architecture's declarations, in
// registration order (U2++'s, then Whisper's new ones, then Qwen2-Audio's), between the engine
// keys and quantization.
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
                                            "endpoint",
                                            "endpoint_silence",
                                            "max_segment_seconds",
                                            "length_penalty",
                                            "timestamps",
                                            "long_form",
                                            "temperatures",
                                            "compression_ratio_threshold",
                                            "logprob_threshold",
                                            "no_speech_threshold",
                                            "max_new_tokens",
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
  EXPECT_EQ(pairs.find<std::string>("long_form"), "windows");
  EXPECT_EQ(pairs.find<std::vector<double>>("temperatures"), (std::vector<double>{0.0, 0.2, 0.5}));
  EXPECT_EQ(pairs.find<double>("compression_ratio_threshold"), 2.0);
  EXPECT_EQ(pairs.find<double>("logprob_threshold"), -0.5);
  EXPECT_EQ(pairs.find<double>("no_speech_threshold"), 0.7);
  const engine::DecodeOverrides from_json = engine::decode_overrides_from_json(
      nlohmann::json{{"temperatures", {0, 0.4, 1}}, {"long_form", "sequential"}});
  EXPECT_EQ(from_json.find<std::vector<double>>("temperatures"),
            (std::vector<double>{0.0, 0.4, 1.0}));
  EXPECT_EQ(from_json.find<std::string>("long_form"), "sequential");
  EXPECT_EQ(engine::decode_overrides_from_json(nlohmann::json{{"temperatures", "0.1"}})
                .find<std::vector<double>>("temperatures"),
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
  // Ranges and choices: the declaration's, checked against the loaded
  // architecture when the options are resolved.
  const auto check = [](const char* key, engine::DecodeValue value) {
    return [key, value] {
      engine::check_decode_value(*models::find_declared_decode_option(key), value);
    };
  };
  expect_contains(refusal(check("long_form", std::string("chunks"))),
                  {"long_form (--long-form) must be sequential or windows, got 'chunks'"});
  expect_contains(refusal(check("temperatures", std::vector<double>{0.0, -0.2})),
                  {"temperatures (--temperatures): value 2 must be a number in [0, 10]"});
  expect_contains(refusal(check("temperatures", std::vector<double>{})),
                  {"temperatures", "at least one"});
  expect_contains(refusal(check("no_speech_threshold", 1.5)), {"no_speech_threshold", "[0, 1]"});
  expect_contains(refusal(check("beam_size", int64_t{0})),
                  {"beam_size (--beam-size) must be an integer in [1, 128], got 0"});
  expect_contains(refusal(check("chunk_size", int64_t{0})),
                  {"chunk_size (--chunk-size) must be -1 or an integer >= 1, got 0"});
  expect_contains(refusal(check("length_penalty", std::nan(""))),
                  {"length_penalty", "a finite number"});
  EXPECT_NO_THROW(check("chunk_size", int64_t{-1})());
  EXPECT_NO_THROW(check("chunk_size", int64_t{16})());
}

// A key the loaded architecture does not declare is refused naming the
// architectures that take it; a value outside its range naming the range.
TEST(EngineOptions, TheLoadedArchitectureRefusesKeysItDoesNotDeclare) {
  const models::Architecture& whisper = *models::find_architecture("whisper");
  const models::Architecture& u2pp = *models::find_architecture("u2pp_conformer");
  engine::DecodeOverrides chunked;
  chunked.set("chunk_size", int64_t{16});
  EXPECT_NO_THROW(models::check_decode_values(u2pp, chunked));
  expect_contains(refusal([&] { models::check_decode_values(whisper, chunked); }),
                  {"chunk_size (--chunk-size) is not a Whisper decode option (U2++ checkpoints "
                   "take it): drop it; this Whisper checkpoint takes decode_method, beam_size, "
                   "length_penalty, timestamps"});
  engine::DecodeOverrides beam;
  beam.set("decode_method", std::string("beam_search"));
  expect_contains(
      refusal([&] { models::check_decode_values(u2pp, beam); }),
      {"decode method 'beam_search' is not a U2++ method (Whisper, Qwen2-Audio checkpoints take "
       "it); this U2++ checkpoint takes ctc_greedy_search, ctc_prefix_beam_search or "
       "attention_rescoring"});
  engine::DecodeOverrides wide;
  wide.set("reverse_weight", 1.5);
  expect_contains(refusal([&] { models::check_decode_values(u2pp, wide); }),
                  {"reverse_weight (--reverse-weight) must be a finite number in [0, 1], got 1.5"});
}

}  // namespace
}  // namespace oasr
