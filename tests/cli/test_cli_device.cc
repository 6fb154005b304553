// The device/dtype flags of transcribe, eval and bench encoder as a user
// meets them on a machine without a usable GPU: each refusal is one line on
// stderr naming what is missing and what to do, exit status 1. (The CUDA
// path itself runs on the GPU machine.)
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace oasr::testing
