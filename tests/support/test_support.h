// Shared helpers for oasr's tests: oracle data loading, CUDA skipping,
// temporary directories, comparison with tolerances.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace oasr::testing {

// Skips the current test when no GPU is visible (CI has none).
#define OASR_SKIP_WITHOUT_CUDA()                                     \
  do {                                                               \
    if (!::oasr::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// The directory an oracle generator wrote (env OASR_ORACLE_DIR, set by ctest).
std::filesystem::path oracle_dir();

// The oracle's cases.safetensors and its "cases" metadata (a JSON string the
// generator wrote), opened once per test binary.
struct OracleCases {
  io::SafeTensorsFile file;
  nlohmann::json cases;
};
const OracleCases& oracle_cases();

// A fresh directory under the build tree, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Elementwise |a - b| <= atol + rtol * |b| over two float tensors of equal
// shape (any float dtype; compared in float32). Reports the worst element.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, float atol,
                                     float rtol);

// A float32 tensor of Normal(0, scale) draws from `rng`, in element order.
Tensor normal_tensor(const Shape& shape, std::mt19937& rng, float scale = 1.0f);

// The largest |a - b| over two float tensors of one shape (any float dtype
// and device; compared in float32), for the figures oracle tests print.
float max_abs_difference(const Tensor& a, const Tensor& b);

// The values of an int64 tensor (token ids from a fixture).
std::vector<int64_t> int64_values(const Tensor& t);

// Bitwise equality of two tensors (same dtype, shape and bytes).
::testing::AssertionResult bit_equal(const Tensor& actual, const Tensor& expected);

// Runs a shell command, returns exit status and captured stdout+stderr.
struct CommandResult {
  int exit_code;
  bool signaled;
  std::string output;
};
CommandResult run_command(const std::string& command);

}  // namespace oasr::testing
