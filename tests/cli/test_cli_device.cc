// The device/dtype flags of transcribe, eval and bench as a user
// meets them on a machine without a usable GPU: each refusal is one line on
// stderr naming what is missing and what to do, exit status 1. (The CUDA
// path itself runs on the GPU machine.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "core/device.h"

namespace oasr::testing {
namespace {

// Runs oasr, expects one error line containing `needle`.
void expect_refusal(const std::vector<std::string>& args, const std::string& needle) {
  const CliResult r = run_oasr(args);
  std::string joined;
  for (const std::string& a : args) joined += a + " ";
  EXPECT_FALSE(r.signaled) << joined;
  EXPECT_EQ(r.exit_code, 1) << joined << "\n" << r.err;
  EXPECT_EQ(split_lines(r.err).size(), 1u) << joined << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("oasr: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << joined << "\n" << r.err;
}

// Validation precedes loading, so no checkpoint is needed to be refused.
const char* kNoDir = "/nonexistent-ckpt-dir";

TEST(CliDevice, SixteenBitDtypesAreRefusedOnTheCpu) {
  for (const char* dtype : {"float16", "bfloat16"}) {
    expect_refusal({"transcribe", "a.wav", "--ckpt-dir", kNoDir, "--dtype", dtype},
                   "serve float32 only");
    expect_refusal({"bench", "encoder", "--ckpt-dir", kNoDir, "--dtype", dtype, "--no-baseline"},
                   "serve float32 only");
  }
  expect_refusal({"transcribe", "a.wav", "--ckpt-dir", kNoDir, "--dtype", "float64"},
                 "use float32, float16 or bfloat16");
}

TEST(CliDevice, CudaWithoutAGpuSaysWhatToDo) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA GPU is visible here";
  expect_refusal({"transcribe", "a.wav", "--ckpt-dir", kNoDir, "--device", "cuda"},
                 "no CUDA GPU is usable");
  expect_refusal({"bench", "encoder", "--ckpt-dir", kNoDir, "--device", "cuda", "--no-baseline"},
                 "no CUDA GPU is usable");
  // Quantization on CUDA is served: without a GPU it is refused for the
  // machine, like full precision.
  expect_refusal({"transcribe", "a.wav", "--ckpt-dir", kNoDir, "--device", "cuda", "--quantization",
                  "int8_w8a8"},
                 "no CUDA GPU is usable");
}

// bench scaled-mm --device cpu times every registered CPU int8 lane: one
// JSON line each, timed (GEMM and linear) where this CPU runs it, skipped
// with the requirement where it does not; CUDA-only flags are refused.
TEST(CliDevice, ScaledMMBenchTimesEveryCpuLane) {
  const CliResult r =
      run_oasr({"bench", "scaled-mm", "--device", "cpu", "--shapes", "48,64,256", "--iters", "20",
                "--warmup", "1", "--threads", "1", "--no-baseline"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> lanes;
  for (const std::string& text : split_lines(r.out)) {
    const nlohmann::json line = nlohmann::json::parse(text);
    ASSERT_EQ(line.value("device", ""), "cpu") << text;
    EXPECT_EQ(line.value("m", 0), 48);
    lanes.insert(line.value("lane", ""));
    if (line.contains("skipped")) continue;
    EXPECT_GT(line.value("gemm_us", 0.0), 0.0) << text;
    EXPECT_GE(line.value("linear_us", 0.0), line.value("gemm_us", 0.0) * 0.5) << text;
    EXPECT_GT(line.value("gemm_gops", 0.0), 0.0) << text;
  }
  EXPECT_TRUE(lanes.count("cpu_reference") == 1 && lanes.count("cpu_avx2_int8") == 1 &&
              lanes.count("cpu_avx512_vnni_int8") == 1 && lanes.count("cpu_amx_int8") == 1)
      << r.out;
  expect_refusal({"bench", "scaled-mm", "--device", "cpu", "--format", "fp8", "--no-baseline"},
                 "the CPU lanes serve int8");
  expect_refusal({"bench", "scaled-mm", "--device", "cpu", "--sweep", "--no-baseline"},
                 "drop it with --device cpu");
}

}  // namespace
}  // namespace oasr::testing
