// The quantization flags as a user types them: `oasr transcribe
// --quantization SCHEME [--quantization-option key=value ...]`, the startup
// log line, `oasr info` on a full-precision directory with --quantization
// and on a quantized (format_version 2) one, and the one-line refusals.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli/cli_test_util.h"
#include "engine/asr_engine.h"
#include "quant/quant_test_util.h"

namespace oasr::testing {
namespace {

namespace fs = std::filesystem;

fs::path wenet_dir() {
  return oracle_dir() / "model";
}
std::string audio(const char* name) {
  return (wenet_dir() / "audio" / name).string();
}

std::vector<std::string> transcribe_args(const fs::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "transcribe", audio("u01_chirps.wav"), audio("u06_short.wav"),  "--ckpt-dir",
      dir.string(), "--decode-method",       "ctc_prefix_beam_search"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> engine_texts(const fs::path& dir, const std::string& scheme) {
  engine::EngineConfig config;
  config.ckpt_dir = dir;
  config.decode.set("decode_method", "ctc_prefix_beam_search");
  config.quantization = quant::QuantizationConfig::from_options(scheme, {});
  const engine::ASREngine engine(config);
  std::vector<std::string> out;
  for (const auto& t : engine.transcribe_files({audio("u01_chirps.wav"), audio("u06_short.wav")})) {
    out.push_back(t.text);
  }
  return out;
}

std::vector<std::string> cli_texts(const CliResult& r) {
  std::vector<std::string> out;
  for (const std::string& line : split_lines(r.out))
    out.push_back(line.substr(line.find('\t') + 1));
  return out;
}

TEST(QuantCli, TranscribeQuantizesOnlineAndLogsWhatItServes) {
  ASSERT_EQ(setenv("OASR_LOG_LEVEL", "info", 1), 0);
  const CliResult r = run_oasr(transcribe_args(wenet_dir(), {"--quantization", "int8_w8a8"}));
  ASSERT_EQ(unsetenv("OASR_LOG_LEVEL"), 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(cli_texts(r), engine_texts(wenet_dir(), "int8_w8a8"));
  EXPECT_NE(r.err.find("quantization: int8_w8a8 (online): 40 quantized layers"), std::string::npos)
      << r.err;
  // The same layers with the fp8 scheme, and an ignore glob takes some away.
  const CliResult fp8 = run_oasr(transcribe_args(
      wenet_dir(), {"--quantization", "fp8_w8a8", "--quantization-option", "ignore=decoder.*",
                    "--quantization-option", "module_types=linear,pointwise_conv"}));
  ASSERT_EQ(fp8.exit_code, 0) << fp8.err;
  EXPECT_EQ(split_lines(fp8.out).size(), 2u);
}

TEST(QuantCli, RefusalsAreOneLineNamingTheProblem) {
  const fs::path dir = wenet_dir();
  EXPECT_TRUE(refused_with(run_oasr(transcribe_args(dir, {"--quantization", "nvfp4"})),
                           {"nvfp4", "no method serves it"}));
  EXPECT_TRUE(refused_with(run_oasr(transcribe_args(dir, {"--quantization", "int8_w4a4"})),
                           {"unknown quantization scheme 'int8_w4a4'", "int8_w8a8"}));
  EXPECT_TRUE(refused_with(
      run_oasr(transcribe_args(
          dir, {"--quantization", "int8_w8a8", "--quantization-option", "module_types=conv2d"})),
      {"conv2d", "oasr quantize"}));
  EXPECT_TRUE(refused_with(
      run_oasr(transcribe_args(dir, {"--quantization", "fp8_w8a8", "--quantization-option",
                                     "module_types=linear,conv2d"})),
      {"int8 only"}));
  EXPECT_TRUE(
      refused_with(run_oasr(transcribe_args(dir, {"--quantization-option", "ignore=encoder.*"})),
                   {"'ignore' was given without a scheme"}));
  EXPECT_TRUE(refused_with(run_oasr(transcribe_args(dir, {"--quantization", "int8_w8a8",
                                                          "--quantization-option", "alpha=0.5"})),
                           {"unknown key 'alpha'"}));
  EXPECT_TRUE(refused_with(
      run_oasr(transcribe_args(
          dir, {"--quantization", "int8_w8a8", "--quantization-option", "kv_cache=fp8_e4m3"})),
      {"no autoregressive decoder KV cache"}));
}

TEST(QuantCli, InfoReportsLayersLanesAndSkips) {
  const TempDir tmp;
  const fs::path native = tmp.path() / "fp";
  ASSERT_EQ(run_oasr({"convert", wenet_dir().string(), native.string()}).exit_code, 0);
  const CliResult fp = run_oasr({"info", native.string(), "--summary"});
  ASSERT_EQ(fp.exit_code, 0) << fp.err;
  EXPECT_EQ(fp.out.find("quantization:"), std::string::npos);
  const CliResult asked =
      run_oasr({"info", native.string(), "--summary", "--quantization", "int8_w8a8"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_NE(asked.out.find("quantization: int8_w8a8 (online): 40 quantized layers"),
            std::string::npos)
      << asked.out;
  EXPECT_NE(
      asked.out.find("encoder.encoders.0.feed_forward.w_1  LinearActivation  int8_w8a8  lane "),
      std::string::npos);
  EXPECT_NE(asked.out.find("input: self (quantize_per_token)"), std::string::npos);
  EXPECT_NE(asked.out.find("skipped ctc.ctc_lo: kept full precision"), std::string::npos);

  // A quantized checkpoint reports itself with no flag, and serves with none.
  engine::EngineConfig config;
  config.ckpt_dir = wenet_dir();
  config.quantization = quant::QuantizationConfig::from_options("int8_w8a8", {});
  const fs::path v2 =
      write_quantized_checkpoint(engine::ASREngine(config), wenet_dir(), tmp.path() / "int8");
  const CliResult info = run_oasr({"info", v2.string(), "--summary"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("quantization: int8_w8a8 (checkpoint): 40 quantized layers"),
            std::string::npos)
      << info.out;
  const CliResult served = run_oasr(transcribe_args(v2, {}));
  ASSERT_EQ(served.exit_code, 0) << served.err;
  EXPECT_EQ(cli_texts(served), engine_texts(wenet_dir(), "int8_w8a8"));
  EXPECT_TRUE(refused_with(run_oasr(transcribe_args(v2, {"--quantization", "fp8_w8a8"})),
                           {"was quantized with int8_w8a8", "cannot be served as fp8_w8a8"}));
}

}  // namespace
}  // namespace oasr::testing
