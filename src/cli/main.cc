// oasr command-line entry point. Each subcommand is a function that may throw
// oasr::Error; main turns it into one line on stderr and exit code 1.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"oasr: 8-bit speech recognition inference"};
  app.set_version_flag("--version", std::string("oasr ") + OASR_VERSION);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
    }
  } catch (const oasr::Error& e) {
    std::cerr << "oasr: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
