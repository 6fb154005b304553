// `oasr info` on a checkpoint written by the PyPI safetensors library: the
// listing must agree with what that library's own reader reports, and a
// truncated copy must be refused in one stderr line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "core/dtype.h"
#include "unit/safetensors_test_util.h"

namespace oasr {
namespace {

using testing::line_listing;
using testing::refused_with;
using testing::run_oasr;
using testing::TempDir;

// Runs the Python writer; returns the reference reader's listing.
nlohmann::json write_with_pypi(const std::filesystem::path& dir) {
  const std::string command = std::string(OASR_ORACLE_PYTHON) + " " + OASR_SOURCE_DIR +
                              "/tests/cli/write_pypi_checkpoint.py " +
                              testing::shell_quote(dir.string());
  const testing::CommandResult result = testing::run_command(command);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(result.output.substr(result.output.find("{\"tensors\"")));
}

TEST(CliInfoPyPI, ListsWhatTheReferenceReaderSees) {
  TempDir dir;
  const nlohmann::json reference = write_with_pypi(dir.path());
  ASSERT_EQ(reference.at("tensors").size(), 10u);
  const auto result = run_oasr({"info", dir.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("its tensors are listed"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("tensors: 10\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("format = pt"), std::string::npos) << result.out;
  for (const auto& [name, want] : reference.at("tensors").items()) {
    const std::string line = line_listing(result.out, name);
    ASSERT_FALSE(line.empty()) << name << " is not listed:\n" << result.out;
    const auto dtype = parse_safetensors_dtype(want.at("dtype").get<std::string>());
    ASSERT_TRUE(dtype.has_value()) << want.dump();
    const std::string label = want.at("dtype").get<std::string>() + " (" + dtype_name(*dtype) + ")";
    EXPECT_NE(line.find("  " + label + "  "), std::string::npos) << line;
    EXPECT_NE(line.find("  " + shape_str(want.at("shape").get<Shape>()) + "  "), std::string::npos)
        << line;
    const std::string bytes = std::to_string(want.at("bytes").get<size_t>());
    EXPECT_EQ(line.substr(line.size() - bytes.size() - 2), "  " + bytes) << line;
  }
}

TEST(CliInfoPyPI, RefusesATruncatedCopyInOneLine) {
  TempDir dir;
  write_with_pypi(dir.path());
  const std::string bytes = testing::read_file_bytes(dir.path() / "model.safetensors");
  ASSERT_GT(bytes.size(), 200u);
  for (size_t cut : {size_t{100}, bytes.size() - 1}) {
    const auto path = dir.path() / ("truncated-" + std::to_string(cut) + ".safetensors");
    testing::write_file_bytes(path, bytes.substr(0, cut));
    EXPECT_TRUE(
        refused_with(run_oasr({"info", path.string()}), {path.filename().string(), "truncated"}))
        << "cut at " << cut;
  }
}

}  // namespace
}  // namespace oasr
