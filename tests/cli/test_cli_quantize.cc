// `oasr quantize` as a user runs it, on the random-weight WeNet U2++
// directory the u2pp_engine oracle generator writes:
//   * the written checkpoint is native format_version 2 and its 8-bit
//     weight / weight_scale tensors are bit-identical to an independent
//     PyTorch re-computation of the spec's weight rule
//     (tests/oracle/gen_quantize_rtn.py); every other tensor is the source's,
//     bit for bit;
//   * `oasr transcribe` serves it with no flag, exactly as online
//     quantization of the source serves it, and refuses another scheme;
//   * every refusal of the command fires with its message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <set>

#include "cli/cli_test_util.h"
#include "io/safetensors.h"

namespace oasr::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path source_dir() {
  return oracle_dir().parent_path() / "u2pp_engine" / "model";
}
std::string audio(const char* name) {
  return (source_dir() / "audio" / name).string();
}

json read_config(const fs::path& dir) {
  std::ifstream in(dir / "oasr_config.json");
  return json::parse(in);
}

// Layers the spec's "What is quantized" table quantizes in the U2++: every
// GEMM of the encoder blocks (all but linear_pos) and of the decoder layers;
// not the subsampling front-end, the CTC head or the decoder's output layer.
bool should_be_quantized(const std::string& path) {
  const bool encoder_block = path.rfind("encoder.encoders.", 0) == 0;
  const bool decoder_layer = path.find("_decoder.decoders.") != std::string::npos;
  return (encoder_block || decoder_layer) && path.find("linear_pos") == std::string::npos;
}

class CliQuantize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new TempDir();
    oracle_ =
        new io::SafeTensorsFile(io::SafeTensorsFile::open(oracle_dir() / "cases.safetensors"));
  }
  static void TearDownTestSuite() {
    delete oracle_;
    delete scratch_;
  }
  // Quantizes the source once per recipe for the whole suite.
  static fs::path quantized(const std::string& recipe) {
    const fs::path dst = scratch_->path() / recipe;
    if (!fs::exists(dst)) {
      const CliResult r =
          run_oasr({"quantize", source_dir().string(), dst.string(), "--recipe", recipe});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.err, "");
      EXPECT_NE(r.out.find("(oasr native format v2"), std::string::npos) << r.out;
    }
    return dst;
  }
  void check_bit_identical_to_oracle(const std::string& recipe, const char* suffix, DType dtype);

  static TempDir* scratch_;
  static io::SafeTensorsFile* oracle_;
};
TempDir* CliQuantize::scratch_ = nullptr;
io::SafeTensorsFile* CliQuantize::oracle_ = nullptr;

// The oracle's bytes, relabelled with the dtype the checkpoint must use
// (the oracle writes e4m3 bits as uint8: torch 1.13 has no float8).
Tensor with_dtype(const Tensor& bytes, DType dtype) {
  if (bytes.dtype() == dtype) return bytes;
  Tensor out = Tensor::empty(bytes.shape(), dtype);
  std::memcpy(out.raw_data(), bytes.contiguous().raw_data(), out.nbytes());
  return out;
}

void CliQuantize::check_bit_identical_to_oracle(const std::string& recipe, const char* suffix,
                                                DType dtype) {
  const fs::path dir = quantized(recipe);
  const json config = read_config(dir);
  ASSERT_EQ(config.at("format_version"), 2);
  const json& spec = config.at("quantization");
  EXPECT_EQ(spec.at("producer").at("recipe"), recipe);
  const auto written = io::SafeTensorsFile::open(dir / "model.safetensors");

  std::set<std::string> quantized_layers;
  for (const auto& [path, layer] : spec.at("layers").items()) quantized_layers.insert(path);
  std::set<std::string> gemm_layers;  // every GEMM weight of the source
  for (const std::string& name : oracle_->names()) {
    const std::string tail = std::string("/") + suffix + "_scale";
    if (name.size() > tail.size() &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      gemm_layers.insert(name.substr(0, name.size() - tail.size() - std::string(".weight").size()));
    }
  }
  ASSERT_GT(gemm_layers.size(), 20u);
  for (const std::string& path : gemm_layers) {
    EXPECT_EQ(quantized_layers.count(path) > 0, should_be_quantized(path)) << path;
  }
  int compared = 0;
  for (const std::string& path : quantized_layers) {
    SCOPED_TRACE(path);
    const std::string weight = path + ".weight";
    ASSERT_TRUE(written.contains(weight));
    EXPECT_EQ(written.info(weight).dtype, dtype);
    EXPECT_TRUE(
        bit_equal(written.get(weight), with_dtype(oracle_->get(weight + "/" + suffix), dtype)));
    EXPECT_TRUE(bit_equal(written.get(path + ".weight_scale"),
                          oracle_->get(weight + "/" + suffix + "_scale")));
    EXPECT_FALSE(written.contains(path + ".input_scale"));  // per-token inputs
    EXPECT_FALSE(written.contains(path + ".smooth_inv"));   // no smoothing
    ++compared;
  }
  EXPECT_GE(compared, 40);  // tiny U2++: 2 encoder blocks x 10, 2 decoder layers x 10
  // Everything else -- biases of quantized layers included -- is the source's.
  for (const std::string& name : written.names()) {
    const size_t dot = name.rfind('.');
    const std::string leaf = name.substr(dot + 1);
    if (quantized_layers.count(name.substr(0, dot)) && leaf != "bias") continue;
    ASSERT_TRUE(oracle_->contains("source/" + name)) << name;
    EXPECT_TRUE(bit_equal(written.get(name), oracle_->get("source/" + name))) << name;
  }
}

TEST_F(CliQuantize, Int8RtnWeightsAreBitIdenticalToThePyTorchRecomputation) {
  check_bit_identical_to_oracle("int8_w8a8_rtn", "int8", DType::kI8);
}

TEST_F(CliQuantize, Fp8RtnWeightsAreBitIdenticalToThePyTorchRecomputation) {
  check_bit_identical_to_oracle("fp8_w8a8_rtn", "fp8", DType::kF8E4M3);
}

TEST_F(CliQuantize, SpecCarriesProvenanceWithSkippedLayersAndReasons) {
  const json spec = read_config(quantized("int8_w8a8_rtn")).at("quantization");
  const json& producer = spec.at("producer");
  EXPECT_EQ(producer.at("tool"), "oasr quantize");
  EXPECT_EQ(producer.at("selection").at("scheme"), "int8_w8a8");
  ASSERT_TRUE(producer.at("skipped").is_array());
  std::set<std::string> skipped;
  for (const json& item : producer.at("skipped")) {
    EXPECT_FALSE(item.at("reason").get<std::string>().empty()) << item.dump();
    skipped.insert(item.at("layer").get<std::string>());
  }
  EXPECT_TRUE(skipped.count("ctc.ctc_lo")) << producer.dump();
  EXPECT_TRUE(skipped.count("encoder.encoders.0.self_attn.linear_pos")) << producer.dump();
  for (const auto& [path, layer] : spec.at("layers").items()) {
    EXPECT_EQ(layer.at("scheme"), "int8_w8a8") << path;
  }
  EXPECT_EQ(spec.at("schemes").at("int8_w8a8").at("input").at("granularity"), "per_token");
}

// Served with no flag: the checkpoint's spec is authoritative, and it serves
// exactly what online int8 quantization of the source serves (the same
// weights, the same kernels), score for score.
TEST_F(CliQuantize, TranscribeServesTheCheckpointWithNoFlagAsOnlineInt8Does) {
  const fs::path dir = quantized("int8_w8a8_rtn");
  auto transcribe = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"transcribe", audio("u01_chirps.wav"),
                                     audio("u02_harmonic.wav"), "--output-format", "json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_oasr(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return split_lines(r.out);
  };
  const auto served = transcribe({"--ckpt-dir", dir.string()});
  const auto online =
      transcribe({"--ckpt-dir", source_dir().string(), "--quantization", "int8_w8a8"});
  ASSERT_EQ(served.size(), 2u);
  EXPECT_EQ(served, online);
  // Naming the scheme it was written with is a no-op.
  EXPECT_EQ(transcribe({"--ckpt-dir", dir.string(), "--quantization", "int8_w8a8"}), served);
}

TEST_F(CliQuantize, TranscribeRefusesAnotherSchemeForTheCheckpoint) {
  const fs::path dir = quantized("int8_w8a8_rtn");
  const CliResult r = run_oasr({"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", dir.string(),
                                "--quantization", "fp8_w8a8"});
  EXPECT_TRUE(refused_with(r, {"int8_w8a8", "fp8_w8a8"}));
}

TEST_F(CliQuantize, RefusesCalibratedRecipesWithoutAudioUnknownRecipesAndConvolutions) {
  const std::string src = source_dir().string();
  const fs::path dst = scratch_->path() / "refused";
  EXPECT_TRUE(
      refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "smoothquant_w8a8"}),
                   {"smoothquant_w8a8", "needs calibration audio", "--calib-manifest"}));
  EXPECT_TRUE(refused_with(
      run_oasr({"quantize", src, dst.string(), "--recipe", "smoothquant_fp8_w8a8_fused"}),
      {"smoothquant_fp8_w8a8_fused", "--calib-manifest"}));
  EXPECT_TRUE(refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "gptq"}),
                           {"unknown --recipe 'gptq'", "fp8_w8a8_rtn"}));
  EXPECT_TRUE(refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "int8_w8a8_rtn",
                                     "--module-types", "linear,conv2d"}),
                           {"convolution kind in --module-types", "--calib-manifest"}));
  EXPECT_TRUE(refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "fp8_w8a8_rtn",
                                     "--module-types", "linear,conv2d"}),
                           {"int8 only"}));
  EXPECT_TRUE(refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "int8_w8a8_rtn",
                                     "--module-types", "dense"}),
                           {"dense"}));
  EXPECT_FALSE(fs::exists(dst));
}

TEST_F(CliQuantize, RefusesAnExistingDestinationWithoutForceAndReplacesItWithForce) {
  const fs::path dst = scratch_->path() / "existing";
  fs::create_directories(dst);
  std::ofstream(dst / "keep.txt") << "mine";
  const std::string src = source_dir().string();
  EXPECT_TRUE(refused_with(run_oasr({"quantize", src, dst.string(), "--recipe", "int8_w8a8_rtn"}),
                           {dst.string(), "exists", "--force"}));
  EXPECT_TRUE(fs::exists(dst / "keep.txt"));
  // --force replaces only an oasr checkpoint directory.
  EXPECT_TRUE(refused_with(
      run_oasr({"quantize", src, dst.string(), "--recipe", "int8_w8a8_rtn", "--force"}),
      {"not an oasr checkpoint directory"}));
  EXPECT_TRUE(fs::exists(dst / "keep.txt"));
  // An existing quantized checkpoint is replaced with --force, ignoring what
  // --ignore now excludes; nothing is left behind in the parent.
  const fs::path replaced = scratch_->path() / "replaced";
  fs::copy(quantized("int8_w8a8_rtn"), replaced, fs::copy_options::recursive);
  const CliResult r = run_oasr({"quantize", src, replaced.string(), "--recipe", "int8_w8a8_rtn",
                                "--ignore", "decoder.*", "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json spec = read_config(replaced).at("quantization");
  for (const auto& [path, layer] : spec.at("layers").items()) {
    EXPECT_NE(path.rfind("decoder.", 0), 0u) << path;
  }
  bool ignored_reason = false;
  for (const json& item : spec.at("producer").at("skipped")) {
    ignored_reason |= item.at("reason").get<std::string>().find("decoder.*") != std::string::npos;
  }
  EXPECT_TRUE(ignored_reason);
  for (const auto& entry : fs::directory_iterator(scratch_->path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    EXPECT_EQ(name.find(".old-"), std::string::npos) << name;
  }
}

TEST_F(CliQuantize, RefusesAnAlreadyQuantizedSourceAndFullPrecisionExportStaysVersion1) {
  const fs::path dir = quantized("int8_w8a8_rtn");
  EXPECT_TRUE(
      refused_with(run_oasr({"quantize", dir.string(), (scratch_->path() / "twice").string(),
                             "--recipe", "int8_w8a8_rtn"}),
                   {"already quantized"}));
  const fs::path converted = scratch_->path() / "fp_native";
  const CliResult r = run_oasr({"convert", source_dir().string(), converted.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json config = read_config(converted);
  EXPECT_EQ(config.at("format_version"), 1);
  EXPECT_FALSE(config.contains("quantization"));
}

}  // namespace
}  // namespace oasr::testing
