// `oasr convert SRC DST [--force]` run as a user runs the built binary, on a
// WeNet directory written by the tests (unit/wenet_test_util.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "cli/cli_test_util.h"
#include "models/u2pp/native_checkpoint.h"
#include "unit/wenet_test_util.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using testing::refused_with;
using testing::TempDir;

// `oasr <args>` run once (convert changes the disk, so cli_test_util's
// run_oasr, which runs a command twice, does not fit), stderr kept apart.
testing::CliResult run_oasr(const std::vector<std::string>& args) {
  static int counter = 0;
  const fs::path err_file =
      fs::temp_directory_path() /
      ("oasr-cli-convert-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".err");
  std::string command = testing::shell_quote(OASR_CLI_BINARY);
  for (const std::string& arg : args) command += " " + testing::shell_quote(arg);
  const testing::CommandResult out =
      testing::run_command("( " + command + " 2>" + testing::shell_quote(err_file.string()) + " )");
  std::ifstream in(err_file);
  std::string err((std::istreambuf_iterator<char>(in)), {});
  fs::remove(err_file);
  return {out.exit_code, out.signaled, out.output, err};
}

TEST(CliConvert, WritesANativeDirectoryAndSaysWhatItWrote) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const fs::path dst = tmp.path() / "native";
  const auto result = run_oasr({"convert", wenet.string(), dst.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_EQ(result.out, "wrote " + dst.string() + " (oasr native format v1) from wenet " +
                            (wenet / "final.pt").string() +
                            "\n  tensors: 7\n  vocabulary: 6 units (char)\n"
                            "  cmvn: global (stored as tensors)\n");
  const models::ModelSource native = models::load_checkpoint_dir(dst);
  const models::ModelSource wenet_source = models::load_checkpoint_dir(wenet);
  ASSERT_EQ(native.weights->names(), wenet_source.weights->names());
  for (const std::string& name : native.weights->names()) {
    EXPECT_TRUE(testing::bit_equal(native.weights->get(name), wenet_source.weights->get(name)));
  }
}

// On a terminal the checkpoint write shows a progress bar in MiB (stderr);
// off a terminal (the test above) stderr stays empty. `script` (util-linux)
// gives the command a pseudo-terminal.
TEST(CliConvert, ShowsWriteProgressOnATerminal) {
  if (testing::run_command("command -v script >/dev/null").exit_code != 0) {
    GTEST_SKIP() << "util-linux 'script' is not installed";
  }
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const fs::path dst = tmp.path() / "native";
  const std::string command = testing::shell_quote(OASR_CLI_BINARY) + " convert " +
                              testing::shell_quote(wenet.string()) + " " +
                              testing::shell_quote(dst.string());
  const testing::CommandResult r = testing::run_command(
      "script -qec " + testing::shell_quote(command) + " /dev/null </dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\rwrite model.safetensors ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1/1 100%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MiB/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + dst.string()), std::string::npos) << r.output;
}

TEST(CliConvert, StoresFloatingWeightsInTheRequestedDtype) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const fs::path dst = tmp.path() / "native16";
  const auto result = run_oasr({"convert", wenet.string(), dst.string(), "--dtype", "float16"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("floating weights stored as float16"), std::string::npos) << result.out;
  const models::ModelSource native = models::load_checkpoint_dir(dst);
  const models::ModelSource wenet_source = models::load_checkpoint_dir(wenet);
  ASSERT_EQ(native.weights->names(), wenet_source.weights->names());
  for (const std::string& name : native.weights->names()) {
    const Tensor original = wenet_source.weights->get(name);
    const Tensor stored = native.weights->get(name);
    const bool is_cmvn = name == models::kCmvnMeanName || name == models::kCmvnIstdName;
    if (!dtype_is_floating(original.dtype()) || is_cmvn) {
      EXPECT_TRUE(testing::bit_equal(stored, original)) << name;
      continue;
    }
    ASSERT_EQ(stored.dtype(), DType::kF16) << name;
    // The stored value is the round-to-nearest-even half of the fp32 weight,
    // which torch's .half() also gives: 2^-11 relative is half an fp16 ulp, and
    // 6e-8 covers the fp16 subnormal spacing (2^-24) for tiny weights.
    EXPECT_TRUE(testing::all_close(stored.to(DType::kF32), original, 6e-8f, 1.0f / 2048)) << name;
  }
  EXPECT_TRUE(refused_with(
      run_oasr({"convert", wenet.string(), (tmp.path() / "d8").string(), "--dtype", "int8"}),
      {"--dtype int8", "float32, float16 or bfloat16"}));
  EXPECT_FALSE(fs::exists(tmp.path() / "d8"));
}

TEST(CliConvert, RefusesOnOneLine) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  const fs::path dst = tmp.path() / "native";
  ASSERT_EQ(run_oasr({"convert", wenet.string(), dst.string()}).exit_code, 0);

  EXPECT_TRUE(refused_with(run_oasr({"convert", wenet.string(), dst.string()}),
                           {dst.string(), "exists and is not empty", "--force"}));
  const auto forced = run_oasr({"convert", wenet.string(), dst.string(), "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;

  EXPECT_TRUE(refused_with(run_oasr({"convert", (tmp.path() / "nope").string(), dst.string()}),
                           {"nope", "no such file or directory"}));
  // Configuration errors come out as one line naming the file and the key.
  testing::write_text_file(wenet / "train.yaml", "encoder_conf:\n  num_blocks: [1\n  x: 2\n");
  EXPECT_TRUE(refused_with(run_oasr({"convert", wenet.string(), (tmp.path() / "d2").string()}),
                           {"train.yaml: malformed YAML at line"}));
  testing::write_text_file(wenet / "train.yaml",
                           testing::tiny_train_yaml("  input_layer_extra: 1\n"));
  EXPECT_TRUE(refused_with(run_oasr({"convert", wenet.string(), (tmp.path() / "d3").string()}),
                           {"unknown key encoder_conf.input_layer_extra"}));
  EXPECT_FALSE(fs::exists(tmp.path() / "d2"));
  EXPECT_FALSE(fs::exists(tmp.path() / "d3"));
}

// --from names a layout some architecture registers; a wrong one is refused
// listing them, and an explicit layout that does not match SRC says which
// one it is.
TEST(CliConvert, FromNamesARegisteredLayout) {
  TempDir tmp;
  const fs::path wenet = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(wenet);
  EXPECT_TRUE(refused_with(
      run_oasr({"convert", wenet.string(), (tmp.path() / "d1").string(), "--from", "onnx"}),
      {"--from onnx: expected auto, native (", "wenet (", "ct2 (", "hf ("}));
  const fs::path native = tmp.path() / "native";
  ASSERT_EQ(run_oasr({"convert", "--from", "wenet", wenet.string(), native.string()}).exit_code, 0);
  EXPECT_TRUE(refused_with(
      run_oasr({"convert", "--from", "wenet", native.string(), (tmp.path() / "d2").string()}),
      {"--from wenet:", "is an oasr native directory", "use --from native"}));
  EXPECT_TRUE(refused_with(
      run_oasr({"convert", "--from", "native", wenet.string(), (tmp.path() / "d3").string()}),
      {"--from native:", "has no oasr_config.json"}));
  const auto again =
      run_oasr({"convert", "--from", "native", native.string(), (tmp.path() / "d4").string()});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  for (const char* name : {"d1", "d2", "d3"}) EXPECT_FALSE(fs::exists(tmp.path() / name)) << name;
}

}  // namespace
}  // namespace oasr
