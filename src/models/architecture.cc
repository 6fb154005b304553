#include "models/architecture.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <fstream>

#include "core/error.h"
#include "models/native_dir.h"

// The built-in architectures in detection order, one line each: NAME's
// descriptor is models::NAME_architecture(), defined in models/NAME/.
// Adding an architecture is its folder plus its line here.
#define OASR_BUILTIN_ARCHITECTURES(X) \
  X(u2pp)                             \
  X(whisper)                          \
  X(qwen2_audio)                      \
  X(fastconformer)

namespace oasr::models {

#define OASR_DECLARE_ARCHITECTURE(name) Architecture name##_architecture();
OASR_BUILTIN_ARCHITECTURES(OASR_DECLARE_ARCHITECTURE)
#undef OASR_DECLARE_ARCHITECTURE

namespace {

void check_complete(const Architecture& architecture) {
  OASR_CHECK(!architecture.name.empty() && architecture.detect && !architecture.looks_for.empty() &&
                 architecture.materialize && architecture.quantization_layout &&
                 architecture.make_recognizer,
             kInvalidArgument, "register_architecture: '", architecture.name,
             "' needs a name, detect, looks_for, materialize, quantization_layout and "
             "make_recognizer");
  const engine::DecodeOptionSpec* method =
      engine::find_decode_spec(architecture.decode_options, engine::kDecodeMethodKey);
  OASR_CHECK(method != nullptr && method->kind == engine::DecodeValueKind::kText &&
                 !method->choices.empty(),
             kInvalidArgument, "register_architecture: '", architecture.name,
             "' declares no decode_method option with its methods as choices");
}

// A key declared by `architecture` and by one of `others` has one kind.
void check_decode_kinds(const Architecture& architecture, const std::deque<Architecture>& others) {
  for (const engine::DecodeOptionSpec& spec : architecture.decode_options) {
    for (const Architecture& other : others) {
      const engine::DecodeOptionSpec* theirs =
          engine::find_decode_spec(other.decode_options, spec.key);
      OASR_CHECK(theirs == nullptr || (theirs->kind == spec.kind && theirs->key == spec.key),
                 kInvalidArgument, "register_architecture: '", architecture.name,
                 "' declares the decode option ", spec.key, " with another kind or name than ",
                 other.display_name, " does; one key has one kind of value");
    }
  }
}

std::string joined_display_names(const std::vector<const Architecture*>& architectures) {
  std::string names;
  for (const Architecture* architecture : architectures) {
    names += (names.empty() ? "" : ", ") + architecture->display_name;
  }
  return names;
}

// Deque: a registration never moves the descriptors handed out before it.
std::deque<Architecture>& registry() {
  static std::deque<Architecture> architectures = [] {
    std::deque<Architecture> builtins;
#define OASR_SEED_ARCHITECTURE(name) builtins.push_back(name##_architecture());
    OASR_BUILTIN_ARCHITECTURES(OASR_SEED_ARCHITECTURE)
#undef OASR_SEED_ARCHITECTURE
    for (const Architecture& architecture : builtins) {
      check_complete(architecture);
      check_decode_kinds(architecture, builtins);
    }
    return builtins;
  }();
  return architectures;
}

// Why no architecture took `path`, where that is plain (ending in "; "),
// and the error code that says so: kNotFound for a missing path or one
// without any checkpoint file, kCorruptFile for an unreadable
// oasr_config.json, kUnsupported for one naming an unregistered architecture.
struct Undetected {
  ErrorCode code = ErrorCode::kNotFound;
  std::string reason;
};

Undetected undetected(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    // A dangling link or a link loop is not "no such file" to the user.
    return {ErrorCode::kNotFound,
            (error ? error.message() : std::string("no such file or directory")) + "; "};
  }
  if (!looks_like_native_dir(path)) return {};
  std::ifstream in(path / kNativeConfigName);
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const std::string file = std::string("its ") + kNativeConfigName;
  if (!config.is_object()) return {ErrorCode::kCorruptFile, file + " is not a JSON object; "};
  const auto named = config.find("architecture");
  if (named == config.end() || !named->is_string()) {
    return {ErrorCode::kCorruptFile, file + " names no \"architecture\"; "};
  }
  const std::string name = named->get<std::string>();
  const Architecture* architecture = find_architecture(name);
  if (architecture == nullptr) {
    return {ErrorCode::kUnsupported,
            file + " names the architecture '" + name + "', which is not registered; "};
  }
  const std::string why = architecture->rejection ? architecture->rejection(path) : "";
  return {
      ErrorCode::kCorruptFile,
      file + " names '" + name + "', " +
          (why.empty() ? std::string("whose reader does not accept the directory") : "but " + why) +
          "; "};
}

}  // namespace

void register_architecture(Architecture architecture) {
  check_complete(architecture);
  check_decode_kinds(architecture, registry());
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

const Architecture* detect_architecture(const std::filesystem::path& path) {
  for (const Architecture& architecture : registry()) {
    if (architecture.detect(path)) return &architecture;
  }
  return nullptr;
}

const Architecture& architecture_for(const std::filesystem::path& path) {
  std::string looked_for;
  for (const Architecture& architecture : registry()) {
    if (architecture.detect(path)) return architecture;
    looked_for += (looked_for.empty() ? "" : "; ") + architecture.display_name + " (" +
                  architecture.name + "): " + architecture.looks_for;
  }
  const Undetected why = undetected(path);
  throw Error(why.code, path.string() + " is no checkpoint oasr reads: " + why.reason +
                            "the registered architectures look for -- " + looked_for);
}

std::string architectures_taking(std::string_view method) {
  std::vector<const Architecture*> taking;
  for (const Architecture& architecture : registry()) {
    const engine::DecodeOptionSpec* spec =
        engine::find_decode_spec(architecture.decode_options, engine::kDecodeMethodKey);
    if (std::find(spec->choices.begin(), spec->choices.end(), method) != spec->choices.end()) {
      taking.push_back(&architecture);
    }
  }
  return joined_display_names(taking);
}

std::vector<DeclaredDecodeOption> declared_decode_options() {
  std::vector<DeclaredDecodeOption> out;
  for (const Architecture& architecture : registry()) {
    for (const engine::DecodeOptionSpec& spec : architecture.decode_options) {
      auto it = std::find_if(out.begin(), out.end(), [&](const DeclaredDecodeOption& declared) {
        return declared.spec.key == spec.key;
      });
      if (it == out.end()) it = out.insert(out.end(), DeclaredDecodeOption{spec, {}, {}});
      it->architectures.push_back(&architecture);
      it->specs.push_back(&spec);
      for (const std::string& alias : spec.aliases) {
        if (std::find(it->spec.aliases.begin(), it->spec.aliases.end(), alias) ==
            it->spec.aliases.end()) {
          it->spec.aliases.push_back(alias);
        }
      }
    }
  }
  return out;
}

const engine::DecodeOptionSpec* find_declared_decode_option(std::string_view key) {
  for (const Architecture& architecture : registry()) {
    const engine::DecodeOptionSpec* spec =
        engine::find_decode_spec(architecture.decode_options, key);
    if (spec != nullptr) return spec;
  }
  return nullptr;
}

void check_decode_values(const Architecture& architecture, const engine::DecodeValues& values) {
  const std::string& name = architecture.display_name;
  for (const auto& [key, value] : values.items()) {
    const engine::DecodeOptionSpec* spec =
        engine::find_decode_spec(architecture.decode_options, key);
    if (spec == nullptr) {
      std::vector<const Architecture*> declaring;
      for (const Architecture& other : registry()) {
        if (engine::find_decode_spec(other.decode_options, key) != nullptr) {
          declaring.push_back(&other);
        }
      }
      std::string taken;
      for (const engine::DecodeOptionSpec& own : architecture.decode_options) {
        taken += (taken.empty() ? "" : ", ") + own.key;
      }
      OASR_THROW(kInvalidArgument, engine::decode_label(key), " is not a ", name, " decode option",
                 declaring.empty()
                     ? std::string()
                     : " (" + joined_display_names(declaring) + " checkpoints take it)",
                 ": drop it; this ", name, " checkpoint takes ", taken);
    }
    if (key == engine::kDecodeMethodKey) {
      const std::string& method = std::get<std::string>(value);
      if (std::find(spec->choices.begin(), spec->choices.end(), method) == spec->choices.end()) {
        const std::string owners = architectures_taking(method);
        OASR_THROW(kInvalidArgument, "decode method '", method, "' is not a ", name, " method",
                   owners.empty() ? std::string() : " (" + owners + " checkpoints take it)",
                   "; this ", name, " checkpoint takes ", engine::decode_takes(*spec));
      }
    }
    engine::check_decode_value(*spec, value);
  }
}

const SourceLayout& source_layout_for(const std::filesystem::path& path) {
  for (const Architecture& architecture : registry()) {
    for (const SourceLayout& layout : architecture.source_layouts) {
      if (layout.detect(path)) return layout;
    }
  }
  const Undetected why = undetected(path);
  throw Error(why.code, path.string() + " is in no layout oasr convert reads: " + why.reason +
                            "--from takes " + source_layout_list());
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
