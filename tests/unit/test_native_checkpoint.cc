// The native checkpoint v1 (models/u2pp/native_checkpoint.h): WeNet directory ->
// native directory -> the same model, bit for bit; the atomic writer's
// overwrite rules; the reader's refusals; the one entry point's dispatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.h"
#include "models/u2pp/native_checkpoint.h"
#include "models/u2pp/wenet_dir.h"
#include "support/test_support.h"
#include "unit/wenet_test_util.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

::testing::AssertionResult throws(const std::function<void()>& action, ErrorCode code,
                                  const std::vector<std::string>& needles) {
  try {
    action();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure()
             << "code " << error_code_name(e.code()) << ": " << e.what();
    }
    for (const std::string& needle : needles) {
      if (std::string(e.what()).find(needle) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << needle << "\": " << e.what();
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error";
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const fs::path& path, const nlohmann::json& document) {
  std::ofstream(path) << document.dump(2);
}

// Two sources hold the same model: config, units, CMVN and every tensor.
void expect_same_model(const models::ModelSource& a, const models::ModelSource& b) {
  nlohmann::ordered_json ja = models::native_config_json(a);
  nlohmann::ordered_json jb = models::native_config_json(b);
  ja.erase("source");
  jb.erase("source");
  EXPECT_EQ(ja.dump(), jb.dump());
  EXPECT_EQ(a.units, b.units);
  ASSERT_EQ(a.cmvn.defined(), b.cmvn.defined());
  if (a.cmvn.defined()) {
    EXPECT_TRUE(testing::bit_equal(a.cmvn.mean, b.cmvn.mean));
    EXPECT_TRUE(testing::bit_equal(a.cmvn.istd, b.cmvn.istd));
  }
  ASSERT_EQ(a.weights->names(), b.weights->names());
  for (const std::string& name : a.weights->names()) {
    EXPECT_TRUE(testing::bit_equal(a.weights->get(name), b.weights->get(name))) << name;
  }
}

TEST(NativeCheckpoint, AWenetDirectoryConvertsAndReloadsBitForBit) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const models::ModelSource original = models::load_checkpoint_dir(wenet);
  EXPECT_EQ(original.format, models::CheckpointFormat::kWenet);
  const fs::path native = tmp.path() / "out" / "model";  // parents are created
  models::save_native_checkpoint(original, native);
  EXPECT_EQ(entries(native),
            (std::vector<std::string>{"model.safetensors", "oasr_config.json", "units.txt"}));
  EXPECT_EQ(entries(tmp.path() / "out"), std::vector<std::string>{"model"});  // no staging left
  EXPECT_TRUE(models::looks_like_native_dir(native));

  const models::ModelSource reloaded = models::load_checkpoint_dir(native);
  EXPECT_EQ(reloaded.format, models::CheckpointFormat::kNative);
  EXPECT_EQ(reloaded.weights_path, native / "model.safetensors");
  EXPECT_EQ(reloaded.format_version, 1);
  expect_same_model(original, reloaded);
  EXPECT_EQ(reloaded.config.model.sos_id(), 5);
  EXPECT_EQ(reloaded.config.model.encoder.cnn_module_norm, models::U2ppConvNorm::kLayerNorm);
  EXPECT_TRUE(reloaded.config.model.encoder.global_cmvn);
  EXPECT_DOUBLE_EQ(reloaded.config.reverse_weight, 0.5);

  const nlohmann::json config = read_json(native / "oasr_config.json");
  EXPECT_EQ(config["format_version"], 1);
  EXPECT_EQ(config["architecture"], "u2pp_conformer");
  EXPECT_EQ(config["features"]["cmvn"], "tensors");
  EXPECT_EQ(config["model"]["encoder"]["norm_eps"].dump(), "1e-05");
  EXPECT_EQ(config["tokenizer"]["units"], "units.txt");
  EXPECT_EQ(config["source"]["format"], "wenet");
  EXPECT_EQ(config["source"]["checkpoint"], "final.pt");
  EXPECT_EQ(config["decode"]["method"], "attention_rescoring");

  // Native -> native is a faithful copy too.
  models::save_native_checkpoint(reloaded, tmp.path() / "copy");
  expect_same_model(reloaded, models::load_checkpoint_dir(tmp.path() / "copy"));
}

TEST(NativeCheckpoint, CarriesABpeModelAndAModelWithoutCmvn) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  std::string yaml = testing::tiny_train_yaml();
  yaml.replace(yaml.find("tokenizer: char"), 15, "tokenizer: bpe");
  yaml.replace(yaml.find("cmvn: global_cmvn"), 17, "cmvn: null");
  testing::write_tiny_wenet_dir(wenet, yaml);
  testing::write_text_file(wenet / "bpe_500.model", std::string("spm\0bytes", 9));
  const models::ModelSource original = models::load_checkpoint_dir(wenet / "final.pt");
  EXPECT_FALSE(original.cmvn.defined());
  EXPECT_FALSE(original.config.model.encoder.global_cmvn);
  models::save_native_checkpoint(original, tmp.path() / "n");
  const models::ModelSource reloaded = models::load_checkpoint_dir(tmp.path() / "n");
  expect_same_model(original, reloaded);
  EXPECT_EQ(reloaded.config.tokenizer.type, models::TokenizerType::kBpe);
  EXPECT_EQ(reloaded.bpe_model, tmp.path() / "n" / "bpe.model");
  std::ifstream in(reloaded.bpe_model, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string("spm\0bytes", 9));
  EXPECT_EQ(read_json(tmp.path() / "n" / "oasr_config.json")["features"]["cmvn"], "none");
}

TEST(NativeCheckpoint, ReplacesOnlyWithForceAndOnlyAnOasrDirectory) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const models::ModelSource source = models::load_checkpoint_dir(wenet);
  const fs::path dst = tmp.path() / "dst";

  fs::create_directories(dst);  // an empty directory is simply filled
  models::save_native_checkpoint(source, dst);
  testing::write_text_file(dst / "stale.txt", "old");
  EXPECT_TRUE(throws([&] { models::save_native_checkpoint(source, dst); },
                     ErrorCode::kInvalidArgument, {"dst", "exists and is not empty", "--force"}));
  models::save_native_checkpoint(source, dst.string() + "/", {.force = true});
  EXPECT_FALSE(fs::exists(dst / "stale.txt"));  // the old directory is gone, not merged
  expect_same_model(source, models::load_checkpoint_dir(dst));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"dst", "exp"}));

  const fs::path precious = tmp.path() / "home";
  testing::write_text_file(precious / "notes.txt", "keep me");
  EXPECT_TRUE(throws([&] { models::save_native_checkpoint(source, precious, {.force = true}); },
                     ErrorCode::kInvalidArgument,
                     {"not an oasr checkpoint directory", "even with --force"}));
  EXPECT_TRUE(fs::exists(precious / "notes.txt"));
  testing::write_text_file(tmp.path() / "file", "x");
  EXPECT_TRUE(
      throws([&] { models::save_native_checkpoint(source, tmp.path() / "file", {.force = true}); },
             ErrorCode::kInvalidArgument, {"not a directory"}));

  const models::ModelSource native = models::load_checkpoint_dir(dst);
  EXPECT_TRUE(throws([&] { models::save_native_checkpoint(native, dst, {.force = true}); },
                     ErrorCode::kInvalidArgument, {"is the source directory"}));
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"dst", "exp", "file", "home"}));
}

TEST(NativeCheckpoint, AFailedWriteLeavesNothingBehind) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  std::string yaml = testing::tiny_train_yaml();
  yaml.replace(yaml.find("tokenizer: char"), 15, "tokenizer: bpe");
  testing::write_tiny_wenet_dir(wenet, yaml);
  testing::write_text_file(wenet / "x.model", "spm");
  models::ModelSource source = models::load_checkpoint_dir(wenet);
  source.bpe_model = tmp.path() / "vanished.model";  // fails after the weights are written
  EXPECT_TRUE(throws([&] { models::save_native_checkpoint(source, tmp.path() / "dst"); },
                     ErrorCode::kIo, {"vanished.model"}));
  EXPECT_EQ(entries(tmp.path()), std::vector<std::string>{"exp"});
}

TEST(NativeCheckpoint, RefusesConfigsItCannotServe) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const fs::path dir = tmp.path() / "n";
  models::save_native_checkpoint(models::load_checkpoint_dir(wenet), dir);
  const nlohmann::json good = read_json(dir / "oasr_config.json");
  const std::vector<std::tuple<std::function<void(nlohmann::json&)>, ErrorCode, std::string>>
      cases = {
          {[](nlohmann::json& j) { j["format_version"] = 2; }, ErrorCode::kUnsupported,
           "format_version 2 (a quantized"},
          {[](nlohmann::json& j) { j["format_version"] = 7; }, ErrorCode::kUnsupported,
           "format_version 7 is unknown"},
          {[](nlohmann::json& j) { j["architecture"] = "whisper"; }, ErrorCode::kUnsupported,
           "architecture 'whisper'"},
          {[](nlohmann::json& j) { j["model"]["encoder"]["input_layer"] = "linear"; },
           ErrorCode::kUnsupported, "input_layer 'linear'"},
          {[](nlohmann::json& j) { j["model"]["encoder"]["rope"] = true; }, ErrorCode::kUnsupported,
           "unknown key \"model.encoder.rope\""},
          {[](nlohmann::json& j) { j["model"].erase("vocab_size"); }, ErrorCode::kCorruptFile,
           "\"model.vocab_size\" is missing"},
          {[](nlohmann::json& j) { j["model"]["encoder"]["num_blocks"] = "one"; },
           ErrorCode::kCorruptFile, "\"model.encoder.num_blocks\" must be an integer"},
          {[](nlohmann::json& j) { j["tokenizer"]["units"] = "../units.txt"; },
           ErrorCode::kCorruptFile, "must be a file name inside the checkpoint directory"},
          {[](nlohmann::json& j) { j["features"]["cmvn"] = "none"; }, ErrorCode::kCorruptFile,
           "features.cmvn is \"none\" but the weights hold CMVN tensors"},
          {[](nlohmann::json& j) { j["model"]["vocab_size"] = 7; }, ErrorCode::kCorruptFile,
           "holds 6 units but the config's vocabulary has 7"},
          {[](nlohmann::json& j) { j["decode"]["beam"] = 3; }, ErrorCode::kUnsupported,
           "unknown key \"decode.beam\""},
      };
  for (const auto& [edit, code, needle] : cases) {
    nlohmann::json broken = good;
    edit(broken);
    write_json(dir / "oasr_config.json", broken);
    EXPECT_TRUE(throws([&] { models::load_checkpoint_dir(dir); }, code, {needle})) << needle;
  }
  testing::write_text_file(dir / "oasr_config.json", "{\"format_version\": ");
  EXPECT_TRUE(throws([&] { models::load_checkpoint_dir(dir); }, ErrorCode::kCorruptFile,
                     {"oasr_config.json: not valid JSON"}));
}

TEST(NativeCheckpoint, TheEntryPointNamesWhatItExpected) {
  TempDir tmp;
  EXPECT_TRUE(throws([&] { models::load_checkpoint_dir(tmp.path()); }, ErrorCode::kNotFound,
                     {"not a checkpoint directory", "oasr_config.json", "train.yaml"}));
  EXPECT_TRUE(throws([&] { models::load_checkpoint_dir(tmp.path() / "nothing"); },
                     ErrorCode::kNotFound, {"no such file or directory"}));
  testing::write_text_file(tmp.path() / "weights.bin", "x");
  EXPECT_TRUE(throws([&] { models::load_checkpoint_dir(tmp.path() / "weights.bin"); },
                     ErrorCode::kInvalidArgument,
                     {"expected a checkpoint directory or a WeNet .pt"}));
}

}  // namespace
}  // namespace oasr
