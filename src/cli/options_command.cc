// `oasr options [--format text|markdown]`: the decode options every
// registered architecture declares (models::Architecture::decode_options),
// with the architectures that read each one, what it takes and its default.
// The README's decode option table is this command's markdown output (ctest
// cli.readme_decode_options compares them).
#include <iostream>
#include <memory>
#include <string>

#include "asr/decode_options.h"
#include "cli/command.h"
#include "core/error.h"
#include "models/architecture.h"

namespace oasr::cli {
namespace {

std::string aliases_of(const engine::DecodeOptionSpec& spec) {
  std::string out;
  for (const std::string& alias : spec.aliases) out += ", " + engine::decode_flag(alias);
  return out;
}

void print_markdown(std::ostream& out) {
  out << "| flag (key) | architecture: what it does | takes | default |\n"
      << "|---|---|---|---|\n";
  for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
    for (size_t i = 0; i < option.architectures.size(); ++i) {
      const engine::DecodeOptionSpec& spec = *option.specs[i];
      const std::string flag = i == 0 ? "`" + engine::decode_flag(spec.key) + "`" +
                                            aliases_of(option.spec) + " (`" + spec.key + "`)"
                                      : "";
      out << "| " << flag << " | " << option.architectures[i]->display_name << ": " << spec.help
          << " | " << engine::decode_takes(spec) << " | " << spec.default_text << " |\n";
    }
  }
}

void print_text(std::ostream& out) {
  for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
    out << engine::decode_flag(option.spec.key) << aliases_of(option.spec) << " ("
        << option.spec.key << ", " << engine::decode_kind_type_name(option.spec.kind) << ")\n";
    for (size_t i = 0; i < option.architectures.size(); ++i) {
      const engine::DecodeOptionSpec& spec = *option.specs[i];
      out << "  " << option.architectures[i]->display_name << ": " << spec.help << "; takes "
          << engine::decode_takes(spec) << "; default " << spec.default_text << "\n";
    }
  }
}

}  // namespace

Command add_options_command(CLI::App& parent) {
  auto format = std::make_shared<std::string>("text");
  CLI::App* app = parent.add_subcommand(
      "options", "List the decode options each architecture declares (what they take, defaults)");
  app->add_option("--format", *format, "text (default) or markdown");
  return {app, [format] {
            OASR_CHECK(*format == "text" || *format == "markdown", kInvalidArgument,
                       "unknown --format '", *format, "'; use text or markdown");
            if (*format == "markdown") {
              print_markdown(std::cout);
            } else {
              print_text(std::cout);
            }
          }};
}

}  // namespace oasr::cli
