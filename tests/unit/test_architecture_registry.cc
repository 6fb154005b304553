// The architecture registry (models/architecture.h), whose descriptors also
// make the recognizers (asr/recognizer.h): the built-in descriptors,
// detection of each layout on disk, the refusal of a path no architecture
// takes, and an extra architecture registered from this test binary alone
// -- a one-Linear "CTC head" model built from the shared layers, with its
// own recognizer -- found by its oasr_config.json
// name, materialized with online int8_w8a8, reported by
// quant::quantization_info and served end to end by ASREngine, with no edit
// outside this file.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "asr/recognizer.h"
#include "core/error.h"
#include "engine/asr_engine.h"
#include "engine/quantize_recipe.h"
#include "layers/linear.h"
#include "models/architecture.h"
#include "models/load_sequence.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quantize/apply.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
constexpr const char* kExtraName = "registry_test_ctc_linear";
constexpr const char* kExtraLayout = "registry_test_layout";
// The extra architecture's upstream layout: a directory holding this file.
constexpr const char* kExtraLayoutMarker = "ctc_linear_upstream.txt";

// The extra architecture: one Linear 64 -> 16, weights from a fixed seed.
class CtcLinearModel final : public Module {
 public:
  CtcLinearModel() : Module("CtcLinearModel") {
    head_ = register_module("ctc_lo", std::make_shared<layers::Linear>(64, 16));
  }
  Tensor forward(const Tensor& x) const { return head_->forward(x); }

 private:
  std::shared_ptr<layers::Linear> head_;
};

bool names(const fs::path& path, const char* name) {
  std::ifstream in(path / "oasr_config.json");
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  return config.is_object() && config.value("architecture", "") == name;
}

models::MaterializedModel materialize_extra(const fs::path&,
                                            const quant::QuantizationConfig& quantization,
                                            const engine::MaterializeOptions& options) {
  auto model = std::make_unique<CtcLinearModel>();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::vector<float> weight(16 * 64), bias(16);
  for (float& v : weight) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  model->child("ctc_lo")->set_param("weight", Tensor::from_vector(weight, {16, 64}));
  model->child("ctc_lo")->set_param("bias", Tensor::from_vector(bias, {16}));
  quant::QuantLayout layout;
  layout.architecture = "registry test CTC linear";
  quant::SpecOptions spec_options;
  spec_options.online = true;
  models::MaterializedModel out;
  out.spec = quant::spec_from_config(quantization, *model, layout, spec_options);
  quant::quantize_model_online(*model, out.spec);
  model->to(options.dtype);
  model->to(options.device);
  quant::BindOptions bind;
  bind.device = options.device;
  bind.backend = options.scaled_mm_backend;
  quant::bind_quantization(*model, bind);
  out.model = std::move(model);
  return out;
}

// Its recognizer: 64-sample frames -> the head -> greedy CTC (blank 0);
// token t is the letter 'a' + t - 1. Like a positional table, it serves at
// most kMaxFrames frames: a longer utterance fails its whole batch.
constexpr int64_t kMaxFrames = 100;

class CtcLinearRecognizer final : public engine::Recognizer {
 public:
  explicit CtcLinearRecognizer(const engine::EngineConfig& config) {
    models::MaterializedModel built =
        materialize_extra(config.ckpt_dir, config.quantization, config.materialize_options());
    spec_ = std::move(built.spec);
    model_.reset(static_cast<CtcLinearModel*>(built.model.release()));
  }
  int sample_rate() const override { return 8000; }
  engine::DecodeOptions resolve_decode(const engine::DecodeOverrides& o) const override {
    // Keys it does not declare never reach it (ASREngine refuses them).
    EXPECT_EQ(o.items().size(), o.has("decode_method") ? 1u : 0u);
    engine::DecodeOptions d;
    d.set("decode_method", o.find<std::string>("decode_method").value_or("ctc_greedy_search"));
    return d;
  }
  std::vector<engine::Transcript> transcribe(std::span<const engine::Waveform> utterances,
                                             const engine::DecodeOptions&, int64_t) const override {
    ++batches_;
    std::vector<engine::Transcript> out;
    for (const engine::Waveform samples : utterances) {
      const int64_t frames = static_cast<int64_t>(samples.size()) / 64;
      OASR_CHECK(frames > 0, kInvalidArgument, "shorter than one 64-sample frame");
      OASR_CHECK(frames <= kMaxFrames, kInvalidArgument, frames, " frames exceed the table of ",
                 kMaxFrames);
      const Tensor x = Tensor::from_vector(
          std::vector<float>(samples.begin(), samples.begin() + frames * 64), {frames, 64});
      const Tensor logits = model_->forward(x).to(Device::cpu()).to(DType::kF32).contiguous();
      engine::Transcript t;
      int64_t previous = 0;
      for (int64_t f = 0; f < frames; ++f) {
        const float* row = logits.data<float>() + f * 16;
        const int64_t best = std::max_element(row, row + 16) - row;
        if (best != 0 && best != previous) t.tokens.push_back(best);
        previous = best;
      }
      t.text = detokenize(t.tokens);
      out.push_back(std::move(t));
    }
    return out;
  }
  std::string detokenize(std::span<const int64_t> tokens) const override {
    std::string text;
    for (int64_t t : tokens) text += static_cast<char>('a' + t - 1);
    return text;
  }
  Module& module() override { return *model_; }
  const quant::QuantizationSpec& quantization_spec() const override { return spec_; }
  // transcribe() calls so far.
  int64_t batches() const { return batches_; }

 private:
  mutable int64_t batches_ = 0;
  std::unique_ptr<CtcLinearModel> model_;
  quant::QuantizationSpec spec_;
};

void register_extra_once() {
  if (models::find_architecture(kExtraName) != nullptr) return;
  models::Architecture extra;
  extra.name = kExtraName;
  extra.display_name = "CTC linear (test)";
  extra.detect = [](const fs::path& path) { return names(path, kExtraName); };
  extra.looks_for = "an oasr directory naming registry_test_ctc_linear";
  extra.make_recognizer = [](const engine::EngineConfig& config) {
    return std::unique_ptr<engine::Recognizer>(std::make_unique<CtcLinearRecognizer>(config));
  };
  engine::DecodeOptionSpec method;  // its one decode key
  method.key = "decode_method";
  method.help = "CTC greedy search";
  method.choices = {"ctc_greedy_search"};
  extra.decode_options = {method};
  extra.materialize = materialize_extra;
  extra.quantization_layout = [](const Module&) { return quant::QuantLayout{}; };
  models::SourceLayout upstream;
  upstream.from = kExtraLayout;
  upstream.description = "a CTC linear upstream directory (test)";
  upstream.detect = [](const fs::path& path) { return fs::exists(path / kExtraLayoutMarker); };
  upstream.convert = [](const models::ConvertRequest& request) {
    fs::create_directories(request.destination);
    std::ofstream(request.destination / "oasr_config.json")
        << R"({"format_version": 1, "architecture": ")" << kExtraName << R"("})";
    return "wrote " + request.destination.string() + "\n";
  };
  extra.source_layouts = {upstream};
  models::register_architecture(std::move(extra));
}

fs::path write_extra_dir(const fs::path& dir, const char* name) {
  std::ofstream(dir / "oasr_config.json")
      << R"({"format_version": 1, "architecture": ")" << name << R"("})";
  return dir;
}

const fs::path kBundledModel = fs::path(OASR_SOURCE_DIR) / "models" / "oasr-u2pp-char-8k";

TEST(ArchitectureRegistry, BuiltinsAreRegisteredByTheirConfigNames) {
  const models::Architecture* u2pp = models::find_architecture("u2pp_conformer");
  const models::Architecture* whisper = models::find_architecture("whisper");
  ASSERT_NE(u2pp, nullptr);
  ASSERT_NE(whisper, nullptr);
  EXPECT_EQ(u2pp->display_name, "U2++");
  EXPECT_EQ(whisper->display_name, "Whisper");
  EXPECT_TRUE(u2pp->serves_cuda);
  EXPECT_TRUE(whisper->serves_cuda);
  EXPECT_EQ(models::find_architecture("conformer"), nullptr);
  EXPECT_EQ(models::registered_architectures().front(), u2pp);
}

TEST(ArchitectureRegistry, DetectsEachLayoutOnDisk) {
  const models::Architecture& u2pp = *models::find_architecture("u2pp_conformer");
  const models::Architecture& whisper = *models::find_architecture("whisper");
  EXPECT_EQ(&models::architecture_for(kBundledModel), &u2pp);  // native oasr directory
  EXPECT_TRUE(u2pp.detect(kBundledModel));
  EXPECT_FALSE(whisper.detect(kBundledModel));

  const testing::TempDir hf;  // Hugging Face Whisper layout
  std::ofstream(hf.path() / "config.json") << R"({"model_type": "whisper"})";
  EXPECT_EQ(&models::architecture_for(hf.path()), &whisper);
  EXPECT_FALSE(u2pp.detect(hf.path()));

  const testing::TempDir wenet;  // WeNet experiment directory
  std::ofstream(wenet.path() / "train.yaml") << "encoder: conformer\n";
  EXPECT_TRUE(u2pp.detect(wenet.path()));
  EXPECT_EQ(&models::architecture_for(wenet.path()), &u2pp);

  const testing::TempDir broken;  // unparsable configs are nobody's
  std::ofstream(broken.path() / "config.json") << "{not json";
  std::ofstream(broken.path() / "oasr_config.json") << "{not json";
  EXPECT_FALSE(whisper.detect(broken.path()));
  EXPECT_FALSE(u2pp.detect(broken.path()));
  EXPECT_EQ(models::detect_architecture(broken.path()), nullptr);
}

// No architecture is a fallback for another: a path none takes is refused
// naming the path, what is plain about it and what each one looks for.
TEST(ArchitectureRegistry, APathNoArchitectureTakesIsRefusedListingEachOne) {
  const auto refusal = [](const fs::path& path, ErrorCode code) {
    try {
      models::architecture_for(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << path << " was taken by an architecture";
    return std::string();
  };
  const std::string missing = refusal("/nonexistent-ckpt-dir", ErrorCode::kNotFound);
  EXPECT_NE(
      missing.find("/nonexistent-ckpt-dir is no checkpoint oasr reads: no such file or directory"),
      std::string::npos)
      << missing;
  for (const models::Architecture* architecture : models::registered_architectures()) {
    EXPECT_NE(missing.find(architecture->display_name + " (" + architecture->name +
                           "): " + architecture->looks_for),
              std::string::npos)
        << missing;
  }
  EXPECT_NE(missing.find("WeNet experiment directory (train.yaml)"), std::string::npos) << missing;
  EXPECT_NE(missing.find("config.json has model_type whisper"), std::string::npos) << missing;

  const testing::TempDir unknown;
  std::ofstream(unknown.path() / "oasr_config.json")
      << R"({"format_version": 1, "architecture": "conformer_v9"})";
  const std::string named = refusal(unknown.path(), ErrorCode::kUnsupported);
  EXPECT_NE(named.find("names the architecture 'conformer_v9', which is not registered"),
            std::string::npos)
      << named;

  const testing::TempDir unreadable;
  std::ofstream(unreadable.path() / "oasr_config.json") << "{not json";
  EXPECT_NE(refusal(unreadable.path(), ErrorCode::kCorruptFile)
                .find("its oasr_config.json is not a JSON object"),
            std::string::npos);

  // [W3-S] A Whisper directory whose config.json is missing or broken: the
  // refusal says what is wrong with config.json, not "Whisper unsupported".
  const testing::TempDir whisper;
  std::ofstream(whisper.path() / "oasr_config.json")
      << R"({"format_version": 2, "architecture": "whisper"})";
  const std::string no_config = refusal(whisper.path(), ErrorCode::kCorruptFile);
  EXPECT_NE(no_config.find("names 'whisper', but " + (whisper.path() / "config.json").string() +
                           " (the Hugging Face model config) is missing"),
            std::string::npos)
      << no_config;
  std::ofstream(whisper.path() / "config.json") << "{\"model_type\": ";
  const std::string broken = refusal(whisper.path(), ErrorCode::kCorruptFile);
  EXPECT_NE(broken.find("config.json: not valid JSON (parse error at line 1"), std::string::npos)
      << broken;
  EXPECT_EQ(broken.find("[json.exception"), std::string::npos) << broken;
  std::ofstream(whisper.path() / "config.json") << R"({"model_type": "wav2vec2"})";
  EXPECT_NE(refusal(whisper.path(), ErrorCode::kCorruptFile)
                .find("config.json's model_type is \"wav2vec2\", not \"whisper\""),
            std::string::npos);

  // A link loop is named as one, not as a missing file.
  const testing::TempDir links;
  fs::create_symlink(links.path() / "loop", links.path() / "loop");
  const std::string loop = refusal(links.path() / "loop", ErrorCode::kNotFound);
  EXPECT_NE(loop.find("is no checkpoint oasr reads: Too many levels of symbolic links"),
            std::string::npos)
      << loop;

  const testing::TempDir empty;  // a directory, but nothing any reader looks for
  const std::string nothing = refusal(empty.path(), ErrorCode::kNotFound);
  EXPECT_NE(nothing.find("is no checkpoint oasr reads: the registered architectures look for"),
            std::string::npos)
      << nothing;
  try {
    models::source_layout_for(empty.path());
    ADD_FAILURE() << "a layout took an empty directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--from takes native ("), std::string::npos) << e.what();
  }
}

// [W3-S] A config whose block count the checkpoint's tensors do not hold is
// refused before the model is built (an absurd count used to build a module
// per block: 60 s and 3.7 GB for 600000 U2++ blocks before the strict load).
TEST(ArchitectureRegistry, AConfiguredBlockCountIsCheckedAgainstTheTensors) {
  std::map<std::string, Tensor> tensors;
  for (int i = 0; i < 3; ++i) {
    tensors["encoder.encoders." + std::to_string(i) + ".ff.weight"] =
        Tensor::zeros({2}, DType::kF32);
    tensors["encoder.encoders." + std::to_string(i) + ".ff.bias"] = Tensor::zeros({2}, DType::kF32);
  }
  tensors["encoder.encoders_norm.weight"] = Tensor::zeros({2}, DType::kF32);  // not a block
  const MapTensorSource weights(tensors);
  const fs::path config = "/ckpt/oasr_config.json";
  EXPECT_NO_THROW(
      models::check_block_count(weights.names(), "encoder.encoders.", 3, "num_blocks", config));
  const auto refusal = [&](const std::string& prefix, int64_t configured) {
    try {
      models::check_block_count(weights.names(), prefix, configured, "num_blocks", config);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorruptFile);
      return std::string(e.what());
    }
    ADD_FAILURE() << configured << " " << prefix << " blocks were accepted";
    return std::string();
  };
  EXPECT_NE(refusal("encoder.encoders.", 600000)
                .find("/ckpt/oasr_config.json: num_blocks is 600000 but the checkpoint holds 3 "
                      "blocks (encoder.encoders.0 .. encoder.encoders.2)"),
            std::string::npos);
  EXPECT_NE(refusal("encoder.encoders.", 2).find("num_blocks is 2 but the checkpoint holds 3"),
            std::string::npos);
  EXPECT_NE(refusal("decoder.decoders.", 1).find("holds no decoder.decoders.N blocks"),
            std::string::npos);
  EXPECT_NO_THROW(
      models::check_block_count(weights.names(), "decoder.decoders.", 0, "num_blocks", config));
  tensors.erase("encoder.encoders.1.ff.weight");
  tensors.erase("encoder.encoders.1.ff.bias");
  const MapTensorSource gappy(tensors);
  try {
    models::check_block_count(gappy.names(), "encoder.encoders.", 2, "num_blocks", config);
    ADD_FAILURE() << "blocks 0 and 2 were taken for 2 consecutive blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 encoder.encoders.N blocks with gaps (the highest is "
                                         "encoder.encoders.2)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ArchitectureRegistry, RefusesDuplicatesAndIncompleteDescriptors) {
  try {
    models::register_architecture(*models::find_architecture("u2pp_conformer"));
    FAIL() << "a second u2pp_conformer was registered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("already registered"), std::string::npos) << e.what();
  }
  models::Architecture incomplete;
  incomplete.name = "registry_test_incomplete";
  try {
    models::register_architecture(incomplete);
    FAIL() << "a descriptor without functions was registered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a name, detect, looks_for, materialize"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(models::find_architecture("registry_test_incomplete"), nullptr);
}

TEST(ArchitectureRegistry, AnExtraArchitecturePlugsInFromTheTestAlone) {
  register_extra_once();
  const testing::TempDir dir;
  std::ofstream(dir.path() / "oasr_config.json")
      << R"({"format_version": 1, "architecture": ")" << kExtraName << R"("})";
  const models::Architecture& found = models::architecture_for(dir.path());
  ASSERT_EQ(found.name, kExtraName);
  EXPECT_FALSE(models::find_architecture("u2pp_conformer")->detect(dir.path()));

  const quant::QuantizationConfig int8 = quant::QuantizationConfig::parse({.scheme = "int8_w8a8"});
  const models::MaterializedModel online = found.materialize(dir.path(), int8, {});
  const quant::QuantizationInfo info = quant::quantization_info(*online.model, online.spec);
  ASSERT_EQ(info.quantized_layers(), 1) << info.summary();
  EXPECT_EQ(info.layers[0].path, "ctc_lo");
  EXPECT_EQ(info.layers[0].scheme, "int8_w8a8");

  // The quantized head against the full-precision one on the same input:
  // close (per-token int8 of a 64-wide row), not equal.
  const models::MaterializedModel full = found.materialize(dir.path(), {}, {});
  std::vector<float> x(3 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const Tensor input = Tensor::from_vector(x, {3, 64});
  const Tensor y8 = static_cast<const CtcLinearModel&>(*online.model).forward(input);
  const Tensor y32 = static_cast<const CtcLinearModel&>(*full.model).forward(input);
  double max_diff = 0.0, max_abs = 0.0;
  for (int64_t i = 0; i < y32.numel(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(y8.data<float>()[i]) - y32.data<float>()[i]));
    max_abs = std::max(max_abs, std::abs(double(y32.data<float>()[i])));
  }
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 0.05 * max_abs);
}

// oasr convert's layouts come from the registry: --from auto takes the
// first layout that detects the source (U2++'s WeNet reader takes the
// rest), and the extra architecture's own layout converts into a directory
// the registry then finds as that architecture.
TEST(ArchitectureRegistry, ConvertLayoutsComeFromTheRegistry) {
  register_extra_once();
  EXPECT_EQ(models::source_layout_for(kBundledModel).from, "native");
  const testing::TempDir hf;
  std::ofstream(hf.path() / "config.json") << R"({"model_type": "whisper"})";
  EXPECT_EQ(models::source_layout_for(hf.path()).from, "hf");
  const testing::TempDir ct2;  // a model.bin no WeNet or oasr file explains
  std::ofstream(ct2.path() / "model.bin") << "not a header";
  EXPECT_EQ(models::source_layout_for(ct2.path()).from, "ct2");
  const testing::TempDir wenet;
  std::ofstream(wenet.path() / "train.yaml") << "encoder: conformer\n";
  std::ofstream(wenet.path() / "model.bin") << "x";  // train.yaml wins: WeNet
  EXPECT_EQ(models::source_layout_for(wenet.path()).from, "wenet");
  EXPECT_THROW(models::source_layout_for("/nonexistent-ckpt-dir"), Error);

  const testing::TempDir upstream;
  std::ofstream(upstream.path() / kExtraLayoutMarker) << "weights";
  const models::SourceLayout& layout = models::source_layout_for(upstream.path());
  ASSERT_EQ(layout.from, kExtraLayout);
  EXPECT_EQ(models::find_source_layout(kExtraLayout), &layout);
  EXPECT_EQ(models::find_source_layout("onnx"), nullptr);
  EXPECT_NE(models::source_layout_list().find(std::string(kExtraLayout) +
                                              " (a CTC linear upstream directory (test))"),
            std::string::npos)
      << models::source_layout_list();
  models::ConvertRequest request;
  request.source = upstream.path();
  request.destination = upstream.path() / "native";
  EXPECT_EQ(layout.convert(request), "wrote " + request.destination.string() + "\n");
  EXPECT_EQ(models::architecture_for(request.destination).name, kExtraName);

  // A layout name is taken once across architectures.
  models::Architecture clash = *models::find_architecture(kExtraName);
  clash.name = "registry_test_clash";
  clash.source_layouts.front().from = "wenet";
  try {
    models::register_architecture(clash);
    FAIL() << "a second 'wenet' layout was registered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the source layout 'wenet' is already taken"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(models::find_architecture("registry_test_clash"), nullptr);
}

// A scaled-GEMM lane plugs in from the test alone too: the reference lane's
// int8 kernels behind a call counter, registered by name, bound when named,
// named in the report, and the GEMM the layer runs (so its bits are the
// reference lane's).
std::atomic<int> counted_int8_gemms{0};
void counting_scaled_mm_int8(const int8_t* a, const float* a_scale, const int8_t* w,
                             const float* w_scale, const float* bias, Activation act, int64_t m,
                             int64_t n, int64_t k, float* out) {
  ++counted_int8_gemms;
  quant::find_lane("cpu_reference")
      ->scaled_mm_int8(a, a_scale, w, w_scale, bias, act, m, n, k, out);
}

TEST(ArchitectureRegistry, AnExtraGemmLanePlugsInFromTheTestAlone) {
  register_extra_once();
  constexpr const char* kLane = "registry_test_counting_int8";
  if (quant::find_lane(kLane) == nullptr) {
    const quant::ScaledMMLane& reference = *quant::find_lane("cpu_reference");
    quant::ScaledMMLane lane;
    lane.name = kLane;
    lane.device = DeviceType::kCPU;
    lane.auto_eligible = false;  // only when named
    lane.scaled_mm_int8 = counting_scaled_mm_int8;
    lane.quantize_per_token_int8 = reference.quantize_per_token_int8;
    lane.quantize_static_int8 = reference.quantize_static_int8;
    quant::register_lane(lane);
    EXPECT_THROW(quant::register_lane(lane), Error);  // a name is registered once
  }
  const testing::TempDir dir;
  write_extra_dir(dir.path(), kExtraName);
  const models::Architecture& found = models::architecture_for(dir.path());
  const quant::QuantizationConfig int8 = quant::QuantizationConfig::parse({.scheme = "int8_w8a8"});
  engine::MaterializeOptions counted_options;
  counted_options.scaled_mm_backend = kLane;
  engine::MaterializeOptions reference_options;
  reference_options.scaled_mm_backend = "cpu_reference";
  const models::MaterializedModel counted = found.materialize(dir.path(), int8, counted_options);
  const models::MaterializedModel reference =
      found.materialize(dir.path(), int8, reference_options);
  EXPECT_EQ(quant::quantization_info(*counted.model, counted.spec).layers.at(0).lane, kLane);

  std::vector<float> x(5 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.21f * static_cast<float>(i));
  const Tensor input = Tensor::from_vector(x, {5, 64});
  const int before = counted_int8_gemms.load();
  const Tensor y = static_cast<const CtcLinearModel&>(*counted.model).forward(input);
  EXPECT_GT(counted_int8_gemms.load(), before);
  const Tensor y_reference = static_cast<const CtcLinearModel&>(*reference.model).forward(input);
  ASSERT_EQ(y.numel(), y_reference.numel());
  EXPECT_EQ(std::memcmp(y.data<float>(), y_reference.data<float>(), sizeof(float) * y.numel()), 0);

  // The fp8 format is not served by the lane: naming it for fp8 is refused.
  const quant::QuantizationConfig fp8 = quant::QuantizationConfig::parse({.scheme = "fp8_w8a8"});
  EXPECT_THROW(found.materialize(dir.path(), fp8, counted_options), Error);
}

// ASREngine serves the extra architecture through its recognizer alone:
// online int8_w8a8, the report, per-request refusals, and no streaming.
TEST(ArchitectureRegistry, ASREngineServesTheExtraArchitectureThroughItsRecognizer) {
  register_extra_once();
  const testing::TempDir dir;
  engine::EngineConfig config;
  config.ckpt_dir = write_extra_dir(dir.path(), kExtraName);
  config.quantization = quant::QuantizationConfig::parse({.scheme = "int8_w8a8"});
  const engine::ASREngine engine(config);
  EXPECT_EQ(engine.architecture().name, kExtraName);
  EXPECT_EQ(engine.sample_rate(), 8000);
  EXPECT_EQ(engine.decode_options().find<std::string>("decode_method"), "ctc_greedy_search");
  ASSERT_EQ(engine.quantization_info().quantized_layers(), 1);
  EXPECT_EQ(engine.quantization_info().layers[0].path, "ctc_lo");

  // The same utterance through the full-precision engine: the int8 head
  // keeps its argmax on a clear input, so the transcripts agree.
  engine::EngineConfig full_config = config;
  full_config.quantization = {};
  const engine::ASREngine full(full_config);
  std::vector<float> samples(64 * 40);
  for (size_t i = 0; i < samples.size(); ++i)
    samples[i] = std::sin(0.37f * float(i) + float(i / 640));
  const auto quantized = engine.transcribe({samples});
  const auto reference = full.transcribe({samples});
  ASSERT_EQ(quantized.size(), 1u);
  EXPECT_FALSE(reference[0].tokens.empty());
  EXPECT_EQ(quantized[0].text, engine.detokenize(quantized[0].tokens));
  EXPECT_EQ(quantized[0].text, reference[0].text);

  engine::DecodeOverrides beam;
  beam.set("beam_size", int64_t{4});
  EXPECT_THROW(engine.transcribe({samples}, beam), Error);
  // The registry says which architectures take a method, for messages.
  EXPECT_EQ(models::architectures_taking("ctc_greedy_search"),
            "U2++, NeMo FastConformer, CTC linear (test)");
  EXPECT_EQ(models::architectures_taking("beam_search"), "Whisper, Qwen2-Audio");
  EXPECT_EQ(models::architectures_taking("viterbi"), "");
  try {
    engine.start_session();
    FAIL() << "a non-streaming architecture started a session";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("CTC linear (test) does not stream"), std::string::npos)
        << e.what();
  }
}

// A failure inside a batch is the failing utterance's alone: transcribe_each
// names it by its label and keeps every other utterance's transcript.
TEST(ArchitectureRegistry, ABatchFailureIsAttributedToItsUtterance) {
  register_extra_once();
  const testing::TempDir dir;
  engine::EngineConfig config;
  config.ckpt_dir = write_extra_dir(dir.path(), kExtraName);
  const engine::ASREngine engine(config);
  const auto& recognizer = engine.recognizer_as<CtcLinearRecognizer>();
  const auto tone = [](size_t frames, float pitch) {
    std::vector<float> samples(64 * frames);
    for (size_t i = 0; i < samples.size(); ++i)
      samples[i] = std::sin(pitch * float(i) + float(i / 640));
    return samples;
  };
  const std::vector<std::vector<float>> utterances = {tone(40, 0.37f), tone(kMaxFrames + 1, 0.37f),
                                                      tone(30, 0.11f), std::vector<float>(10, 0.1f),
                                                      tone(60, 0.23f)};
  const std::vector<std::string> labels = {"a.wav", "long.wav", "c.wav", "brief.wav", "e.wav"};

  const int64_t before = recognizer.batches();
  const auto results = engine.transcribe_each(utterances, labels);
  const int64_t calls = recognizer.batches() - before;
  ASSERT_EQ(results.size(), utterances.size());
  for (size_t i : {0u, 2u, 4u}) {
    ASSERT_TRUE(results[i].ok()) << labels[i] << ": " << results[i].error->what();
    const auto alone = engine.transcribe({utterances[i]});
    if (i == 0) {
      EXPECT_FALSE(alone[0].tokens.empty());  // the input of the test above
    }
    EXPECT_EQ(results[i].transcript->tokens, alone[0].tokens) << labels[i];
  }
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(std::string(results[1].error->what()), "long.wav: 101 frames exceed the table of 100");
  ASSERT_FALSE(results[3].ok());
  EXPECT_EQ(std::string(results[3].error->what()).rfind("brief.wav: audio of 10 samples", 0), 0u)
      << results[3].error->what();
  // The too-short one never reaches the recognizer; the other four fail as
  // one batch, then split: {a, long} fails -> {a}, {long}; {c, e} decodes.
  EXPECT_EQ(calls, 5);

  // The happy path is one call, and its transcripts equal transcribe()'s.
  const std::vector<std::vector<float>> good = {utterances[0], utterances[2]};
  const int64_t happy = recognizer.batches();
  const auto all = engine.transcribe_each(good, {"a.wav", "c.wav"});
  EXPECT_EQ(recognizer.batches() - happy, 1);
  EXPECT_EQ(all[1].transcript->tokens, engine.transcribe({good[1]})[0].tokens);

  // A bad override still refuses the whole call; so does a label count.
  engine::DecodeOverrides beam;
  beam.set("beam_size", int64_t{4});
  EXPECT_THROW(engine.transcribe_each(good, {"a.wav", "c.wav"}, beam), Error);
  EXPECT_THROW(engine.transcribe_each(good, {"a.wav"}), Error);
}

// A descriptor without a recognizer is refused at registration; oasr
// quantize refuses what it does not serve by the registry's name.
TEST(ArchitectureRegistry, FrontEndsRefuseWhatTheyDoNotServeByName) {
  register_extra_once();
  models::Architecture bare = *models::find_architecture(kExtraName);
  bare.name = "registry_test_no_recognizer";
  bare.make_recognizer = nullptr;
  bare.source_layouts.clear();
  EXPECT_THROW(models::register_architecture(std::move(bare)), Error);
  EXPECT_EQ(models::find_architecture("registry_test_no_recognizer"), nullptr);

  // oasr quantize refuses, by the architecture's display name, one that
  // declares no open_for_quantization (both built-ins declare one).
  const testing::TempDir extra;
  const testing::TempDir out;
  engine::QuantizeRequest request;
  request.source = write_extra_dir(extra.path(), kExtraName);
  request.destination = out.path() / "q";
  request.recipe = "int8_w8a8_rtn";
  request.progress = false;
  try {
    engine::quantize_checkpoint(request);
    FAIL() << "oasr quantize accepted an architecture without open_for_quantization";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    const std::string message = e.what();
    EXPECT_NE(message.find("is a CTC linear (test) model"), std::string::npos) << message;
    EXPECT_NE(message.find("online --quantization"), std::string::npos) << message;
  }
  EXPECT_NE(models::find_architecture("whisper")->open_for_quantization, nullptr);
  EXPECT_NE(models::find_architecture("u2pp_conformer")->open_for_quantization, nullptr);
  EXPECT_FALSE(fs::exists(out.path() / "q"));
}

}  // namespace
}  // namespace oasr
