#include "models/architecture.h"

#include <deque>

#include "core/error.h"

namespace oasr::models {
namespace {

// Deque: a registration never moves the descriptors handed out before it.
std::deque<Architecture>& registry() {
  static std::deque<Architecture> architectures = [] {
    std::deque<Architecture> builtins;
    builtins.push_back(u2pp_architecture());
    builtins.push_back(whisper_architecture());
    return builtins;
  }();
  return architectures;
}

}  // namespace

void register_architecture(Architecture architecture) {
  OASR_CHECK(!architecture.name.empty() && architecture.detect && architecture.materialize &&
                 architecture.quantization_layout,
             kInvalidArgument, "register_architecture: '", architecture.name,
             "' needs a name, detect, materialize and quantization_layout");
  OASR_CHECK(find_architecture(architecture.name) == nullptr, kInvalidArgument,
             "register_architecture: an architecture named '", architecture.name,
             "' is already registered");
  if (architecture.display_name.empty()) architecture.display_name = architecture.name;
  registry().push_back(std::move(architecture));
}

std::vector<const Architecture*> registered_architectures() {
  std::vector<const Architecture*> out;
  for (const Architecture& architecture : registry()) out.push_back(&architecture);
  return out;
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& architecture : registry()) {
    if (architecture.name == name) return &architecture;
  }
  return nullptr;
}

const Architecture& architecture_for(const std::filesystem::path& path) {
  const Architecture& fallback = registry().front();  // U2++, seeded first
  for (const Architecture& architecture : registry()) {
    if (&architecture != &fallback && architecture.detect(path)) return architecture;
  }
  return fallback;
}

}  // namespace oasr::models
