// A subcommand of the oasr CLI: the CLI11 sub-app that parses its flags and
// the action that runs it. Actions run after parsing, inside main's error
// handling, so an oasr::Error becomes one stderr line and exit code 1.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace oasr::cli {

struct Command {
  CLI::App* app;
  std::function<void()> run;
};

// One registration function per subcommand (one file each).
Command add_info_command(CLI::App& parent);        // info_command.cc
Command add_convert_command(CLI::App& parent);     // convert_command.cc
Command add_transcribe_command(CLI::App& parent);  // transcribe_command.cc
Command add_eval_command(CLI::App& parent);        // eval_command.cc
Command add_bench_command(CLI::App& parent);       // bench_command.cc
Command add_quantize_command(CLI::App& parent);    // quantize_command.cc
Command add_options_command(CLI::App& parent);     // options_command.cc

}  // namespace oasr::cli
