// Running the built `oasr` binary from a test (its path comes from the
// OASR_CLI_BINARY compile definition) with stdout and stderr kept apart.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace oasr::testing {

struct CliResult {
  int exit_code;
  bool signaled;
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `oasr <args>` once, keeping stdout and stderr apart.
inline CliResult run_oasr(const std::vector<std::string>& args) {
  std::string command = shell_quote(OASR_CLI_BINARY);
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  // One run, stderr captured through a file so stdout and stderr stay apart
  // (commands that write to disk must not run twice).
  const TempDir scratch;
  const std::string err_path = (scratch.path() / "stderr").string();
  const CommandResult out = run_command("( " + command + " 2>" + shell_quote(err_path) + " )");
  std::ifstream err_file(err_path, std::ios::binary);
  std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  return {out.exit_code, out.signaled, out.output, err};
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The one stdout line whose first column is `name` (empty when none is).
inline std::string line_listing(const std::string& out, const std::string& name) {
  std::string found;
  for (const std::string& line : split_lines(out)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == name) {
      EXPECT_TRUE(found.empty()) << "'" << name << "' is listed twice:\n" << out;
      found = line;
    }
  }
  return found;
}

// A refusal: exit code 1 (not a signal), nothing on stdout, exactly one
// stderr line "oasr: error: ..." that contains every needle.
inline ::testing::AssertionResult refused_with(const CliResult& result,
                                               const std::vector<std::string>& needles) {
  if (result.signaled) return ::testing::AssertionFailure() << "killed by a signal";
  if (result.exit_code != 1) {
    return ::testing::AssertionFailure()
           << "exit code " << result.exit_code << "; stderr: " << result.err;
  }
  const std::vector<std::string> lines = split_lines(result.err);
  if (lines.size() != 1 || result.err.back() != '\n') {
    return ::testing::AssertionFailure() << "stderr is not one line: [" << result.err << "]";
  }
  if (lines[0].rfind("oasr: error: ", 0) != 0) {
    return ::testing::AssertionFailure() << "stderr lacks the 'oasr: error: ' prefix: " << lines[0];
  }
  for (const std::string& needle : needles) {
    if (lines[0].find(needle) == std::string::npos) {
      return ::testing::AssertionFailure() << "stderr lacks \"" << needle << "\": " << lines[0];
    }
  }
  if (!result.out.empty()) {
    return ::testing::AssertionFailure() << "stdout is not empty: " << result.out;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace oasr::testing
