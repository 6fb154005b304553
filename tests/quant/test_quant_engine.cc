// The load sequence end to end on the random-weight WeNet U2++ directory the
// u2pp_engine oracle generator writes: online int8_w8a8 / fp8_w8a8 through
// ASREngine (which layers, which lanes, what is skipped and why; encoder
// output close to full precision), then a
// native format_version 2 checkpoint written from it, served with no flag,
// bit for bit as online, and the refusals a quantized checkpoint answers with.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>

#include "core/error.h"
#include "engine/asr_engine.h"
#include "engine/engine_options.h"
#include "io/safetensors.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/native_checkpoint.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/quant_test_util.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using engine::ASREngine;
using engine::EngineConfig;
namespace fs = std::filesystem;

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

fs::path wenet_dir() {
  return testing::oracle_dir() / "model";
}
std::vector<fs::path> audio_files() {
  return {wenet_dir() / "audio" / "u01_chirps.wav", wenet_dir() / "audio" / "u05_long.wav",
          wenet_dir() / "audio" / "u06_short.wav"};
}

EngineConfig config_for(const fs::path& dir, const std::string& scheme,
                        const std::vector<std::string>& options = {}) {
  EngineConfig config;
  config.ckpt_dir = dir;
  config.decode.set("decode_method", "ctc_prefix_beam_search");
  config.quantization = quant::QuantizationConfig::from_options(scheme, options);
  return config;
}

std::vector<std::string> texts(const ASREngine& engine) {
  std::vector<std::string> out;
  for (const auto& t : engine.transcribe_files(audio_files())) out.push_back(t.text);
  return out;
}

double relative_error(const Tensor& a, const Tensor& b) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    diff += d * d;
    norm += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(diff / norm);
}

Tensor random_features(int64_t batch, int64_t frames, int64_t bins, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(10.0f, 3.0f);  // fbank-like log energies
  Tensor t = Tensor::empty({batch, frames, bins}, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

// The quantized GEMMs of this U2++: 10 per encoder block (q, k, v, out, two
// FFNs' w_1 / w_2, pointwise_conv1 / 2) and 10 per decoder layer (self and
// source attention's q, k, v, out, the FFN's w_1 / w_2).
int64_t expected_quantized_layers(const models::U2ppConfig& c) {
  return 10 * c.encoder.num_blocks + 10 * (c.decoder.num_blocks + c.decoder.r_num_blocks);
}

// Who quantizes a layer's input under online int8 (spec "The quantized
// forward of one encoder block"): the pre-norms feeding only per-token GEMMs
// emit their 8-bit input (the add + norm where a residual add precedes them);
// the rest quantize their own.
std::string expected_input_quantizer(const std::string& path) {
  const size_t dot =
      path.find('.', path.find("decoders.") != std::string::npos ? path.find("decoders.") + 9
                                                                 : path.find("encoders.") + 9);
  const std::string block = path.substr(0, dot + 1);
  const std::string layer = path.substr(dot + 1);
  if (layer == "feed_forward_macaron.w_1") return block + "norm_ff_macaron (layer_norm_quant)";
  if (layer == "feed_forward.w_1") {
    return block + (path.rfind("encoder.", 0) == 0 ? "norm_ff" : "norm3") +
           " (add_layer_norm_residual_quant)";
  }
  if (path.rfind("encoder.", 0) == 0 &&
      (layer == "self_attn.linear_q" || layer == "self_attn.linear_k" ||
       layer == "self_attn.linear_v")) {
    return block + "norm_mha (add_layer_norm_residual_quant)";
  }
  if (layer == "self_attn.linear_q" || layer == "self_attn.linear_k" ||
      layer == "self_attn.linear_v") {
    return block + "norm1 (layer_norm_quant)";
  }
  if (layer == "src_attn.linear_q") return block + "norm2 (add_layer_norm_residual_quant)";
  return "self (quantize_per_token)";
}

TEST(QuantEngine, OnlineInt8QuantizesEveryDenseGemmButTheKeptOnes) {
  const ASREngine fp(config_for(wenet_dir(), ""));
  EXPECT_FALSE(fp.quantization_info().enabled());
  EXPECT_EQ(fp.quantization_info().summary(), "full precision (no quantization)");

  const ASREngine q(config_for(wenet_dir(), "int8_w8a8"));
  const quant::QuantizationInfo& info = q.quantization_info();
  const models::U2ppConfig& c = testing::u2pp_model(q).config();
  EXPECT_EQ(info.quantized_layers(), expected_quantized_layers(c));
  EXPECT_EQ(info.schemes, std::vector<std::string>{"int8_w8a8"});
  EXPECT_EQ(info.source, "online");
  EXPECT_EQ(info.kv_cache, "");
  // 10 quantized GEMMs a block; the norms feeding w_1 (twice) and q/k/v quantize
  // for them, so w_2 (twice), linear_out and both pointwise convs launch their own.
  EXPECT_EQ(info.standalone_quantize_launches_per_block,
            std::vector<int64_t>(static_cast<size_t>(c.encoder.num_blocks), 5));
  // auto: the fastest int8 lane this CPU runs (AMX, AVX-512 VNNI, AVX-VNNI, AVX2).
  std::string lane = "cpu_reference";
  for (const char* name :
       {"cpu_avx2_int8", "cpu_avx_vnni_int8", "cpu_avx512_vnni_int8", "cpu_amx_int8"}) {
    const quant::ScaledMMLane* candidate = quant::find_lane(name);
    if (candidate != nullptr && candidate->is_available()) lane = name;
  }
  std::set<std::string> paths;
  for (const quant::LayerReport& layer : info.layers) {
    EXPECT_EQ(layer.lane, lane) << layer.path;
    EXPECT_EQ(layer.scheme, "int8_w8a8");
    EXPECT_EQ(layer.input_quantizer, expected_input_quantizer(layer.path)) << layer.path;
    paths.insert(layer.path);
  }
  for (const char* path :
       {"encoder.encoders.0.self_attn.linear_q", "encoder.encoders.0.feed_forward_macaron.w_1",
        "encoder.encoders.1.conv_module.pointwise_conv2",
        "decoder.left_decoder.decoders.0.src_attn.linear_v",
        "decoder.right_decoder.decoders.0.feed_forward.w_2"}) {
    EXPECT_EQ(paths.count(path), 1u) << path;
  }
  // Kept full precision by the U2++ layout, each with its reason.
  std::map<std::string, std::string> skipped;
  for (const quant::SkippedLayer& s : info.skipped) skipped[s.path] = s.reason;
  std::set<std::string> expected_skips = {"encoder.embed.out.0", "ctc.ctc_lo",
                                          "decoder.left_decoder.output_layer",
                                          "decoder.right_decoder.output_layer"};
  for (int64_t b = 0; b < c.encoder.num_blocks; ++b) {
    expected_skips.insert("encoder.encoders." + std::to_string(b) + ".self_attn.linear_pos");
  }
  EXPECT_EQ(skipped.size(), expected_skips.size());
  for (const std::string& path : expected_skips) {
    ASSERT_EQ(skipped.count(path), 1u) << path;
    EXPECT_NE(skipped[path].find("kept full precision by the U2++ Conformer layout"),
              std::string::npos);
  }
  EXPECT_NE(skipped["ctc.ctc_lo"].find("CTC head"), std::string::npos);
  EXPECT_FALSE(texts(q).front().empty());
}

// The --quantization string is validated once from flag to kernel: the
// options layer parses it into a QuantizationConfig, and the engine, the
// load sequence, spec selection and the lanes take that type as valid.
TEST(QuantEngine, AQuantizationStringIsValidatedOnceFromFlagToKernel) {
  const int64_t before = quant::QuantizationConfig::parse_count();
  const EngineConfig config =
      engine::engine_config_from_options({{"ckpt_dir", wenet_dir().string()},
                                          {"decode_method", "ctc_prefix_beam_search"},
                                          {"quantization", "int8_w8a8"},
                                          {"quantization_option", "ignore=decoder.*"}});
  const ASREngine engine(config);
  EXPECT_EQ(texts(engine).size(), 3u);
  EXPECT_EQ(engine.quantization_info().schemes, std::vector<std::string>{"int8_w8a8"});
  EXPECT_EQ(quant::QuantizationConfig::parse_count() - before, 1);
}

TEST(QuantEngine, QuantizedEncoderStaysCloseToFullPrecision) {
  const ASREngine fp(config_for(wenet_dir(), ""));
  const int64_t bins = testing::u2pp_model(fp).config().encoder.input_dim;
  const Tensor feats = random_features(2, 160, bins, 3);
  const Tensor lengths = Tensor::from_vector<int64_t>({160, 160}, {2});
  const Tensor reference = testing::u2pp_model(fp).encode(feats, lengths).out;
  // Measured on this fixture: int8 2.8%, fp8 7.7% (random weights, two blocks).
  for (const auto& [scheme, bound] :
       std::vector<std::pair<std::string, double>>{{"int8_w8a8", 0.05}, {"fp8_w8a8", 0.12}}) {
    SCOPED_TRACE(scheme);
    const ASREngine q(config_for(wenet_dir(), scheme));
    const Tensor out = testing::u2pp_model(q).encode(feats, lengths).out;
    const double error = relative_error(out, reference);
    std::cout << scheme << ": encoder output relative L2 error vs fp32 " << error << "\n";
    EXPECT_LT(error, bound);
    EXPECT_GT(error, 0.0);
  }
}

TEST(QuantEngine, NativeV2CheckpointServesTheSameBitsWithNoFlag) {
  const testing::TempDir tmp;
  const ASREngine online(config_for(wenet_dir(), "int8_w8a8"));
  const fs::path dir =
      testing::write_quantized_checkpoint(online, wenet_dir(), tmp.path() / "u2pp_int8");
  std::ifstream config_file(dir / models::kNativeConfigName);
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config.at("format_version"), 2);
  EXPECT_EQ(config.at("quantization").at("layers").size(),
            static_cast<size_t>(online.quantization_info().quantized_layers()));
  const io::SafeTensorsFile weights = io::SafeTensorsFile::open(dir / models::kNativeWeightsName);
  EXPECT_EQ(weights.info("encoder.encoders.0.feed_forward.w_1.weight").dtype, DType::kI8);
  EXPECT_EQ(weights.info("encoder.encoders.0.feed_forward.w_1.weight_scale").dtype, DType::kF32);
  EXPECT_EQ(weights.info("encoder.encoders.0.conv_module.pointwise_conv1.weight").shape,
            (Shape{2 * testing::u2pp_model(online).config().encoder.output_size,
                   testing::u2pp_model(online).config().encoder.output_size, 1}));

  for (const char* same : {"", "int8_w8a8", "int8_w8a8_static"}) {
    SCOPED_TRACE(same);
    const ASREngine served(config_for(dir, same));
    EXPECT_EQ(served.quantization_info().source, "checkpoint");
    EXPECT_EQ(served.quantization_info().quantized_layers(),
              online.quantization_info().quantized_layers());
    EXPECT_EQ(texts(served), texts(online));
  }
  expect_refused([&] { ASREngine(config_for(dir, "fp8_w8a8")); },
                 {"was quantized with int8_w8a8", "cannot be served as fp8_w8a8"});
  expect_refused([&] { ASREngine(config_for(dir, "int8_w8a8", {"ignore=ctc.*"})); },
                 {"quantized checkpoint", "ignore / module_types do not apply"});
  expect_refused([&] { ASREngine(config_for(dir, "", {"kv_cache=fp8_e4m3"})); },
                 {"kv_cache=fp8_e4m3", "no autoregressive decoder KV cache"});
}

TEST(QuantEngine, AQuantizedCheckpointWithBadTensorsIsRefusedNamingThem) {
  const testing::TempDir tmp;
  const ASREngine online(config_for(wenet_dir(), "int8_w8a8"));
  const fs::path good =
      testing::write_quantized_checkpoint(online, wenet_dir(), tmp.path() / "good");
  const io::SafeTensorsFile weights = io::SafeTensorsFile::open(good / models::kNativeWeightsName);
  const std::string victim = "encoder.encoders.1.self_attn.linear_out";
  struct Case {
    const char* name;
    std::function<bool(const std::string&, Tensor&)> edit;  // false: drop the tensor
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"missing_scale",
       [&](const std::string& n, Tensor&) { return n != victim + ".weight_scale"; },
       "missing:\n    " + victim + ".weight_scale"},
      {"float_weight",
       [&](const std::string& n, Tensor& t) {
         if (n == victim + ".weight") t = t.to(DType::kF32);
         return true;
       },
       victim + ".weight: dtype float32, expected int8"},
      {"wrong_shape",
       [&](const std::string& n, Tensor& t) {
         if (n == victim + ".weight_scale") t = t.narrow(0, 0, 8).contiguous();
         return true;
       },
       victim + ".weight_scale: shape [8]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = tmp.path() / c.name;
    fs::copy(good, dir, fs::copy_options::recursive);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& name : weights.names()) {
      Tensor t = weights.get(name);
      if (c.edit(name, t)) tensors.emplace_back(name, t);
    }
    io::save_safetensors(dir / models::kNativeWeightsName, tensors);
    expect_refused([&] { ASREngine(config_for(dir, "")); }, {c.needle});
  }
  // A spec naming a layer that cannot be quantized (a LayerNorm) is refused too.
  const fs::path dir = tmp.path() / "bad_spec";
  fs::copy(good, dir, fs::copy_options::recursive);
  std::ifstream in(dir / models::kNativeConfigName);
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  config["quantization"]["layers"]["encoder.encoders.0.norm_ff"] = {{"scheme", "int8_w8a8"},
                                                                    {"kind", "linear"}};
  std::ofstream(dir / models::kNativeConfigName) << config.dump(2);
  expect_refused([&] { ASREngine(config_for(dir, "")); },
                 {"LayerNorm 'encoder.encoders.0.norm_ff'", "not quantizable"});
}

TEST(QuantEngine, OnlineRefusalsReachTheEngine) {
  expect_refused([] { ASREngine(config_for(wenet_dir(), "nvfp4")); }, {"nvfp4"});
  expect_refused([] { ASREngine(config_for(wenet_dir(), "int8_w8a8", {"module_types=conv2d"})); },
                 {"conv2d", "oasr quantize"});
  expect_refused([] { ASREngine(config_for(wenet_dir(), "", {"ignore=ctc.*"})); },
                 {"without a scheme"});
  expect_refused([] { ASREngine(config_for(wenet_dir(), "int8_w8a8_static")); },
                 {"calibrated static input scales"});
}

}  // namespace
}  // namespace oasr
