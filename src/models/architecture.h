// The architecture registry: one descriptor per model architecture, named by
// the "architecture" string its native oasr_config.json carries
// ("u2pp_conformer", "whisper"). Code outside an architecture's own files
// asks this registry what a checkpoint directory holds, how to build it and
// what its structure lets quantization do, instead of comparing names or
// calling one architecture's loader (docs/architecture.md, "Architectures").
//
// The built-in descriptors (models/u2pp/u2pp_architecture.cc,
// models/whisper/whisper_architecture.cc) are seeded the first time the registry is
// used; another architecture is added with register_architecture() before
// the first lookup that should find it (a test binary's static initializer
// will do: object files given to the link are always linked, unlike unused
// members of a static library).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "layers/module.h"
#include "models/materialize_options.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

// `oasr convert`: one checkpoint into the architecture's native directory.
struct ConvertRequest {
  std::filesystem::path source;
  std::filesystem::path destination;
  // Replace a non-empty destination (only an oasr directory ever is).
  bool force = false;
  // Store floating weights as this (float32, float16 or bfloat16); unset
  // keeps each tensor's own. dtype_flag is the flag's text, for messages.
  std::optional<DType> dtype;
  std::string dtype_flag;
};

// One directory layout an architecture reads and converts (`oasr convert
// --from NAME`): an upstream one (WeNet, CTranslate2, Hugging Face) or its
// own native directory.
struct SourceLayout {
  std::string from;         // the --from value: "wenet", "native", "ct2", "hf"
  std::string description;  // what --from's help and refusals call it
  // Whether `path` is in this layout, for --from auto. Must not throw.
  std::function<bool(const std::filesystem::path& path)> detect;
  // Reads `request.source` in this layout, checks everything, writes the
  // native directory atomically; returns what `oasr convert` prints.
  std::function<std::string(const ConvertRequest& request)> convert;
};

// A built model and the quantization it serves (empty: full precision).
struct MaterializedModel {
  std::unique_ptr<Module> model;
  quant::QuantizationSpec spec;
};

// What `oasr quantize` needs of one full-precision checkpoint.
class QuantizableCheckpoint {
 public:
  virtual ~QuantizableCheckpoint() = default;
  // The fp32 master on the host, lanes unbound: folds, scales and weight
  // quantization apply to it.
  virtual Module& master() = 0;
  virtual const quant::QuantLayout& layout() const = 0;
  // The weights as read, under the names the written checkpoint keeps.
  virtual std::shared_ptr<const TensorSource> weights() const = 0;
  // The spec producer's "source": {"format", "checkpoint"}.
  virtual nlohmann::json provenance() const = 0;
  // The decode each calibration utterance runs with, as engine option
  // pairs (decode_method=..., chunk_size=...; engine/engine_options.h), so
  // every layer sees the inputs it sees when decoding, and the words the
  // spec's producer and the report use for it.
  virtual std::vector<std::pair<std::string, std::string>> calibration_decode() const = 0;
  virtual std::string calibration_decode_description() const = 0;
  // Writes the quantized checkpoint atomically: `weights` (the quantized
  // state dict), `spec` (quant::QuantizationSpec JSON), a provenance note,
  // and more files (name, contents) staged with it.
  virtual void write_quantized(
      std::shared_ptr<const TensorSource> weights, const nlohmann::json& spec,
      const std::string& note, const std::filesystem::path& destination, bool force,
      const std::vector<std::pair<std::string, std::string>>& extra_files) const = 0;
};

struct Architecture {
  std::string name;          // oasr_config.json "architecture"
  std::string display_name;  // what messages call it ("U2++", "Whisper")
  // False while the architecture's CUDA path is not written: ASREngine
  // refuses --device cuda for it by name, before any device check.
  bool serves_cuda = true;
  // Whether its recognizer takes the decode option timestamps=true (the
  // model delimits segments with times itself: Whisper's timestamp tokens).
  // oasr-server asks for them where a response format carries segments.
  bool decodes_timestamps = false;
  // Whether `path` holds a checkpoint of this architecture in any layout
  // its loader reads. Must not throw; a directory it cannot parse is not its.
  std::function<bool(const std::filesystem::path& path)> detect;
  // The load sequence (spec "Load order"; U2++'s is models/u2pp/materialize.h)
  // for a checkpoint at `path`.
  std::function<MaterializedModel(const std::filesystem::path& path,
                                  const quant::QuantizationConfig& quantization,
                                  const MaterializeOptions& options)>
      materialize;
  // What the structure of a model this descriptor materialized lets
  // quantization do (quant/layout.h).
  std::function<quant::QuantLayout(const Module& model)> quantization_layout;
  // The layouts `oasr convert` reads for this architecture, in detection
  // order; empty: it converts nothing.
  std::vector<SourceLayout> source_layouts;
  // Opens the full-precision checkpoint at `path` for `oasr quantize`
  // (refusing a quantized one); null: oasr quantize refuses the architecture
  // by name and points to online quantization.
  std::function<std::unique_ptr<QuantizableCheckpoint>(const std::filesystem::path& path)>
      open_for_quantization;
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

// The layout `oasr convert --from auto` reads `path` as: the first layout
// whose detect() accepts it, the architectures in architecture_for()'s
// order (U2++'s last, its final layout -- WeNet, whose loader names what is
// wrong with anything else -- taking what no other does).
const SourceLayout& source_layout_for(const std::filesystem::path& path);
// The layout registered as `from` (across architectures), or null.
const SourceLayout* find_source_layout(std::string_view from);
// "wenet (WeNet ...), native (...), ..." for --from's help and refusals.
std::string source_layout_list();

// The built-in descriptors (their own files).
Architecture u2pp_architecture();
Architecture whisper_architecture();

}  // namespace oasr::models
