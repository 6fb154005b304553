// Which layers a request quantizes and every refusal on the way (quantize/apply.h):
// selection by kind with skips recorded, ignore globs, the model's kept
// layers, explicit targets, conv kinds, static schemes, a quantized
// checkpoint's authoritative spec; then online quantization, the in-memory
// native round trip, lane binding through OASR_SCALED_MM_BACKEND and the report.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "core/error.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "quantize/apply.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using testing::bit_equal;

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

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 0.3f) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

// A small model with every case selection meets.
struct TinyModel {
  Module root{"Tiny"};
  std::vector<std::shared_ptr<layers::LinearActivation>> w1;
  std::vector<std::shared_ptr<layers::Linear>> w2;
  std::vector<std::shared_ptr<layers::PointwiseConv1d>> pw;

  TinyModel() {
    auto blocks = root.register_module("blocks", std::make_shared<Module>("Blocks"));
    for (int b = 0; b < 2; ++b) {
      auto block = blocks->register_module(std::to_string(b), std::make_shared<Module>("Block"));
      auto ff = block->register_module("ff", std::make_shared<Module>("FFN"));
      w1.push_back(ff->register_module(
          "w_1", std::make_shared<layers::LinearActivation>(32, 64, Activation::kRelu)));
      w2.push_back(ff->register_module("w_2", std::make_shared<layers::Linear>(64, 32)));
      pw.push_back(block->register_module("pw", std::make_shared<layers::PointwiseConv1d>(32, 32)));
      block->register_module("odd", std::make_shared<layers::Linear>(20, 32));
      block->register_module("norm", std::make_shared<layers::LayerNorm>(32));
    }
    root.register_module("stem", std::make_shared<layers::Conv2d>(1, 16, 3, 3, 2, 2));
    root.register_module("conv", std::make_shared<layers::Conv2d>(16, 16, 3, 3, 2, 2));
    root.register_module("dw", std::make_shared<layers::DepthwiseConv1d>(32, 15));
    root.register_module("head", std::make_shared<layers::Linear>(32, 16));
    std::mt19937 rng(5);
    for (auto& [name, slot] : root.named_parameters())
      slot->value = random_tensor(slot->shape, rng);
  }
  // The model's output for a check: both blocks' FFN and pointwise conv.
  Tensor forward(const Tensor& x) const {
    Tensor h = x;
    for (size_t b = 0; b < 2; ++b) h = pw[b]->forward(w2[b]->forward(w1[b]->forward(h)));
    return h;
  }
};

QuantLayout tiny_layout() {
  QuantLayout layout;
  layout.architecture = "Tiny";
  layout.keep_full_precision = {{"head", "the output head"}};
  return layout;
}

std::vector<std::string> layer_paths(const QuantizationSpec& spec) {
  std::vector<std::string> out;
  for (const auto& l : spec.layers) out.push_back(l.path);
  return out;
}
std::string skip_reason(const QuantizationSpec& spec, const std::string& path) {
  for (const auto& s : spec.skipped) {
    if (s.path == path) return s.reason;
  }
  return "";
}

TEST(QuantApply, KindSelectionQuantizesTheDenseGemmsAndRecordsSkips) {
  TinyModel m;
  const QuantizationSpec spec =
      spec_from_config(QuantizationConfig::from_options("int8_w8a8", {}), m.root, tiny_layout());
  EXPECT_EQ(layer_paths(spec),
            (std::vector<std::string>{"blocks.0.ff.w_1", "blocks.0.ff.w_2", "blocks.0.pw",
                                      "blocks.1.ff.w_1", "blocks.1.ff.w_2", "blocks.1.pw"}));
  EXPECT_EQ(spec.layers[2].kind, LayerKind::kPointwiseConv);
  EXPECT_TRUE(spec.online);
  EXPECT_EQ(spec.scheme_names(), std::vector<std::string>{"int8_w8a8"});
  EXPECT_NE(skip_reason(spec, "blocks.0.odd").find("in_features 20 is not a multiple of 16"),
            std::string::npos);
  EXPECT_NE(skip_reason(spec, "head").find("the output head"), std::string::npos);
  EXPECT_EQ(skip_reason(spec, "stem"), "");  // convolutions are not selected by default
  EXPECT_EQ(spec.producer.at("recipe"), "online");
  EXPECT_EQ(spec.producer.at("selection").at("module_types"),
            (nlohmann::json{"linear", "pointwise_conv"}));

  const QuantizationSpec ignored = spec_from_config(
      QuantizationConfig::from_options("fp8_w8a8", {"ignore=blocks.1.*"}), m.root, tiny_layout());
  EXPECT_EQ(layer_paths(ignored),
            (std::vector<std::string>{"blocks.0.ff.w_1", "blocks.0.ff.w_2", "blocks.0.pw"}));
  EXPECT_EQ(skip_reason(ignored, "blocks.1.pw"), "ignored (ignore=blocks.1.*)");
  const QuantizationSpec pointwise_only = spec_from_config(
      QuantizationConfig::from_options("int8_w8a8", {"module_types=pointwise_conv"}), m.root);
  EXPECT_EQ(layer_paths(pointwise_only), (std::vector<std::string>{"blocks.0.pw", "blocks.1.pw"}));
}

TEST(QuantApply, ConvolutionKindsAndStaticSchemesNeedCalibration) {
  TinyModel m;
  expect_refused(
      [&] {
        spec_from_config(QuantizationConfig::from_options("int8_w8a8", {"module_types=conv2d"}),
                         m.root);
      },
      {"conv2d", "calibrated static input scale", "oasr quantize"});
  expect_refused(
      [&] { spec_from_config(QuantizationConfig::from_options("int8_w8a8_static", {}), m.root); },
      {"int8_w8a8_static", "calibrated static input scales", "oasr quantize"});
  SpecOptions offline;
  offline.online = false;
  offline.recipe = "smoothquant_w8a8";
  expect_refused(
      [&] {
        spec_from_config(QuantizationConfig::from_options("fp8_w8a8", {"module_types=linear,conv"}),
                         m.root, {}, offline);
      },
      {"conv1d", "fp8_w8a8", "int8 only"});
  // Offline (oasr quantize), an int8 scheme gives convolutions its static variant.
  const QuantizationSpec spec = spec_from_config(
      QuantizationConfig::from_options("int8_w8a8", {"module_types=conv"}), m.root, {}, offline);
  EXPECT_EQ(layer_paths(spec), std::vector<std::string>{"conv"});
  EXPECT_EQ(spec.layers[0].scheme, "int8_w8a8_static");
  EXPECT_NE(skip_reason(spec, "stem").find("in_channels 1"), std::string::npos);
  EXPECT_NE(skip_reason(spec, "dw").find("depthwise"), std::string::npos);
  EXPECT_EQ(spec.producer.at("recipe"), "smoothquant_w8a8");
  EXPECT_FALSE(spec.online);
}

// [W3-S] An ignore glob with a typo would quietly quantize the layer it meant
// to keep: a malformed glob, or one naming no quantizable layer, is refused.
TEST(QuantApply, AnIgnoreGlobThatCannotMatchIsRefused) {
  TinyModel m;
  for (const std::string glob : {"blocks.[01.*", "blocks.1.*\\"}) {
    expect_refused(
        [&] {
          spec_from_config(QuantizationConfig::from_options("int8_w8a8", {"ignore=" + glob}),
                           m.root);
        },
        {"ignore glob '" + glob + "' is malformed"});
  }
  expect_refused(
      [&] {
        spec_from_config(QuantizationConfig::from_options("int8_w8a8", {"ignore=block.1.*"}),
                         m.root);
      },
      {"ignore glob 'block.1.*' matches no quantizable layer", "paths look like 'blocks."});
  expect_refused(
      [&] {
        spec_from_rules({{{"blocks.0.ff.w_1"}, scheme_preset("int8_w8a8")}}, std::nullopt,
                        {"decoder.*"}, m.root);
      },
      {"ignore glob 'decoder.*' matches no quantizable layer"});
  // A glob that matches, also through a character class, still ignores.
  const QuantizationSpec ignored = spec_from_config(
      QuantizationConfig::from_options("int8_w8a8", {"ignore=blocks.[1].*"}), m.root);
  EXPECT_EQ(skip_reason(ignored, "blocks.1.pw"), "ignored (ignore=blocks.[1].*)");
}

TEST(QuantApply, OtherRequestRefusals) {
  TinyModel m;
  expect_refused([&] { spec_from_config(QuantizationConfig::from_options("nvfp4", {}), m.root); },
                 {"nvfp4", "no method serves it"});
  expect_refused(
      [&] { spec_from_config(QuantizationConfig::from_options("", {"ignore=head"}), m.root); },
      {"'ignore' was given without a scheme"});
  expect_refused(
      [&] {
        spec_from_config(QuantizationConfig::from_options("int8_w8a8", {"kv_cache=fp8_e4m3"}),
                         m.root, tiny_layout());
      },
      {"kv_cache=fp8_e4m3", "Tiny has no autoregressive decoder KV cache"});
  QuantLayout with_cache = tiny_layout();
  with_cache.has_ar_kv_cache = true;
  EXPECT_EQ(spec_from_config(QuantizationConfig::from_options("", {"kv_cache=fp8_e4m3"}), m.root,
                             with_cache)
                .kv_cache,
            "fp8_e4m3");
}

TEST(QuantApply, ExplicitTargetsAreRefusedWhereKindSelectionWouldSkip) {
  TinyModel m;
  const QuantScheme int8 = scheme_preset("int8_w8a8");
  const QuantizationSpec spec =
      spec_from_rules({{{"blocks.*.ff.*"}, int8}}, std::nullopt, {}, m.root);
  EXPECT_EQ(layer_paths(spec), (std::vector<std::string>{"blocks.0.ff.w_1", "blocks.0.ff.w_2",
                                                         "blocks.1.ff.w_1", "blocks.1.ff.w_2"}));
  expect_refused(
      [&] {
        spec_from_rules({{{"blocks.0.odd"}, int8}}, std::nullopt, {}, m.root);
      },
      {"'blocks.0.odd'", "in_features 20 is not a multiple of 16"});
  expect_refused(
      [&] {
        spec_from_rules({{{"blocks.*.odd"}, int8}}, std::nullopt, {}, m.root);
      },
      {"blocks.0.odd", "cannot be quantized"});
  expect_refused(
      [&] {
        spec_from_rules({{{"blocks.0.norm"}, int8}}, std::nullopt, {}, m.root);
      },
      {"'blocks.0.norm' is a LayerNorm", "not quantizable"});
  expect_refused(
      [&] {
        spec_from_rules({{{"decoder.*"}, int8}}, std::nullopt, {}, m.root);
      },
      {"'decoder.*' matches no quantizable layer"});
  QuantScheme per_tensor = int8;
  per_tensor.name = "int8_dynamic_tensor";
  per_tensor.input->granularity = Granularity::kPerTensor;
  expect_refused(
      [&] {
        spec_from_rules({{{"linear"}, per_tensor}}, std::nullopt, {}, m.root);
      },
      {"per-tensor dynamic activation scale"});
  // A kind target in a rule, then a default for the rest; ignore applies to both.
  const QuantizationSpec mixed = spec_from_rules({{{"pointwise_conv"}, scheme_preset("fp8_w8a8")}},
                                                 int8, {"blocks.1.*"}, m.root, tiny_layout());
  EXPECT_EQ(mixed.find_layer("blocks.0.pw")->scheme, "fp8_w8a8");
  EXPECT_EQ(mixed.find_layer("blocks.0.ff.w_1")->scheme, "int8_w8a8");
  EXPECT_EQ(mixed.find_layer("blocks.1.ff.w_1"), nullptr);
}

TEST(QuantApply, AQuantizedCheckpointsSpecIsAuthoritative) {
  TinyModel m;
  SpecOptions offline;
  offline.online = false;
  const QuantizationSpec written = spec_from_config(
      QuantizationConfig::from_options("int8_w8a8", {}), m.root, tiny_layout(), offline);
  for (const char* same : {"", "int8_w8a8", "int8_w8a8_static"}) {
    const QuantizationSpec spec =
        resolve_checkpoint_spec(written, QuantizationConfig::from_options(same, {}), "ckpt");
    EXPECT_EQ(layer_paths(spec), layer_paths(written)) << same;
    EXPECT_FALSE(spec.online);
  }
  expect_refused(
      [&] {
        resolve_checkpoint_spec(written, QuantizationConfig::from_options("fp8_w8a8", {}), "ckpt");
      },
      {"ckpt was quantized with int8_w8a8", "cannot be served as fp8_w8a8", "drop --quantization"});
  expect_refused(
      [&] {
        resolve_checkpoint_spec(
            written, QuantizationConfig::from_options("int8_w8a8", {"ignore=head"}), "ckpt");
      },
      {"quantized checkpoint", "ignore / module_types do not apply"});
  expect_refused(
      [&] {
        resolve_checkpoint_spec(
            written, QuantizationConfig::from_options("int8_w8a8", {"module_types=linear"}),
            "ckpt");
      },
      {"ignore / module_types do not apply"});
  // A spec that names what the model cannot take is refused before loading.
  QuantizationSpec bad = written;
  bad.layers.push_back({"blocks.0.odd", "int8_w8a8", LayerKind::kLinear, false});
  expect_refused([&] { validate_spec_for_model(bad, m.root); },
                 {"'blocks.0.odd'", "in_features 20"});
  bad = written;
  bad.layers.push_back({"blocks.0.norm", "int8_w8a8", LayerKind::kLinear, false});
  expect_refused([&] { validate_spec_for_model(bad, m.root); },
                 {"LayerNorm 'blocks.0.norm'", "not quantizable"});
  bad = written;
  bad.layers.push_back({"blocks.9.pw", "int8_w8a8", LayerKind::kPointwiseConv, false});
  expect_refused([&] { validate_spec_for_model(bad, m.root); }, {"'blocks.9.pw'", "does not have"});
  bad = written;
  bad.layers[0].kind = LayerKind::kPointwiseConv;
  expect_refused([&] { validate_spec_for_model(bad, m.root); },
                 {"is a pointwise_conv", "the model's is a linear"});
}

// Online quantization, then the same tensors through the native path (slots
// created first, strict load), give the same bits; the report names lanes.
TEST(QuantApply, OnlineAndNativeLoadsServeTheSameBits) {
  TinyModel online;
  const QuantizationSpec spec = spec_from_config(QuantizationConfig::from_options("int8_w8a8", {}),
                                                 online.root, tiny_layout());
  quantize_model_online(online.root, spec);
  ASSERT_EQ(setenv("OASR_SCALED_MM_BACKEND", "cpu_reference", 1), 0);
  bind_quantization(online.root);
  const QuantizationInfo info = quantization_info(online.root, spec);
  EXPECT_EQ(info.quantized_layers(), 6);
  EXPECT_EQ(info.source, "online");
  for (const LayerReport& layer : info.layers) {
    EXPECT_EQ(layer.lane, "cpu_reference") << layer.path;
    EXPECT_EQ(layer.input_quantizer, "self (quantize_per_token)");
    EXPECT_EQ(layer.scheme, "int8_w8a8");
  }
  EXPECT_EQ(info.layers[2].type, "PointwiseConv1d");
  EXPECT_NE(info.summary().find("6 quantized layers"), std::string::npos) << info.summary();
  EXPECT_NE(info.details().find("skipped blocks.0.odd: in_features 20"), std::string::npos);
  EXPECT_EQ(info.to_json().at("skipped").size(), spec.skipped.size());

  ASSERT_EQ(setenv("OASR_SCALED_MM_BACKEND", "cpu_nonexistent", 1), 0);
  expect_refused([&] { bind_quantization(online.root); },
                 {"OASR_SCALED_MM_BACKEND='cpu_nonexistent'", "cpu_reference"});
  ASSERT_EQ(unsetenv("OASR_SCALED_MM_BACKEND"), 0);

  std::map<std::string, Tensor> state;
  for (auto& [name, slot] : online.root.named_parameters()) state[name] = slot->value;
  TinyModel native;
  QuantizationSpec checkpoint = spec;
  checkpoint.online = false;
  prepare_quantized_slots(native.root, checkpoint);
  native.root.load_state_dict(MapTensorSource(state));
  bind_quantization(native.root);
  std::mt19937 rng(77);
  const Tensor x = random_tensor({3, 7, 32}, rng, 1.0f);
  EXPECT_TRUE(bit_equal(native.forward(x), online.forward(x)));
  EXPECT_EQ(quantization_info(native.root, checkpoint).source, "checkpoint");
  // The full-precision model differs, a little: 8-bit rounding in six
  // chained layers (measured 2.0% relative L2 error).
  TinyModel fp;
  EXPECT_FALSE(bit_equal(fp.forward(x), online.forward(x)));
  const Tensor q = online.forward(x), f = fp.forward(x);
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double d = static_cast<double>(q.data<float>()[i]) - f.data<float>()[i];
    diff += d * d;
    norm += static_cast<double>(f.data<float>()[i]) * f.data<float>()[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 0.05);
}

// A quantized checkpoint whose scales hold NaN, 0 or a negative value is
// refused at load, naming the tensor and the first bad element ([W2-Q]):
// served, NaN and 0 gave normal-looking text.
TEST(QuantApply, ACheckpointScaleThatIsNotPositiveAndFiniteIsRefusedAtLoad) {
  TinyModel online;
  const QuantizationSpec spec = spec_from_config(QuantizationConfig::from_options("int8_w8a8", {}),
                                                 online.root, tiny_layout());
  quantize_model_online(online.root, spec);
  std::map<std::string, Tensor> state;
  for (auto& [name, slot] : online.root.named_parameters()) state[name] = slot->value;
  QuantizationSpec checkpoint = spec;
  checkpoint.online = false;
  for (const float bad : {std::nanf(""), 0.0f, -0.25f, INFINITY}) {
    std::map<std::string, Tensor> corrupt = state;
    Tensor scale = corrupt.at("blocks.1.ff.w_2.weight_scale").clone();
    scale.data<float>()[5] = bad;
    corrupt["blocks.1.ff.w_2.weight_scale"] = scale;
    TinyModel native;
    prepare_quantized_slots(native.root, checkpoint);
    if (!std::isfinite(bad)) {
      // A non-finite value is refused by the load itself (every float
      // tensor of a checkpoint is checked there), naming the tensor.
      expect_refused([&] { native.root.load_state_dict(MapTensorSource(corrupt)); },
                     {"checkpoint tensor 'blocks.1.ff.w_2.weight_scale' [32] holds a NaN or "
                      "infinity (element 5)"});
      continue;
    }
    native.root.load_state_dict(MapTensorSource(corrupt));
    expect_refused([&] { bind_quantization(native.root); },
                   {"blocks.1.ff.w_2.weight_scale", "1 of 32 values", "index 5",
                    "re-quantize the checkpoint"});
  }
  TinyModel intact;  // the same checkpoint unmodified loads
  prepare_quantized_slots(intact.root, checkpoint);
  intact.root.load_state_dict(MapTensorSource(state));
  EXPECT_NO_THROW(bind_quantization(intact.root));
}

}  // namespace
}  // namespace oasr::quant
