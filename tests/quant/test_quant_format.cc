// Formats, physical specs, layer kinds, QuantizationConfig parsing and
// validation, and the spec's JSON form (written by oasr quantize into a v2
// oasr_config.json, read back by the loader).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "quant/format.h"
#include "quant/layer_kind.h"
#include "quant/methods/quant_method.h"
#include "quant/physical.h"
#include "quant/spec.h"

namespace oasr::quant {
namespace {

// Runs `body`, expecting an oasr::Error whose message holds every needle.
template <typename F>
void expect_refused(F&& body, std::initializer_list<std::string> needles) {
  try {
    body();
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

TEST(QuantFormat, PresetsDescribeTheServedSchemes) {
  EXPECT_EQ(scheme_preset_names(),
            (std::vector<std::string>{"int8_w8a8", "int8_w8a8_static", "fp8_w8a8",
                                      "fp8_w8a8_static", "nvfp4"}));
  const QuantScheme& int8 = scheme_preset("int8_w8a8");
  EXPECT_EQ(int8.weight.dtype, QDType::kInt8);
  EXPECT_EQ(int8.weight.granularity, Granularity::kPerChannel);
  ASSERT_TRUE(int8.input.has_value());
  EXPECT_TRUE(int8.input->dynamic);
  EXPECT_EQ(int8.input->granularity, Granularity::kPerToken);
  const QuantScheme& fp8_static = scheme_preset("fp8_w8a8_static");
  EXPECT_EQ(fp8_static.weight.dtype, QDType::kFp8E4M3);
  EXPECT_FALSE(fp8_static.input->dynamic);
  EXPECT_EQ(fp8_static.input->granularity, Granularity::kPerTensor);
  EXPECT_TRUE(scheme_has_static_input(fp8_static));
  const QuantScheme& nvfp4 = scheme_preset("nvfp4");
  EXPECT_TRUE(nvfp4.weight.micro_scaled);
  EXPECT_EQ(nvfp4.weight.block_k, 16);
  expect_refused([] { scheme_preset("int4_w4a16"); },
                 {"int4_w4a16", "int8_w8a8, int8_w8a8_static, fp8_w8a8, fp8_w8a8_static, nvfp4"});
  EXPECT_EQ(to_string(QDType::kFp8E4M3), "fp8_e4m3");
  EXPECT_EQ(to_string(Granularity::kPerToken), "per_token");
}

TEST(QuantFormat, MaterializeGivesASpecIdPerPhysicalLayout) {
  EXPECT_EQ(materialize(scheme_preset("int8_w8a8"), 0).spec_id, "int8_per_channel");
  EXPECT_EQ(materialize(scheme_preset("int8_w8a8"), 0).weight_dtype, DType::kI8);
  EXPECT_EQ(materialize(scheme_preset("fp8_w8a8"), 90).spec_id, "fp8_per_channel");
  EXPECT_EQ(materialize(scheme_preset("fp8_w8a8"), 90).weight_dtype, DType::kF8E4M3);
  QuantScheme block = scheme_preset("fp8_w8a8");
  block.weight.granularity = Granularity::kBlock;
  block.weight.block_n = block.weight.block_k = 128;
  EXPECT_EQ(materialize(block, 90).spec_id, "fp8_block_128_128");
  // NVFP4's scale layout is the one hardware decision: 128x4 from Blackwell on.
  EXPECT_EQ(materialize(scheme_preset("nvfp4"), 90).spec_id, "nvfp4_block_16_linear");
  EXPECT_EQ(materialize(scheme_preset("nvfp4"), 100).spec_id, "nvfp4_block_16_128x4");
  QuantScheme full;
  full.name = "bf16";
  EXPECT_EQ(materialize(full, 0).spec_id, "full_precision");
  EXPECT_FALSE(materialize(full, 0).needs_activation_quant);
  QuantScheme int4 = scheme_preset("int8_w8a8");
  int4.weight.dtype = QDType::kInt4;
  expect_refused([&] { materialize(int4, 90); }, {"int4"});
}

TEST(QuantFormat, ServabilityRefusalsNameTheScheme) {
  expect_refused([] { check_servable(scheme_preset("nvfp4")); },
                 {"nvfp4", "no method serves it", "int8_w8a8"});
  QuantScheme per_tensor_dynamic = scheme_preset("int8_w8a8");
  per_tensor_dynamic.name = "int8_dyn_tensor";
  per_tensor_dynamic.input->granularity = Granularity::kPerTensor;
  expect_refused([&] { check_servable(per_tensor_dynamic); },
                 {"int8_dyn_tensor", "per-tensor dynamic activation scale", "refused"});
  QuantScheme weight_only = scheme_preset("int8_w8a8");
  weight_only.name = "w8a16";
  weight_only.input.reset();
  expect_refused([&] { check_servable(weight_only); }, {"w8a16", "weight-only"});
  for (const char* served : {"int8_w8a8", "int8_w8a8_static", "fp8_w8a8", "fp8_w8a8_static"}) {
    EXPECT_NO_THROW(check_servable(scheme_preset(served))) << served;
    EXPECT_NO_THROW(make_quant_method(scheme_preset(served))) << served;
  }
  EXPECT_EQ(make_quant_method(scheme_preset("int8_w8a8"))->name(), "int8");
  EXPECT_EQ(make_quant_method(scheme_preset("fp8_w8a8_static"))->name(), "fp8");
}

TEST(QuantFormat, LayerKindsParseListsAndGroups) {
  EXPECT_EQ(parse_layer_kinds("pointwise_conv, linear"),
            (std::vector<LayerKind>{LayerKind::kLinear, LayerKind::kPointwiseConv}));
  EXPECT_EQ(parse_layer_kinds("conv"),
            (std::vector<LayerKind>{LayerKind::kConv1d, LayerKind::kConv2d}));
  EXPECT_EQ(parse_layer_kinds("all").size(), 4u);
  expect_refused([] { parse_layer_kinds("linear,attention"); },
                 {"attention", "linear, pointwise_conv, conv1d, conv2d"});
}

TEST(QuantConfig, FromJsonAndFromCliOptionsAgree) {
  const auto from_json = QuantizationConfig::from_json(nlohmann::json::parse(
      R"({"scheme": "int8_w8a8", "ignore": ["encoder.encoders.0.*", "ctc.*"],
          "module_types": "linear", "kv_cache": "fp8_e4m3"})"));
  const auto from_cli = QuantizationConfig::from_options(
      "int8_w8a8",
      {"ignore=encoder.encoders.0.*,ctc.*", "module_types=linear", "kv_cache=fp8_e4m3"});
  for (const QuantizationConfig& c : {from_json, from_cli}) {
    EXPECT_EQ(c.scheme(), "int8_w8a8");
    EXPECT_EQ(c.ignore(), (std::vector<std::string>{"encoder.encoders.0.*", "ctc.*"}));
    EXPECT_EQ(c.kinds(), std::vector<LayerKind>{LayerKind::kLinear});
    EXPECT_EQ(c.kv_cache(), "fp8_e4m3");
  }
  EXPECT_EQ(QuantizationConfig::from_json("fp8_w8a8").scheme(), "fp8_w8a8");
  EXPECT_EQ(
      QuantizationConfig::from_json(nlohmann::json::parse(R"({"scheme": "int8_w8a8"})")).kinds(),
      default_layer_kinds());
  // Repeated options accumulate.
  EXPECT_EQ(QuantizationConfig::from_options("int8_w8a8", {"ignore=a", "ignore=b"}).ignore(),
            (std::vector<std::string>{"a", "b"}));
  expect_refused([] { QuantizationConfig::from_options("int8_w8a8", {"ignore"}); },
                 {"'ignore' is not key=value"});
  expect_refused([] { QuantizationConfig::from_options("int8_w8a8", {"alpha=0.5"}); },
                 {"unknown key 'alpha'", "ignore, module_types, kv_cache"});
  expect_refused(
      [] { QuantizationConfig::from_json(nlohmann::json::parse(R"({"schem": "int8_w8a8"})")); },
      {"unknown key 'schem'"});
}

TEST(QuantConfig, ParseRefusesWhatCannotBeServed) {
  expect_refused([] { QuantizationConfig::from_options("nvfp4", {}); },
                 {"nvfp4", "no method serves it"});
  expect_refused([] { QuantizationConfig::from_options("int3_w3a3", {}); },
                 {"unknown quantization scheme 'int3_w3a3'"});
  expect_refused([] { QuantizationConfig::from_options("", {"ignore=ctc.*"}); },
                 {"'ignore' was given without a scheme", "--quantization int8_w8a8"});
  expect_refused([] { QuantizationConfig::from_options("", {"module_types=linear"}); },
                 {"'module_types' was given without a scheme"});
  expect_refused([] { QuantizationConfig::from_options("int8_w8a8", {"kv_cache=int4"}); },
                 {"kv_cache format 'int4'", "fp8_e4m3"});
  // kv_cache alone is a request without a weight scheme, and valid.
  EXPECT_FALSE(QuantizationConfig::from_options("", {"kv_cache=fp8_e4m3"}).empty());
  EXPECT_TRUE(QuantizationConfig{}.empty());
  // The raw request holds anything; only parse() makes a config of it.
  QuantizationRequest raw;
  raw.scheme = "int3_w3a3";
  expect_refused([&] { QuantizationConfig::parse(raw); },
                 {"unknown quantization scheme 'int3_w3a3'"});
  EXPECT_EQ(scheme_family("int8_w8a8_static"), "int8_w8a8");
  EXPECT_EQ(scheme_family("fp8_w8a8"), "fp8_w8a8");
}

TEST(QuantSpec, JsonRoundTripKeepsLayersSchemesAndProvenance) {
  QuantizationSpec spec;
  spec.schemes = {scheme_preset("int8_w8a8"), scheme_preset("int8_w8a8_static")};
  spec.layers = {{"encoder.encoders.0.feed_forward.w_1", "int8_w8a8", LayerKind::kLinear, false},
                 {"encoder.encoders.0.conv_module.pointwise_conv2", "int8_w8a8",
                  LayerKind::kPointwiseConv, true},
                 {"encoder.embed.conv.2", "int8_w8a8_static", LayerKind::kConv2d, false}};
  spec.skipped = {{"encoder.embed.conv.0", "in_channels 1 is not a multiple of 16"}};
  spec.producer["recipe"] = "smoothquant_w8a8";
  const nlohmann::ordered_json j = spec.to_json();
  EXPECT_EQ(j.at("producer").at("skipped").at(0).at("layer"), "encoder.embed.conv.0");
  EXPECT_TRUE(j.at("kv_cache").is_null());
  const QuantizationSpec back = QuantizationSpec::from_json(nlohmann::json::parse(j.dump()), "t");
  ASSERT_EQ(back.layers.size(), 3u);
  const LayerQuantization* pw2 = back.find_layer(spec.layers[1].path);
  ASSERT_NE(pw2, nullptr);
  EXPECT_EQ(pw2->kind, LayerKind::kPointwiseConv);
  EXPECT_TRUE(pw2->runtime_smoothed);
  EXPECT_FALSE(back.find_layer(spec.layers[0].path)->runtime_smoothed);
  EXPECT_EQ(back.find_layer(spec.layers[2].path)->scheme, "int8_w8a8_static");
  EXPECT_EQ(back.scheme("int8_w8a8_static"), scheme_preset("int8_w8a8_static"));
  // A reader may hold the document as an unordered JSON object: layer order
  // carries no meaning (reports follow the model's module order).
  std::vector<std::string> names = back.scheme_names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"int8_w8a8", "int8_w8a8_static"}));
  ASSERT_EQ(back.skipped.size(), 1u);
  EXPECT_EQ(back.skipped[0].reason, spec.skipped[0].reason);
  EXPECT_EQ(back.producer.at("recipe"), "smoothquant_w8a8");
  EXPECT_FALSE(back.online);
  EXPECT_EQ(nlohmann::json::parse(back.to_json().dump()), nlohmann::json::parse(j.dump()));

  nlohmann::json bad = nlohmann::json::parse(j.dump());
  bad["layers"]["encoder.embed.conv.2"]["scheme"] = "int8_w8a8_fancy";
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"cfg.json", "encoder.embed.conv.2", "int8_w8a8_fancy"});
  bad = nlohmann::json::parse(j.dump());
  bad["layers"]["encoder.embed.conv.2"]["kind"] = "conv3d";
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); }, {"conv3d"});
  // [W3-S] A scheme name this oasr does not know, or a known name whose
  // fields were changed, is refused: it used to be served by its fields
  // (int8 kernels for a scheme named w4a16_awq).
  bad = nlohmann::json::parse(j.dump());
  bad["schemes"]["w4a16_awq"] = bad["schemes"]["int8_w8a8"];
  bad["schemes"].erase("int8_w8a8");
  bad["layers"]["encoder.encoders.0.feed_forward.w_1"]["scheme"] = "w4a16_awq";
  bad["layers"]["encoder.encoders.0.conv_module.pointwise_conv2"]["scheme"] = "w4a16_awq";
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"cfg.json \"quantization\": scheme 'w4a16_awq' is no scheme this oasr knows (",
                  "int8_w8a8, ", "re-quantize"});
  bad = nlohmann::json::parse(j.dump());
  bad["schemes"]["int8_w8a8"]["weight"]["symmetric"] = false;
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"scheme 'int8_w8a8' declares", "which is not the int8_w8a8 preset",
                  "the checkpoint was edited"});
  bad = nlohmann::json::parse(j.dump());
  bad["schemes"]["int8_w8a8"]["weight"]["group_size"] = 128;
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"scheme 'int8_w8a8' weight: unknown key 'group_size'"});
  bad = nlohmann::json::parse(j.dump());
  bad["schemes"]["int8_w8a8"]["weight"]["symmetric"] = "yes";
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"'symmetric' must be true or false, got \"yes\""});
  bad = nlohmann::json::parse(j.dump());
  bad["schemes"]["int8_w8a8"]["zero_point"] = true;
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"scheme 'int8_w8a8': unknown key 'zero_point'"});
  bad = nlohmann::json::parse(j.dump());
  bad["recipe_hash"] = "x";
  expect_refused([&] { QuantizationSpec::from_json(bad, "cfg.json"); },
                 {"unknown key 'recipe_hash'"});
}

}  // namespace
}  // namespace oasr::quant
