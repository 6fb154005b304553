#include "support/test_support.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "core/error.h"

namespace oasr::testing {

std::filesystem::path oracle_dir() {
  const char* dir = std::getenv("OASR_ORACLE_DIR");
  if (dir == nullptr) {
    ADD_FAILURE() << "OASR_ORACLE_DIR is not set: run oracle tests through ctest so the "
                     "PyTorch generator runs first";
    return {};
  }
  return dir;
}

const OracleCases& oracle_cases() {
  static const OracleCases data = [] {
    io::SafeTensorsFile file = io::SafeTensorsFile::open(oracle_dir() / "cases.safetensors");
    nlohmann::json cases = nlohmann::json::parse(file.metadata().at("cases"));
    return OracleCases{std::move(file), std::move(cases)};
  }();
  return data;
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("oasr-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

float max_abs_difference(const Tensor& a, const Tensor& b) {
  OASR_CHECK(a.shape() == b.shape(), kInvalidArgument, "max_abs_difference: shapes ",
             shape_str(a.shape()), " and ", shape_str(b.shape()));
  const Tensor x = a.to(Device::cpu()).to(DType::kF32).contiguous();
  const Tensor y = b.to(Device::cpu()).to(DType::kF32).contiguous();
  float worst = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    worst = std::max(worst, std::abs(x.data<float>()[i] - y.data<float>()[i]));
  }
  return worst;
}

std::vector<int64_t> int64_values(const Tensor& t) {
  OASR_CHECK(t.dtype() == DType::kI64, kInvalidArgument, "int64_values: ", t.str());
  const Tensor c = t.to(Device::cpu()).contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, float atol,
                                     float rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " != expected "
                                         << shape_str(expected.shape());
  }
  const Tensor a = actual.to(Device::cpu()).to(DType::kF32).contiguous();
  const Tensor e = expected.to(Device::cpu()).to(DType::kF32).contiguous();
  const float* pa = a.data<float>();
  const float* pe = e.data<float>();
  int64_t worst = -1;
  double worst_excess = 0;
  int64_t failures = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool both_nan = std::isnan(pa[i]) && std::isnan(pe[i]);
    const double diff = std::fabs(static_cast<double>(pa[i]) - pe[i]);
    const double allowed = atol + rtol * std::fabs(pe[i]);
    if (both_nan || (pa[i] == pe[i])) continue;
    if (!(diff <= allowed)) {
      ++failures;
      const double excess = std::isnan(diff) ? INFINITY : diff - allowed;
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << a.numel() << " elements differ beyond atol=" << atol
         << " rtol=" << rtol << "; worst at flat index " << worst << ": got " << pa[worst]
         << ", expected " << pe[worst];
}

Tensor normal_tensor(const Shape& shape, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

::testing::AssertionResult bit_equal(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << actual.str() << " vs " << expected.str();
  }
  const Tensor a = actual.to(Device::cpu()).contiguous();
  const Tensor e = expected.to(Device::cpu()).contiguous();
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pe = static_cast<const unsigned char*>(e.raw_data());
  const size_t elem = a.element_size();
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * elem, pe + i * elem, elem) != 0) {
      return ::testing::AssertionFailure() << "first differing element at flat index " << i;
    }
  }
  return ::testing::AssertionSuccess();
}

CommandResult run_command(const std::string& command) {
  CommandResult result{-1, false, {}};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signaled = true;
  }
  return result;
}

}  // namespace oasr::testing
