// Pieces the `oasr bench` subcommands share: medians and rounding of the
// JSON figures, and running a PyTorch baseline script as a subprocess whose
// JSON lines are relayed to stdout.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace oasr::cli {

double median(std::vector<double> values);
double round3(double value);  // three decimals, for the JSON lines
std::string shell_quote(const std::string& text);
// The python a baseline runs on: .venv/bin/python under the working
// directory if it exists, else python3.
std::string default_baseline_python();

// Runs `command` (a shell line starting the baseline: `python` running
// `script`) with its stderr captured to a temporary file. Every stdout line
// is parsed as JSON; the ones `accept` takes are relayed to stdout and
// returned. A non-zero exit, or a line `accept` refuses, prints the stderr
// tail and throws, naming the baseline and what to do.
std::vector<nlohmann::json> run_baseline_script(
    const std::string& command, const std::string& python, const std::string& script,
    const std::function<bool(const nlohmann::json&)>& accept);

}  // namespace oasr::cli
