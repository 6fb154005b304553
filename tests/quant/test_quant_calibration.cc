// Calibration, SmoothQuant and the calibrated recipes end to end, on the
// random-weight WeNet U2++ directory of the u2pp_engine fixture (16 kHz,
// 2 Conformer blocks, a 1 + 1 layer bidirectional decoder):
//   * observers record what the layers see (per channel, conv layouts too);
//   * SmoothQuant's folds leave the full-precision model computing the same
//     function, and its runtime smoothers invert their scales;
//   * `oasr quantize --recipe smoothquant_w8a8_fused` writes the spec's
//     tensors (input_scale on every FFN w_2, smooth_inv on the runtime-
//     smoothed layers, folded norms in the source's dtype), the provenance and
//     quantization_report.json, and serves with no flag;
//   * conv2d selection, the minmax observer, and every refusal, with nothing
//     left behind on failure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>

#include "cli/cli_test_util.h"
#include "engine/asr_engine.h"
#include "engine/quantize_recipe.h"
#include "io/safetensors.h"
#include "layers/quantizable.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/native_checkpoint.h"
#include "quant/calibration/observers.h"
#include "quantize/smoothquant.h"

namespace oasr::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path wenet_dir() {
  return oracle_dir() / "model";
}
std::string audio(const char* name) {
  return (wenet_dir() / "audio" / name).string();
}

// A calibration manifest of the fixture's 16 kHz clips (plus `extra` lines).
fs::path write_manifest(const fs::path& dir, const std::vector<std::string>& extra = {}) {
  fs::create_directories(dir);
  const fs::path path = dir / "calib.jsonl";
  std::ofstream out(path);
  for (const char* name : {"u01_chirps.wav", "u02_harmonic.wav", "u03_noise_bursts.wav",
                           "u04_mixture.wav", "u06_short.wav"}) {
    out << json{{"id", name}, {"audio", audio(name)}}.dump() << "\n";
  }
  for (const std::string& line : extra) out << line << "\n";
  return path;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<fs::path> siblings_named_like(const fs::path& destination) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(destination.parent_path())) {
    if (entry.path().filename().string().rfind(destination.filename().string(), 0) == 0) {
      out.push_back(entry.path());
    }
  }
  return out;
}

TEST(Calibration, RecorderKeepsPerChannelMaximaForLinearAndConvolutionLayouts) {
  quant::CalibrationRecorder recorder;
  // Linear: [2, 3, 4] channels last.
  Tensor x = Tensor::empty({2, 3, 4}, DType::kF32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = (i % 5 == 0 ? -1.0f : 0.5f) * i;
  recorder.observe("lin", quant::LayerKind::kLinear, x);
  std::vector<float> expected(4, 0.0f);
  for (int64_t i = 0; i < x.numel(); ++i) {
    expected[i % 4] = std::max(expected[i % 4], std::fabs(x.data<float>()[i]));
  }
  EXPECT_EQ(recorder.find("lin")->channels.values(), expected);
  EXPECT_EQ(recorder.find("lin")->channels.rows(), 6);
  // Conv2d: [B=2, C=3, H=2, W=2], channel = dim 1.
  Tensor c = Tensor::empty({2, 3, 2, 2}, DType::kF32);
  for (int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] = static_cast<float>(i);
  recorder.track_histogram("conv");
  recorder.observe("conv", quant::LayerKind::kConv2d, c);
  // channel ch's largest value: batch 1, last pixel: 12 + ch * 4 + 3.
  EXPECT_EQ(recorder.find("conv")->channels.values(), (std::vector<float>{15, 19, 23}));
  EXPECT_EQ(recorder.find("conv")->channels.rows(), 8);
  EXPECT_EQ(recorder.find("conv")->histogram->count(), 24);
  EXPECT_EQ(recorder.find("conv")->histogram->max(), 23.0f);
  EXPECT_FALSE(recorder.find("lin")->histogram.has_value());
}

struct Outputs {
  Tensor encoder;
  Tensor decoder;
  Tensor right_decoder;
};

Outputs run_model(const models::U2ppModel& model, const Tensor& feats) {
  const Tensor lengths = Tensor::from_vector(std::vector<int64_t>{feats.size(1)}, {1});
  const auto encoded = model.encode(feats, lengths);
  const Tensor hyps = Tensor::from_vector(std::vector<int64_t>{3, 5, 7, 2, 9, 4}, {2, 3});
  const Tensor hyps_lens = Tensor::from_vector(std::vector<int64_t>{3, 2}, {2});
  const Tensor r_hyps = Tensor::from_vector(std::vector<int64_t>{7, 5, 3, 9, 2, 4}, {2, 3});
  const auto decoded = model.forward_attention_decoder(encoded.out, hyps, hyps_lens, r_hyps, 0.3);
  return {encoded.out.contiguous(), decoded.left.contiguous(), decoded.right.contiguous()};
}

double max_relative_difference(const Tensor& a, const Tensor& b) {
  double scale = 0.0;
  double diff = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(a.data<float>()[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  }
  return diff / scale;
}

TEST(Calibration, SmoothingFoldsLeaveTheFullPrecisionModelComputingTheSameFunction) {
  const models::ModelSource source = models::load_checkpoint_dir(wenet_dir());
  engine::MaterializeOptions options;
  options.bind = false;
  auto master = models::materialize_u2pp_model(source, {}, options);
  models::U2ppModel& model = *master.model;
  const quant::QuantLayout layout = models::u2pp_quantization_layout(source.config.model);

  Tensor feats = Tensor::empty({1, 67, 80}, DType::kF32);
  for (int64_t i = 0; i < feats.numel(); ++i) {
    feats.data<float>()[i] = std::sin(0.37f * static_cast<float>(i)) * 4.0f + 9.0f;
  }
  quant::CalibrationRecorder recorder;
  std::set<std::string> all;
  for (auto& [path, module] : model.named_modules()) {
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module)) {
      layer->set_input_observer(&recorder);
      all.insert(path);
    }
  }
  const Outputs before = run_model(model, feats);
  for (auto& [path, module] : model.named_modules()) {
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module)) {
      layer->set_input_observer(nullptr);
    }
  }
  const quant::SmoothQuantResult result =
      quant::apply_smoothquant(model, layout, recorder, 0.5, all);
  // Something was folded: norms, V rows and the decoder's ReLU producer.
  EXPECT_TRUE(result.rewritten.count("encoder.encoders.0.norm_mha.weight"));
  EXPECT_TRUE(result.rewritten.count("encoder.encoders.1.self_attn.linear_v.weight"));
  EXPECT_TRUE(result.rewritten.count("decoder.left_decoder.decoders.0.feed_forward.w_1.bias"));
  EXPECT_TRUE(result.rewritten.count("decoder.left_decoder.decoders.0.feed_forward.w_2.weight"));
  EXPECT_FALSE(result.rewritten.count("encoder.encoders.0.feed_forward.w_2.weight"));  // runtime
  int changed = 0;
  for (auto& [name, slot] : model.named_parameters()) {
    if (name == "encoder.encoders.0.norm_mha.weight") {
      const Tensor original = source.weights->get(name).to(DType::kF32).contiguous();
      for (int64_t j = 0; j < original.numel(); ++j) {
        changed += original.data<float>()[j] != slot->value.data<float>()[j] ? 1 : 0;
      }
    }
  }
  EXPECT_GT(changed, 200);  // of 256 channels

  const Outputs after = run_model(model, feats);
  EXPECT_LT(max_relative_difference(before.encoder, after.encoder), 1e-4);
  EXPECT_LT(max_relative_difference(before.decoder, after.decoder), 1e-4);
  EXPECT_LT(max_relative_difference(before.right_decoder, after.right_decoder), 1e-4);

  // Runtime smoothers: smooth_inv * s == 1 (to rounding), one per quantized
  // consumer of each runtime group, and both src_attn k/v share one s.
  const std::string kv = "decoder.left_decoder.decoders.0.src_attn.linear_";
  ASSERT_TRUE(result.smooth_inv.count(kv + "k") && result.smooth_inv.count(kv + "v"));
  EXPECT_EQ(result.runtime_scale.at(kv + "k"), result.runtime_scale.at(kv + "v"));
  for (const auto& [path, inverse] : result.smooth_inv) {
    const auto& s = result.runtime_scale.at(path);
    for (size_t j = 0; j < s.size(); ++j) EXPECT_NEAR(inverse[j] * s[j], 1.0f, 1e-6f) << path;
  }
  EXPECT_EQ(result.smooth_inv.size(), 2u * 3u + 2u * 2u);  // 2 blocks x (2 w_2 + pw2); 2 x (k, v)
}

class CalibratedRecipe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new TempDir();
    manifest_ = new fs::path(write_manifest(scratch_->path() / "calib"));
  }
  static void TearDownTestSuite() {
    delete manifest_;
    delete scratch_;
  }
  static fs::path quantized(const std::string& recipe, const std::vector<std::string>& extra = {}) {
    std::string tag = recipe;
    for (const std::string& e : extra) tag += "_" + e;
    for (char& ch : tag) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    const fs::path dst = scratch_->path() / tag;
    if (!fs::exists(dst)) {
      std::vector<std::string> args = {
          "quantize", wenet_dir().string(), dst.string(),       "--recipe",
          recipe,     "--calib-manifest",   manifest_->string()};
      args.insert(args.end(), extra.begin(), extra.end());
      const CliResult r = run_oasr(args);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("calibration: 5 utterances"), std::string::npos) << r.out;
    }
    return dst;
  }
  static TempDir* scratch_;
  static fs::path* manifest_;
};
TempDir* CalibratedRecipe::scratch_ = nullptr;
fs::path* CalibratedRecipe::manifest_ = nullptr;

TEST_F(CalibratedRecipe, FusedRecipeWritesStaticW2SmoothersFoldsProvenanceAndReport) {
  const fs::path dir = quantized("smoothquant_w8a8_fused");
  const json config = read_json(dir / "oasr_config.json");
  ASSERT_EQ(config.at("format_version"), 2);
  const json& spec = config.at("quantization");
  const json& producer = spec.at("producer");
  EXPECT_EQ(producer.at("recipe"), "smoothquant_w8a8_fused");
  EXPECT_EQ(producer.at("alpha"), 0.5);
  EXPECT_EQ(producer.at("static_inputs.observer"), "mse");
  EXPECT_EQ(producer.at("calibration").at("utterances"), 5);
  EXPECT_EQ(producer.at("calibration").at("manifest_sha256").get<std::string>().size(), 64u);
  EXPECT_NE(producer.at("calibration").at("selection").get<std::string>().find("5 of 5"),
            std::string::npos);
  EXPECT_EQ(producer.at("algorithms"), json({"smoothquant", "static_inputs", "rtn"}));

  const auto written = io::SafeTensorsFile::open(dir / "model.safetensors");
  const models::ModelSource source = models::load_checkpoint_dir(wenet_dir());
  int static_layers = 0;
  int smoothed_layers = 0;
  for (const auto& [path, layer] : spec.at("layers").items()) {
    SCOPED_TRACE(path);
    const bool w2 = path.find("feed_forward.w_2") != std::string::npos ||
                    path.find("feed_forward_macaron.w_2") != std::string::npos;
    EXPECT_EQ(layer.at("scheme") == "int8_w8a8_static", w2);
    EXPECT_EQ(written.contains(path + ".input_scale"), w2);
    if (w2) {
      const Tensor scale = written.get(path + ".input_scale");
      EXPECT_EQ(scale.numel(), 1);
      EXPECT_GT(scale.data<float>()[0], 0.0f);
      ++static_layers;
    }
    const bool runtime = (w2 && path.rfind("encoder.", 0) == 0) ||
                         path.find("pointwise_conv2") != std::string::npos ||
                         path.find("src_attn.linear_k") != std::string::npos ||
                         path.find("src_attn.linear_v") != std::string::npos;
    EXPECT_EQ(layer.value("smooth_inv", false), runtime);
    EXPECT_EQ(written.contains(path + ".smooth_inv"), runtime);
    smoothed_layers += runtime ? 1 : 0;
  }
  EXPECT_EQ(static_layers, 2 * 2 + 2);  // 2 blocks x 2 FFNs + 2 decoder FFNs
  EXPECT_EQ(smoothed_layers, 2 * 3 + 2 * 2);
  // Folded parameters are written in the source's dtype and differ from it.
  for (const char* name : {"encoder.encoders.0.norm_mha.weight", "encoder.encoders.1.norm_ff.bias",
                           "decoder.right_decoder.decoders.0.norm1.weight",
                           "decoder.left_decoder.decoders.0.feed_forward.w_1.bias"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(written.contains(name));
    EXPECT_EQ(written.info(name).dtype, source.weights->dtype(name));
    EXPECT_FALSE(bit_equal(written.get(name), source.weights->get(name)));
  }
  // Untouched parameters are the source's bits.
  EXPECT_TRUE(bit_equal(written.get("encoder.after_norm.weight"),
                        source.weights->get("encoder.after_norm.weight")));
  EXPECT_TRUE(
      bit_equal(written.get("ctc.ctc_lo.weight"), source.weights->get("ctc.ctc_lo.weight")));

  const json report = read_json(dir / "quantization_report.json");
  EXPECT_EQ(report.at("recipe"), "smoothquant_w8a8_fused");
  EXPECT_EQ(report.at("layers").size(), spec.at("layers").size());
  EXPECT_GE(report.at("smoothquant").at("groups").size(), 2u * 7u + 2u * 7u);
  for (const json& layer : report.at("layers")) {
    EXPECT_TRUE(layer.at("weight_scale").at("max").get<double>() > 0.0) << layer.dump();
    if (layer.at("input").at("type") == "static") {
      const json& input = layer.at("input");
      EXPECT_LE(input.at("clip").get<double>(),
                input.at("calibration_max").get<double>() * 1.000001);
      EXPECT_NEAR(input.at("input_scale").get<double>(), input.at("clip").get<double>() / 127.0,
                  1e-6 * input.at("clip").get<double>());
    }
  }
}

TEST_F(CalibratedRecipe, ServesWithNoFlagAndAnswersToBothOfItsSchemes) {
  const fs::path dir = quantized("smoothquant_w8a8_fused");
  engine::EngineConfig config;
  config.ckpt_dir = dir;
  const engine::ASREngine served(config);
  const auto& info = served.quantization_info();
  EXPECT_EQ(info.source, "checkpoint");
  EXPECT_EQ(info.schemes, (std::vector<std::string>{"int8_w8a8", "int8_w8a8_static"}));
  // The fused recipe's launches (spec "What each recipe fuses"): the norms
  // quantize for w_1 and q/k/v, w_1 quantizes for w_2 at its static scale;
  // linear_out and both pointwise convs quantize their own input.
  EXPECT_EQ(info.standalone_quantize_launches_per_block, (std::vector<int64_t>{3, 3}));
  for (const quant::LayerReport& layer : info.layers) {
    if (layer.path == "encoder.encoders.1.feed_forward.w_2") {
      EXPECT_EQ(layer.input_quantizer, "encoder.encoders.1.feed_forward.w_1 (scaled_mm_quant)");
    }
    if (layer.path == "encoder.encoders.1.conv_module.pointwise_conv2") {
      EXPECT_EQ(layer.input_quantizer, "self (quantize_per_token + smoother)");
    }
  }
  // Alone, as the CLI below decodes it (batch composition is [W1-G]'s
  // batch-invariance work; this checks the served scheme, not batching).
  const auto texts = served.transcribe_files({audio("u01_chirps.wav")});
  ASSERT_EQ(texts.size(), 1u);
  ASSERT_FALSE(texts[0].text.empty());
  for (const char* scheme : {"int8_w8a8", "int8_w8a8_static"}) {
    const CliResult r = run_oasr({"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", dir.string(),
                                  "--quantization", scheme});
    EXPECT_EQ(r.exit_code, 0) << scheme << ": " << r.err;
    EXPECT_NE(r.out.find(texts[0].text), std::string::npos) << r.out;
  }
  EXPECT_TRUE(refused_with(run_oasr({"transcribe", audio("u01_chirps.wav"), "--ckpt-dir",
                                     dir.string(), "--quantization", "fp8_w8a8"}),
                           {"fp8_w8a8"}));
}

TEST_F(CalibratedRecipe, Fp8FusedAndConv2dAndMinmaxVariants) {
  {
    const json spec =
        read_json(quantized("smoothquant_fp8_w8a8_fused") / "oasr_config.json").at("quantization");
    std::set<std::string> schemes;
    for (const auto& [path, layer] : spec.at("layers").items()) schemes.insert(layer.at("scheme"));
    EXPECT_EQ(schemes, (std::set<std::string>{"fp8_w8a8", "fp8_w8a8_static"}));
  }
  {
    const fs::path dir =
        quantized("smoothquant_w8a8_fused", {"--module-types", "linear,pointwise_conv,conv2d"});
    const json spec = read_json(dir / "oasr_config.json").at("quantization");
    ASSERT_TRUE(spec.at("layers").contains("encoder.embed.conv.2"));
    EXPECT_EQ(spec.at("layers").at("encoder.embed.conv.2").at("scheme"), "int8_w8a8_static");
    EXPECT_FALSE(spec.at("layers").contains("encoder.embed.conv.0"));
    bool conv0_skipped = false;
    for (const json& s : spec.at("producer").at("skipped")) {
      if (s.at("layer") == "encoder.embed.conv.0") {
        conv0_skipped = true;
        EXPECT_NE(s.at("reason").get<std::string>().find("in_channels 1"), std::string::npos)
            << s.dump();
      }
    }
    EXPECT_TRUE(conv0_skipped);
    EXPECT_EQ(spec.at("producer").at("static_conv_inputs.observer"), "mse");
    const auto written = io::SafeTensorsFile::open(dir / "model.safetensors");
    EXPECT_EQ(written.info("encoder.embed.conv.2.weight").dtype, DType::kI8);
    EXPECT_EQ(written.info("encoder.embed.conv.2.weight").shape, (Shape{256, 3, 3, 256}));
    engine::EngineConfig config;
    config.ckpt_dir = dir;
    EXPECT_EQ(engine::ASREngine(config).transcribe_files({audio("u01_chirps.wav")}).size(), 1u);
  }
  {
    const fs::path dir =
        quantized("smoothquant_w8a8_fused", {"--option", "static_inputs.observer=minmax"});
    for (const json& layer : read_json(dir / "quantization_report.json").at("layers")) {
      if (layer.at("input").at("type") != "static") continue;
      EXPECT_EQ(layer.at("input").at("observer"), "minmax");
      EXPECT_EQ(layer.at("input").at("clip"), layer.at("input").at("calibration_max"));
    }
  }
}

TEST_F(CalibratedRecipe, RefusesBadFlagsAndBadAudioLeavingNothingBehind) {
  const std::string src = wenet_dir().string();
  const fs::path dst = scratch_->path() / "refused";
  const std::string manifest = manifest_->string();
  auto quantize = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"quantize", src, dst.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_oasr(args);
  };
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8"}),
                           {"smoothquant_w8a8", "--calib-manifest"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "gptq"}), {"unknown --recipe 'gptq'"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "int8_w8a8_rtn", "--calib-manifest", manifest}),
                           {"without calibration", "--calib-manifest"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "int8_w8a8_rtn", "--alpha", "0.5"}),
                           {"--alpha", "int8_w8a8_rtn"}));
  EXPECT_TRUE(refused_with(
      quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", manifest, "--alpha", "1.5"}),
      {"--alpha must be in [0, 1]"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", manifest,
                                     "--calib-utterances", "0"}),
                           {"--calib-utterances must be at least 1"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8_fused", "--calib-manifest",
                                     manifest, "--option", "static_inputs.observer=percentile"}),
                           {"percentile", "mse", "minmax"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", manifest,
                                     "--option", "static_inputs.observer=mse"}),
                           {"static_inputs", "_fused"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8_fused", "--calib-manifest",
                                     manifest, "--option", "bogus=1"}),
                           {"unknown key 'bogus'"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_fp8_w8a8", "--calib-manifest",
                                     manifest, "--module-types", "linear,conv2d"}),
                           {"int8 only"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "int8_w8a8_rtn", "--module-types", "conv2d"}),
                           {"--calib-manifest"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", manifest,
                                     "--calib-dtype", "bfloat16"}),
                           {"bfloat16", "--calib-device cuda"}));
  EXPECT_TRUE(refused_with(quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest",
                                     (scratch_->path() / "missing.jsonl").string()}),
                           {"missing.jsonl"}));
  // Audio at another rate is refused, not resampled -- after loading and
  // calibrating part of the set: nothing may be left behind.
  const fs::path bad_rate =
      write_manifest(scratch_->path() / "bad_rate",
                     {json{{"id", "zz_8k"}, {"audio", audio("u07_rate8k.wav")}}.dump()});
  const CliResult r =
      quantize({"--recipe", "smoothquant_w8a8_fused", "--calib-manifest", bad_rate.string()});
  EXPECT_TRUE(refused_with(r, {"zz_8k", "16000", "not resampled"})) << r.err;
  const fs::path unreadable = write_manifest(scratch_->path() / "unreadable",
                                             {json{{"id", "zz_text"}, {"audio", manifest}}.dump()});
  EXPECT_TRUE(refused_with(
      quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", unreadable.string()}),
      {"zz_text"}));
  // [W3-S] A failure inside the model's pass (here: 50 samples, shorter than
  // one analysis window) names the utterance, its manifest line and its file.
  const fs::path tiny = scratch_->path() / "tiny.wav";
  {
    std::ofstream out(tiny, std::ios::binary);
    const auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    const auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
    out.write("RIFF", 4);
    u32(36 + 100);
    out.write("WAVEfmt ", 8);
    u32(16), u16(1), u16(1), u32(16000), u32(32000), u16(2), u16(16);
    out.write("data", 4);
    u32(100);
    for (int i = 0; i < 50; ++i) u16(100);
  }
  const fs::path short_audio = write_manifest(
      scratch_->path() / "short", {json{{"id", "zz_tiny"}, {"audio", tiny.string()}}.dump()});
  EXPECT_TRUE(refused_with(
      quantize({"--recipe", "smoothquant_w8a8", "--calib-manifest", short_audio.string()}),
      {"calibration utterance 'zz_tiny' (" + short_audio.string() + " line 6): " + tiny.string() +
       ": audio of 50 samples"}));
  EXPECT_FALSE(fs::exists(dst));
  EXPECT_TRUE(siblings_named_like(dst).empty());
}

TEST_F(CalibratedRecipe, AnInterruptedRunLeavesNoCheckpointAndNoWorkingFiles) {
  // 100 utterances take far longer than the 3 s before the interrupt.
  std::vector<std::string> lines;
  for (int copy = 0; copy < 20; ++copy) {
    for (const char* name : {"u01_chirps.wav", "u02_harmonic.wav", "u03_noise_bursts.wav",
                             "u04_mixture.wav", "u05_long.wav"}) {
      lines.push_back(json{{"id", std::to_string(copy) + name}, {"audio", audio(name)}}.dump());
    }
  }
  const fs::path many = write_manifest(scratch_->path() / "many", lines);
  const fs::path dst = scratch_->path() / "interrupted";
  const CommandResult r = run_command(
      "timeout -s INT 3 " + shell_quote(OASR_CLI_BINARY) + " quantize " +
      shell_quote(wenet_dir().string()) + " " + shell_quote(dst.string()) +
      " --recipe smoothquant_w8a8_fused --calib-manifest " + shell_quote(many.string()));
  EXPECT_EQ(r.exit_code, 124) << "not interrupted in time: " << r.output;
  EXPECT_FALSE(fs::exists(dst));
  EXPECT_TRUE(siblings_named_like(dst).empty());
}

TEST(CalibrationSelection, SortsByIdAndStridesEvenly) {
  TempDir dir;
  const fs::path manifest = dir.path() / "m.jsonl";
  {
    std::ofstream out(manifest);
    for (int i = 9; i >= 0; --i) {
      out << json{{"id", "utt" + std::to_string(i)}, {"audio", "a" + std::to_string(i) + ".wav"}}
                 .dump()
          << "\n";
    }
  }
  const auto four = engine::select_calibration_utterances(manifest, "", 4);
  std::vector<std::string> ids;
  for (const auto& e : four.entries) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"utt0", "utt2", "utt5", "utt7"}));  // floor(i*10/4)
  EXPECT_EQ(four.manifest_utterances, 10);
  EXPECT_EQ(engine::select_calibration_utterances(manifest, "", 128).entries.size(), 10u);
  EXPECT_EQ(four.entries[0].audio, dir.path() / "a0.wav");  // relative to the manifest's folder
  EXPECT_EQ(engine::select_calibration_utterances(manifest, "/data", 1).entries[0].audio,
            fs::path("/data/a0.wav"));
}

}  // namespace
}  // namespace oasr::testing
