// oasr command-line entry point. Each subcommand is a function that may throw
// oasr::Error; main turns it into one line on stderr and exit code 1.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"

namespace {

// A file whose name starts with '-' is read as a flag, and the parse error
// then speaks of a missing or unknown argument; name the file and the fix.
std::string flag_like_file_hint(int argc, char** argv) {
  std::error_code ignored;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-' && std::filesystem::is_regular_file(arg, ignored)) {
      return "; '" + arg + "' was read as a flag: to name that file write ./" + arg +
             " or put it after --";
    }
  }
  return "";
}

// Error messages go out as exactly one line, whatever they contain.
std::string single_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"oasr: 8-bit speech recognition inference"};
  app.set_version_flag("--version", std::string("oasr ") + OASR_VERSION);
  app.require_subcommand(0, 1);
  std::vector<oasr::cli::Command> commands;
  commands.push_back(oasr::cli::add_info_command(app));
  commands.push_back(oasr::cli::add_convert_command(app));
  commands.push_back(oasr::cli::add_transcribe_command(app));
  commands.push_back(oasr::cli::add_eval_command(app));
  commands.push_back(oasr::cli::add_bench_command(app));
  commands.push_back(oasr::cli::add_quantize_command(app));
  commands.push_back(oasr::cli::add_options_command(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors follow the same one-line contract as runtime errors.
    std::cerr << "oasr: error: " << single_line(e.what() + flag_like_file_hint(argc, argv))
              << " (see 'oasr --help')\n";
    return 2;
  }
  try {
    for (const oasr::cli::Command& command : commands) {
      if (command.app->parsed()) {
        command.run();
        return 0;
      }
    }
    std::cout << app.help();
  } catch (const oasr::Error& e) {
    std::cerr << "oasr: error: " << single_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "oasr: internal error: " << single_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
