// The architecture registry: one descriptor per model architecture, named by
// the "architecture" string its native oasr_config.json carries
// ("u2pp_conformer", "whisper"). Code outside an architecture's own files
// asks this registry what a checkpoint directory holds, how to build it and
// what its structure lets quantization do, instead of comparing names or
// calling one architecture's loader (docs/architecture.md, "Architectures").
//
// A descriptor also makes the architecture's recognizer (asr/recognizer.h)
// and names its decode methods. The built-in descriptors (one line each in
// models/architecture.cc; each defined in its own folder) are seeded the
// first time the registry is used; another architecture is added with
// register_architecture() before the first lookup that should find it (a
// test binary's static initializer will do: object files given to the link
// are always linked, unlike unused members of a static library).
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

#include "asr/materialize_options.h"
#include "asr/recognizer.h"
#include "core/dtype.h"
#include "layers/module.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

using engine::MaterializeOptions;

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
  // Optional: why detect() turns down `path`, in words, for a directory whose
  // oasr_config.json names this architecture ("config.json is missing").
  std::function<std::string(const std::filesystem::path& path)> rejection;
  // What detect() looks for, in words: architecture_for() lists it when no
  // architecture takes a path ("a WeNet experiment directory (train.yaml)").
  std::string looks_for;
  // Builds the architecture's recognizer for an engine config whose
  // ckpt_dir this descriptor detected.
  engine::RecognizerFactory make_recognizer;
  // The decode options its recognizer reads (asr/decode_options.h), the
  // method first: `decode_method`, whose choices are its methods. The CLI
  // flags, the server's form fields and the Python keyword arguments are
  // made from every architecture's declarations; a key the loaded
  // architecture does not declare is refused by name. A key two
  // architectures declare has one kind.
  std::vector<engine::DecodeOptionSpec> decode_options;
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

// Adds `architecture` (name, detect, looks_for, materialize,
// quantization_layout and make_recognizer set); a name already registered is
// refused. Registration is meant for start-up: it is not synchronised with
// concurrent lookups.
void register_architecture(Architecture architecture);

// Every registered architecture in lookup order: the built-ins first.
std::vector<const Architecture*> registered_architectures();

// The architecture registered as `name`, or null.
const Architecture* find_architecture(std::string_view name);

// The architecture of the checkpoint at `path`: the first whose detect()
// accepts it. None is a fallback for another: a path no architecture takes
// is refused naming the path, what is wrong with it where that is plain and
// what each registered architecture looks for -- kNotFound (missing, or no
// checkpoint file in it), kCorruptFile (an unreadable oasr_config.json) or
// kUnsupported (an oasr_config.json naming an unregistered architecture).
const Architecture& architecture_for(const std::filesystem::path& path);
// The same lookup without the refusal: null when no architecture takes `path`.
const Architecture* detect_architecture(const std::filesystem::path& path);

// The display names of the architectures whose recognizers take the decode
// method `method`, joined ("Whisper"); empty when none does.
std::string architectures_taking(std::string_view method);

// Every decode option any registered architecture declares, once each, in
// the order of first declaration, with the architectures declaring it.
struct DeclaredDecodeOption {
  engine::DecodeOptionSpec spec;                       // the first declaration
  std::vector<const Architecture*> architectures;      // who declares it
  std::vector<const engine::DecodeOptionSpec*> specs;  // each one's declaration
};
std::vector<DeclaredDecodeOption> declared_decode_options();
// The declaration of `key` (or an alias) by any architecture, or null.
const engine::DecodeOptionSpec* find_declared_decode_option(std::string_view key);

// Refuses (kInvalidArgument) a key of `values` that `architecture` does not
// declare, naming the key, the architectures that do and the ones it takes,
// and a value outside its declared range; with `resolved`, also a missing
// decode_method.
void check_decode_values(const Architecture& architecture, const engine::DecodeValues& values);

// The layout `oasr convert --from auto` reads `path` as: the first layout
// whose detect() accepts it, in registration order; a path no layout takes
// is refused naming the path and every layout (source_layout_list()).
const SourceLayout& source_layout_for(const std::filesystem::path& path);
// The layout registered as `from` (across architectures), or null.
const SourceLayout* find_source_layout(std::string_view from);
// "wenet (WeNet ...), native (...), ..." for --from's help and refusals.
std::string source_layout_list();

}  // namespace oasr::models
