// The architecture registry: one descriptor per model architecture, named by
// the "architecture" string its native oasr_config.json carries
// ("u2pp_conformer", "whisper"). Code outside an architecture's own files
// asks this registry what a checkpoint directory holds, how to build it and
// what its structure lets quantization do, instead of comparing names or
// calling one architecture's loader (docs/architecture.md, "Architectures").
//
// The built-in descriptors (models/u2pp_architecture.cc,
// models/whisper_architecture.cc) are seeded the first time the registry is
// used; another architecture is added with register_architecture() before
// the first lookup that should find it (a test binary's static initializer
// will do: object files given to the link are always linked, unlike unused
// members of a static library).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layers/module.h"
#include "models/materialize.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

// A built model and the quantization it serves (empty: full precision).
struct MaterializedModel {
  std::unique_ptr<Module> model;
  quant::QuantizationSpec spec;
};

struct Architecture {
  std::string name;          // oasr_config.json "architecture"
  std::string display_name;  // what messages call it ("U2++", "Whisper")
  // False while the architecture's CUDA path is not written: ASREngine
  // refuses --device cuda for it by name, before any device check.
  bool serves_cuda = true;
  // Whether `path` holds a checkpoint of this architecture in any layout
  // its loader reads. Must not throw; a directory it cannot parse is not its.
  std::function<bool(const std::filesystem::path& path)> detect;
  // The load sequence of models/materialize.h for a checkpoint at `path`.
  std::function<MaterializedModel(const std::filesystem::path& path,
                                  const quant::QuantizationConfig& quantization,
                                  const MaterializeOptions& options)>
      materialize;
  // What the structure of a model this descriptor materialized lets
  // quantization do (quant/layout.h).
  std::function<quant::QuantLayout(const Module& model)> quantization_layout;
};

// Adds `architecture` (every field set); a name already registered is
// refused. Registration is meant for start-up: it is not synchronised with
// concurrent lookups.
void register_architecture(Architecture architecture);

// Every registered architecture in lookup order: the built-ins first.
std::vector<const Architecture*> registered_architectures();

// The architecture registered as `name`, or null.
const Architecture* find_architecture(std::string_view name);

// The architecture of the checkpoint at `path`: the first one other than
// U2++ whose detect() accepts it, else U2++ -- whose loader reads native and
// WeNet directories and names what is wrong with anything else (a missing
// path, an unknown "architecture", a malformed config).
const Architecture& architecture_for(const std::filesystem::path& path);

// The built-in descriptors (their own files).
Architecture u2pp_architecture();
Architecture whisper_architecture();

}  // namespace oasr::models
