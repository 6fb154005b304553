// Importers (src/quant/importers/): checkpoint directories laid out as each
// project documents them -- config.json "quantization_config" as
// llm-compressor writes it (compressed-tensors), hf_quant_config.json as
// ModelOpt's Hugging Face export writes it, oasr_config.json v2 as oasr
// quantize writes it -- translated to plans, and every refusal by name.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "quant/importers/importer.h"
#include "quant/spec.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void write_json(const fs::path& path, const json& value) {
  std::ofstream out(path);
  out << value.dump(2);
}

// compressed-tensors QuantizationArgs, with the keys llm-compressor writes.
json ct_args(int bits, const std::string& type, const std::string& strategy, json dynamic,
             json group_size = nullptr, bool symmetric = true) {
  return {{"num_bits", bits},       {"type", type},
          {"symmetric", symmetric}, {"group_size", group_size},
          {"strategy", strategy},   {"block_structure", nullptr},
          {"dynamic", dynamic},     {"actorder", nullptr},
          {"observer", "minmax"},   {"observer_kwargs", json::object()}};
}

json ct_config(json groups, json ignore = json::array({"lm_head"}),
               const std::string& format = "int-quantized") {
  return {{"quantization_config",
           {{"config_groups", groups},
            {"format", format},
            {"global_compression_ratio", 1.24},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr},
            {"quant_method", "compressed-tensors"},
            {"quantization_status", "compressed"}}},
          {"architectures", {"SomeModel"}},
          {"torch_dtype", "float16"}};
}

json ct_group(json weights, json inputs, json targets = json::array({"Linear"})) {
  return {{"targets", targets},
          {"weights", weights},
          {"input_activations", inputs},
          {"output_activations", nullptr}};
}

class ImporterTest : public ::testing::Test {
 protected:
  // A checkpoint directory holding one config file.
  std::optional<QuantPlan> import_file(const std::string& file, const json& contents) {
    write_json(dir_.path() / file, contents);
    return import_quantization(dir_.path());
  }
  // The refusal message of importing it ("(no error)" when accepted).
  std::string refusal(const std::string& file, const json& contents) {
    try {
      import_file(file, contents);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  testing::TempDir dir_;
};

const std::string kFfn = "encoder.encoders.0.feed_forward.w_1";
const std::string kAttn = "encoder.encoders.0.self_attn.linear_qkv";
const std::string kPointwise = "encoder.encoders.0.conv_module.pointwise_conv1";
const std::string kOutput = "decoder.left_decoder.output_layer";

std::string scheme_name(const QuantScheme* scheme) {
  return scheme ? scheme->name : "none";
}

TEST_F(ImporterTest, FullPrecisionDirectoryHasNoPlan) {
  EXPECT_FALSE(import_file("config.json", {{"architectures", {"X"}}}).has_value());
  EXPECT_FALSE(import_quantization(dir_.path() / "missing").has_value());
}

TEST_F(ImporterTest, CompressedTensorsInt8DynamicIsInt8W8A8) {
  const auto plan = import_file("config.json",
                                ct_config({{"group_0", ct_group(ct_args(8, "int", "channel", false),
                                                                ct_args(8, "int", "token", true))}},
                                          {"lm_head", "re:.*output_layer$"}));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->importer, "compressed-tensors");
  ASSERT_EQ(plan->rules.size(), 1u);
  EXPECT_EQ(plan->rules[0].scheme, scheme_preset("int8_w8a8"));
  EXPECT_EQ(plan->rules[0].targets, std::vector<std::string>{"linear"});
  EXPECT_EQ(plan->ignore, (std::vector<std::string>{"lm_head", "re:.*output_layer$"}));
  EXPECT_FALSE(plan->default_scheme.has_value());
  EXPECT_TRUE(plan->kv_cache.empty());
  EXPECT_EQ(scheme_name(plan->scheme_for(kFfn, LayerKind::kLinear)), "int8_w8a8");
  EXPECT_EQ(scheme_name(plan->scheme_for(kOutput, LayerKind::kLinear)), "none");  // ignored
  // "Linear" is torch's class: a pointwise conv is not one.
  EXPECT_EQ(scheme_name(plan->scheme_for(kPointwise, LayerKind::kPointwiseConv)), "none");
}

TEST_F(ImporterTest, CompressedTensorsFp8AndStaticFormsMapToTheirPresets) {
  struct Case {
    json weights, inputs;
    std::string format, preset;
    bool per_tensor_note;
  };
  const std::vector<Case> cases = {
      {ct_args(8, "float", "channel", false), ct_args(8, "float", "token", true), "float-quantized",
       "fp8_w8a8", false},
      {ct_args(8, "float", "tensor", false), ct_args(8, "float", "tensor", false),
       "naive-quantized", "fp8_w8a8_static", true},
      {ct_args(8, "int", "channel", false), ct_args(8, "int", "tensor", false), "int-quantized",
       "int8_w8a8_static", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    const auto plan = import_file(
        "config.json",
        ct_config({{"group_0", ct_group(c.weights, c.inputs)}}, json::array(), c.format));
    ASSERT_TRUE(plan.has_value());
    ASSERT_EQ(plan->rules.size(), 1u);
    EXPECT_EQ(plan->rules[0].scheme.name, c.preset);
    EXPECT_EQ(plan->notes.size(), c.per_tensor_note ? 1u : 0u);
  }
}

// The NVFP4 layout of a published llm-compressor checkpoint: it imports as
// the nvfp4 preset (the spine refuses to serve it).
TEST_F(ImporterTest, CompressedTensorsNvfp4IsTheNvfp4Preset) {
  json weights = ct_args(4, "float", "tensor_group", false, 16);
  json inputs = ct_args(4, "float", "tensor_group", "local", 16);
  weights["scale_dtype"] = inputs["scale_dtype"] = "torch.float8_e4m3fn";
  const auto plan = import_file("config.json", ct_config({{"group_0", ct_group(weights, inputs)}},
                                                         json::array(), "nvfp4-pack-quantized"));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->rules.at(0).scheme, scheme_preset("nvfp4"));
}

TEST_F(ImporterTest, CompressedTensorsMostSpecificTargetWins) {
  json config = ct_config(
      {{"group_0", ct_group(ct_args(8, "int", "channel", false), ct_args(8, "int", "token", true),
                            {"Linear", "Conv1d"})},
       {"group_1", ct_group(ct_args(8, "int", "channel", false), ct_args(8, "int", "tensor", false),
                            {"re:.*self_attn.*"})},
       {"group_2",
        ct_group(ct_args(8, "int", "channel", false), ct_args(8, "int", "token", true), {kAttn})}},
      json::array({"re:decoder\\."}));
  config["quantization_config"]["format"] = "mixed-precision";
  const auto plan = import_file("config.json", config);
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->rules.size(), 3u);
  EXPECT_EQ(plan->rules[0].targets,
            (std::vector<std::string>{"linear", "pointwise_conv", "conv1d"}));
  // exact name > regex > class
  EXPECT_EQ(scheme_name(plan->scheme_for(kAttn, LayerKind::kLinear)), "int8_w8a8");
  EXPECT_EQ(
      scheme_name(plan->scheme_for("encoder.encoders.1.self_attn.linear_out", LayerKind::kLinear)),
      "int8_w8a8_static");
  EXPECT_EQ(scheme_name(plan->scheme_for(kFfn, LayerKind::kLinear)), "int8_w8a8");
  EXPECT_EQ(scheme_name(plan->scheme_for(kPointwise, LayerKind::kPointwiseConv)), "int8_w8a8");
  // The ignore regex is anchored at the start, like Python's re.match.
  EXPECT_EQ(scheme_name(plan->scheme_for("decoder.left_decoder.decoders.0.feed_forward.w_1",
                                         LayerKind::kLinear)),
            "none");
  EXPECT_EQ(scheme_name(plan->scheme_for("encoder.decoder.x", LayerKind::kLinear)), "int8_w8a8");
}

TEST_F(ImporterTest, CompressedTensorsKvCacheSchemeIsFp8KvCache) {
  json config = ct_config({{"group_0", ct_group(ct_args(8, "float", "channel", false),
                                                ct_args(8, "float", "token", true))}},
                          json::array(), "float-quantized");
  config["quantization_config"]["kv_cache_scheme"] = ct_args(8, "float", "tensor", false);
  const auto plan = import_file("config.json", config);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->kv_cache, "fp8_e4m3");
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_NE(plan->notes[0].find("k/v scales are not used"), std::string::npos);
}

TEST_F(ImporterTest, CompressedTensorsRefusalsNameTheField) {
  const json int8_w = ct_args(8, "int", "channel", false);
  const json int8_in = ct_args(8, "int", "token", true);
  auto with_group = [](json weights, json inputs, const std::string& format = "int-quantized") {
    return ct_config({{"group_0", ct_group(weights, inputs)}}, json::array(), format);
  };
  struct Case {
    json config;
    std::vector<std::string> needles;
  };
  json gptq = {{"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}}}};
  json sparse = with_group(int8_w, int8_in);
  sparse["quantization_config"]["sparsity_config"] = {{"format", "sparse-24-bitmask"}};
  json embedding = ct_config({{"group_0", ct_group(int8_w, int8_in, {"Embedding"})}});
  json initialized = with_group(int8_w, int8_in);
  initialized["quantization_config"]["quantization_status"] = "initialized";
  json kv_int8 = with_group(int8_w, int8_in);
  kv_int8["quantization_config"]["kv_cache_scheme"] = ct_args(8, "int", "tensor", false);
  const std::vector<Case> cases = {
      {gptq, {"quantization_config.quant_method 'gptq' is not supported"}},
      {with_group(ct_args(4, "int", "group", false, 128), nullptr, "pack-quantized"),
       {"group_0.weights", "num_bits 4 with type 'int'"}},
      {with_group(ct_args(8, "int", "group", false, 128), int8_in),
       {"group_0.weights.group_size 128"}},
      {with_group(ct_args(8, "int", "channel", false, nullptr, false), int8_in),
       {"group_0.weights.symmetric", "asymmetric"}},
      {with_group(int8_w, nullptr), {"group_0.input_activations", "weight-only"}},
      {with_group(int8_w, ct_args(8, "int", "tensor", true)),
       {"group_0.input_activations", "per-tensor dynamic activation scale"}},
      {with_group(int8_w, ct_args(8, "int", "token", false)),
       {"group_0.input_activations", "static per-token"}},
      {with_group(int8_w, ct_args(8, "float", "token", true)),
       {"int8 weights with fp8_e4m3 input_activations"}},
      {with_group(int8_w, int8_in, "pack-quantized"),
       {"quantization_config.format 'pack-quantized'"}},
      {with_group(int8_w, int8_in, "float-quantized"), {"'float-quantized' does not store int8"}},
      {sparse, {"quantization_config.sparsity_config", "sparse"}},
      {embedding, {"group_0.targets", "module class 'Embedding'"}},
      {initialized, {"quantization_status 'initialized'"}},
      {kv_int8, {"kv_cache_scheme", "not supported"}},
      {with_group(ct_args(4, "float", "tensor_group", false, 32),
                  ct_args(4, "float", "tensor_group", "local", 32), "nvfp4-pack-quantized"),
       {"group_0.weights", "group_size 16"}},
  };
  for (const Case& c : cases) {
    const std::string message = refusal("config.json", c.config);
    for (const std::string& needle : c.needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "expected \"" << needle << "\" in: " << message;
    }
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  }
}

json modelopt_config(const std::string& algo, json exclude = json::array({"lm_head"}),
                     json kv = nullptr) {
  json quantization = {
      {"quant_algo", algo}, {"kv_cache_quant_algo", kv}, {"exclude_modules", exclude}};
  if (algo == "NVFP4") quantization["group_size"] = 16;
  return {{"producer", {{"name", "modelopt"}, {"version", "0.35.0"}}},
          {"quantization", quantization}};
}

TEST_F(ImporterTest, ModelOptAlgorithmsMapToDefaultSchemes) {
  for (const auto& [algo, preset] : std::vector<std::pair<std::string, std::string>>{
           {"FP8", "fp8_w8a8_static"},
           {"FP8_PER_CHANNEL_PER_TOKEN", "fp8_w8a8"},
           {"W8A8_SQ_PER_CHANNEL", "int8_w8a8_static"},
           {"W8A8_SQ_PER_CHANNEL_PER_TOKEN_PLUGIN", "int8_w8a8"},
           {"NVFP4", "nvfp4"}}) {
    SCOPED_TRACE(algo);
    const auto plan = import_file("hf_quant_config.json", modelopt_config(algo));
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->importer, "modelopt");
    EXPECT_TRUE(plan->rules.empty());
    ASSERT_TRUE(plan->default_scheme.has_value());
    EXPECT_EQ(*plan->default_scheme, scheme_preset(preset));
  }
}

TEST_F(ImporterTest, ModelOptExcludesModulesAndEverythingInside) {
  const auto plan = import_file("hf_quant_config.json",
                                modelopt_config("FP8", {"decoder", "encoder.encoders.1*"}, "FP8"));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->kv_cache, "fp8_e4m3");
  EXPECT_EQ(scheme_name(plan->scheme_for(kFfn, LayerKind::kLinear)), "fp8_w8a8_static");
  EXPECT_EQ(scheme_name(plan->scheme_for(kPointwise, LayerKind::kPointwiseConv)),
            "fp8_w8a8_static");
  EXPECT_EQ(scheme_name(plan->scheme_for("encoder.embed.conv.2", LayerKind::kConv2d)), "none");
  EXPECT_EQ(scheme_name(plan->scheme_for("decoder.left_decoder.decoders.0.feed_forward.w_1",
                                         LayerKind::kLinear)),
            "none");
  EXPECT_EQ(
      scheme_name(plan->scheme_for("encoder.encoders.11.feed_forward.w_1", LayerKind::kLinear)),
      "none");
  EXPECT_EQ(scheme_name(plan->scheme_for("decoder_extra.w", LayerKind::kLinear)),
            "fp8_w8a8_static");
  // FP8 stores one weight scale per tensor: noted, with the KV cache note.
  EXPECT_EQ(plan->notes.size(), 2u);
}

TEST_F(ImporterTest, ModelOptInConfigJsonQuantizationConfig) {
  json config = {{"quantization_config",
                  {{"quant_method", "modelopt"},
                   {"quant_algo", "FP8_PER_CHANNEL_PER_TOKEN"},
                   {"exclude_modules", {"lm_head"}}}}};
  const auto plan = import_file("config.json", config);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->importer, "modelopt");
  EXPECT_EQ(plan->default_scheme->name, "fp8_w8a8");
}

TEST_F(ImporterTest, ModelOptRefusalsNameTheAlgorithm) {
  std::string message = refusal("hf_quant_config.json", modelopt_config("W4A16_AWQ"));
  EXPECT_NE(message.find("quant_algo 'W4A16_AWQ' is not supported"), std::string::npos) << message;
  EXPECT_NE(message.find("FP8_PER_CHANNEL_PER_TOKEN"), std::string::npos) << message;
  message = refusal("hf_quant_config.json", modelopt_config("FP8", json::array(), "INT8"));
  EXPECT_NE(message.find("kv_cache_quant_algo \"INT8\""), std::string::npos) << message;
  message = refusal("hf_quant_config.json", {{"producer", {{"name", "other"}}}});
  EXPECT_NE(message.find("not a ModelOpt quantization description"), std::string::npos) << message;
}

QuantizationSpec two_scheme_spec() {
  QuantizationSpec spec;
  spec.schemes = {scheme_preset("int8_w8a8"), scheme_preset("int8_w8a8_static")};
  spec.layers = {
      {kFfn, "int8_w8a8", LayerKind::kLinear, false},
      {kPointwise, "int8_w8a8", LayerKind::kPointwiseConv, false},
      {"encoder.encoders.0.feed_forward.w_2", "int8_w8a8_static", LayerKind::kLinear, false}};
  spec.skipped = {{"encoder.embed.conv.0", "one input channel"}};
  spec.producer = {{"recipe", "int8_w8a8_rtn"}};
  return spec;
}

TEST_F(ImporterTest, NativeV2SpecBecomesExactPathRules) {
  const json config = {{"format_version", 2},
                       {"architecture", "u2pp_conformer"},
                       {"quantization", json::parse(two_scheme_spec().to_json().dump())}};
  const auto plan = import_file("oasr_config.json", config);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->importer, "native");
  ASSERT_EQ(plan->rules.size(), 2u);
  EXPECT_EQ(scheme_name(plan->scheme_for(kFfn, LayerKind::kLinear)), "int8_w8a8");
  EXPECT_EQ(scheme_name(plan->scheme_for(kPointwise, LayerKind::kPointwiseConv)), "int8_w8a8");
  EXPECT_EQ(
      scheme_name(plan->scheme_for("encoder.encoders.0.feed_forward.w_2", LayerKind::kLinear)),
      "int8_w8a8_static");
  EXPECT_EQ(scheme_name(plan->scheme_for(kAttn, LayerKind::kLinear)), "none");  // not listed
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_NE(plan->notes[0].find("encoder.embed.conv.0 (one input channel)"), std::string::npos);
}

TEST_F(ImporterTest, NativeVersionAndSectionMustAgree) {
  EXPECT_FALSE(import_file("oasr_config.json", {{"format_version", 1}}).has_value());
  std::string message = refusal("oasr_config.json", {{"format_version", 2}});
  EXPECT_NE(message.find("needs a \"quantization\" object"), std::string::npos) << message;
  message = refusal(
      "oasr_config.json",
      {{"format_version", 1}, {"quantization", json::parse(two_scheme_spec().to_json().dump())}});
  EXPECT_NE(message.find("needs format_version 2"), std::string::npos) << message;
}

TEST_F(ImporterTest, MalformedJsonIsRefusedNamingTheFile) {
  std::ofstream(dir_.path() / "config.json") << "{\"quantization_config\": ";
  try {
    import_quantization(dir_.path());
    FAIL() << "accepted malformed JSON";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorruptFile);
    EXPECT_NE(std::string(e.what()).find("config.json: not valid JSON"), std::string::npos);
  }
}

TEST(ImporterTargets, KindsRegexesAndGlobs) {
  EXPECT_TRUE(target_matches("linear", kFfn, LayerKind::kLinear));
  EXPECT_FALSE(target_matches("linear", kPointwise, LayerKind::kPointwiseConv));
  EXPECT_TRUE(target_matches("re:encoder\\.encoders\\.0\\.", kFfn, LayerKind::kLinear));
  EXPECT_FALSE(target_matches("re:feed_forward", kFfn, LayerKind::kLinear));  // start-anchored
  EXPECT_TRUE(target_matches("re:.*feed_forward", kFfn, LayerKind::kLinear));
  EXPECT_TRUE(target_matches("encoder.*.w_1", kFfn, LayerKind::kLinear));  // '*' spans dots
  EXPECT_TRUE(target_matches(kFfn, kFfn, LayerKind::kLinear));
  EXPECT_FALSE(target_matches("encoder.encoders.0", kFfn, LayerKind::kLinear));
  try {
    target_matches("re:(unclosed", kFfn, LayerKind::kLinear);
    FAIL() << "accepted a broken regex";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a valid regular expression"), std::string::npos);
  }
}

}  // namespace
}  // namespace oasr::quant
