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
  for (const SourceLayout& layout : architecture.source_layouts) {
    OASR_CHECK(!layout.from.empty() && layout.detect && layout.convert, kInvalidArgument,
               "register_architecture: '", architecture.name,
               "': a source layout needs a --from name, detect and convert");
    OASR_CHECK(find_source_layout(layout.from) == nullptr && layout.from != "auto",
               kInvalidArgument, "register_architecture: '", architecture.name,
               "': the source layout '", layout.from, "' is already taken");
  }
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

const SourceLayout& source_layout_for(const std::filesystem::path& path) {
  const Architecture& fallback = registry().front();
  for (const Architecture& architecture : registry()) {
    if (&architecture == &fallback) continue;
    for (const SourceLayout& layout : architecture.source_layouts) {
      if (layout.detect(path)) return layout;
    }
  }
  OASR_CHECK(!fallback.source_layouts.empty(), kInternal, "the ", fallback.display_name,
             " architecture registers no source layout");
  for (const SourceLayout& layout : fallback.source_layouts) {
    if (layout.detect(path)) return layout;
  }
  return fallback.source_layouts.back();
}

const SourceLayout* find_source_layout(std::string_view from) {
  for (const Architecture& architecture : registry()) {
    for (const SourceLayout& layout : architecture.source_layouts) {
      if (layout.from == from) return &layout;
    }
  }
  return nullptr;
}

std::string source_layout_list() {
  std::string list;
  for (const Architecture& architecture : registry()) {
    for (const SourceLayout& layout : architecture.source_layouts) {
      list += (list.empty() ? "" : ", ") + layout.from + " (" + layout.description + ")";
    }
  }
  return list;
}

}  // namespace oasr::models
