// `oasr info PATH [--summary]`: what a checkpoint holds. PATH is a checkpoint
// directory (model.safetensors or a sharded index, plus oasr_config.json when
// there is one), a .safetensors file or a *.safetensors.index.json file.
// For a quantized native checkpoint, or with --quantization SCHEME on a
// full-precision one, the model is loaded through the engine's load sequence
// and what it would serve is reported: schemes, quantized layers with their
// kernel lanes and input quantizers, skipped layers with reasons.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "models/architecture.h"
#include "quantize/apply.h"

namespace oasr::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFileName = "oasr_config.json";
constexpr size_t kLargestShown = 10;

struct InfoOptions {
  std::string path;
  bool summary = false;
  QuantizationFlags quantization;
};

// The architecture that claims the directory at `path`, or null (a
// plain folder of safetensors files, or a config naming an architecture this
// build does not serve).
const models::Architecture* serving_architecture(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return nullptr;
  for (const models::Architecture* architecture : models::registered_architectures()) {
    if (architecture->detect(path)) return architecture;
  }
  return nullptr;
}

std::string dtype_label(DType dtype) {
  return std::string(dtype_safetensors_name(dtype)) + " (" + dtype_name(dtype) + ")";
}

std::string byte_count(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes < 1024) return text;
  double scaled = static_cast<double>(bytes);
  size_t unit = 0;
  for (scaled /= 1024; scaled >= 1024 && unit + 1 < std::size(kUnits); scaled /= 1024) ++unit;
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), " (%.1f %s)", scaled, kUnits[unit]);
  return text + buffer;
}

// A metadata or config value on one short line: control characters escaped
// (a newline would break the one-item-per-line listing), long values cut.
std::string one_line(const std::string& text, size_t max_chars = 72) {
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

std::string count(uint64_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

uint64_t tensor_bytes(const io::TensorInfo& info) {
  return info.data_end - info.data_begin;
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

// ---- oasr_config.json --------------------------------------------------------

// The config's schema is not fixed yet: only its being a JSON object is
// required; the keys shown are read when present.
nlohmann::json load_config(const fs::path& file) {
  const nlohmann::json config = io::read_json_file(file);
  OASR_CHECK(config.is_object(), kCorruptFile, file.string(),
             ": expected a JSON object with format_version, architecture, ..., got a JSON ",
             config.type_name());
  return config;
}

std::string config_value(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "(not set)";
  return one_line(it->is_string() ? it->get<std::string>() : it->dump());
}

void print_config(std::ostream& out, const fs::path& file, const nlohmann::json& config) {
  out << "config: " << file.string() << "\n";
  out << "  format_version: " << config_value(config, "format_version") << "\n";
  out << "  architecture: " << config_value(config, "architecture") << "\n";
  std::string keys;
  for (const auto& [key, value] : config.items()) keys += (keys.empty() ? "" : ", ") + key;
  out << "  keys: " << (keys.empty() ? "(none)" : keys) << "\n";
}

// ---- the tensors --------------------------------------------------------------

void print_files(std::ostream& out, const io::SafeTensorsCheckpoint& ckpt) {
  const auto& files = ckpt.mapped_files();
  if (ckpt.index_path().empty()) {
    out << "file: " << files.front().path().string() << ", "
        << byte_count(files.front().file_size()) << "\n";
  } else {
    out << "index: " << ckpt.index_path().string() << "\n";
    out << "shards: " << files.size() << "\n";
    for (const auto& file : files) {
      out << "  " << file.path().filename().string() << ": " << count(file.infos().size(), "tensor")
          << ", " << byte_count(file.file_size()) << "\n";
    }
  }
  for (const auto& file : files) {
    if (file.metadata().empty()) continue;
    out << "metadata";
    if (files.size() > 1) out << " of " << file.path().filename().string();
    out << ":\n";
    for (const auto& [key, value] : file.metadata()) {
      out << "  " << one_line(key, 40) << " = " << one_line(value) << "\n";
    }
  }
}

struct Totals {
  uint64_t bytes = 0;
  uint64_t elements = 0;
};

Totals totals_of(const std::vector<const io::TensorInfo*>& infos) {
  Totals totals;
  for (const io::TensorInfo* info : infos) {
    totals.bytes += tensor_bytes(*info);
    totals.elements += static_cast<uint64_t>(shape_numel(info->shape));
  }
  return totals;
}

void print_table(std::ostream& out, const std::vector<const io::TensorInfo*>& rows,
                 const char* indent) {
  size_t name_width = 4;
  size_t dtype_width = 5;
  size_t shape_width = 5;
  for (const io::TensorInfo* info : rows) {
    name_width = std::max(name_width, info->name.size());
    dtype_width = std::max(dtype_width, dtype_label(info->dtype).size());
    shape_width = std::max(shape_width, shape_str(info->shape).size());
  }
  out << indent << pad("name", name_width) << "  " << pad("dtype", dtype_width) << "  "
      << pad("shape", shape_width) << "  bytes\n";
  for (const io::TensorInfo* info : rows) {
    out << indent << pad(info->name, name_width) << "  "
        << pad(dtype_label(info->dtype), dtype_width) << "  "
        << pad(shape_str(info->shape), shape_width) << "  " << tensor_bytes(*info) << "\n";
  }
}

void print_listing(std::ostream& out, const std::vector<const io::TensorInfo*>& infos) {
  out << "tensors: " << infos.size() << "\n";
  if (!infos.empty()) print_table(out, infos, "  ");
  const Totals totals = totals_of(infos);
  out << "total: " << count(infos.size(), "tensor") << ", " << count(totals.elements, "element")
      << ", " << byte_count(totals.bytes) << "\n";
}

void print_summary(std::ostream& out, const std::vector<const io::TensorInfo*>& infos) {
  const Totals totals = totals_of(infos);
  out << "tensors: " << infos.size() << ", " << count(totals.elements, "element") << ", "
      << byte_count(totals.bytes) << "\n";

  std::map<DType, std::vector<const io::TensorInfo*>> by_dtype;
  for (const io::TensorInfo* info : infos) by_dtype[info->dtype].push_back(info);
  out << "by dtype:\n";
  size_t label_width = 0;
  for (const auto& [dtype, group] : by_dtype) {
    label_width = std::max(label_width, dtype_label(dtype).size());
  }
  for (const auto& [dtype, group] : by_dtype) {
    const Totals group_totals = totals_of(group);
    out << "  " << pad(dtype_label(dtype), label_width) << "  " << count(group.size(), "tensor")
        << ", " << count(group_totals.elements, "element") << ", " << byte_count(group_totals.bytes)
        << "\n";
  }

  std::vector<const io::TensorInfo*> largest = infos;
  std::stable_sort(largest.begin(), largest.end(),
                   [](const io::TensorInfo* a, const io::TensorInfo* b) {
                     return tensor_bytes(*a) > tensor_bytes(*b);
                   });
  if (largest.size() > kLargestShown) largest.resize(kLargestShown);
  out << "largest " << largest.size() << " tensors:\n";
  if (!largest.empty()) print_table(out, largest, "  ");
}

void run_info(const InfoOptions& options) {
  const fs::path path = options.path;
  // Everything is opened and validated before anything is printed, so a bad
  // checkpoint produces the error line alone.
  const io::SafeTensorsCheckpoint ckpt = io::SafeTensorsCheckpoint::open(path);
  std::optional<nlohmann::json> config;
  const fs::path config_path = path / kConfigFileName;
  std::error_code ec;
  if (fs::is_directory(path, ec) && fs::exists(config_path, ec)) {
    config = load_config(config_path);
  }
  std::vector<const io::TensorInfo*> infos;
  for (const std::string& name : ckpt.names()) infos.push_back(&ckpt.info(name));
  const quant::QuantizationConfig quant_config = options.quantization.to_config();
  OASR_CHECK(quant_config.empty() || config.has_value(), kInvalidArgument,
             "--quantization needs a checkpoint directory with ", kConfigFileName, "; ",
             path.string(), " is not one");
  // A checkpoint of an architecture this build serves is loaded the way the
  // engine loads it, so a missing or misshapen tensor fails here (exit 1)
  // instead of at the first transcription; what it would serve is reported
  // when it is quantized or --quantization asks.
  const models::Architecture* architecture = serving_architecture(path);
  OASR_CHECK(quant_config.empty() || architecture != nullptr, kInvalidArgument,
             "--quantization reports what a model this build serves would serve; ", path.string(),
             " is not a checkpoint directory of one (",
             config ? "its architecture is not served" : "no architecture claims it", ")");
  std::optional<quant::QuantizationInfo> quant_info;
  if (architecture != nullptr) {
    const models::MaterializedModel loaded = architecture->materialize(path, quant_config, {});
    if (!quant_config.empty() || !loaded.spec.empty()) {
      quant_info = quant::quantization_info(*loaded.model, loaded.spec);
    }
  }

  std::ostringstream out;
  out << "checkpoint: " << path.string() << "\n";
  if (config) print_config(out, config_path, *config);
  print_files(out, ckpt);
  if (options.summary) {
    print_summary(out, infos);
  } else {
    print_listing(out, infos);
  }
  if (architecture != nullptr) {
    out << "model: " << architecture->display_name
        << " (loads: every tensor it needs is present and shaped as its config says)\n";
  }
  if (quant_info) out << "quantization: " << quant_info->details();
  std::cout << out.str() << std::flush;
  if (architecture == nullptr && fs::is_directory(path, ec)) {
    std::cerr << "oasr: note: " << path.string()
              << " is not a checkpoint directory this build serves ("
              << (config ? "its oasr_config.json names an architecture it does not serve"
                         : "no oasr_config.json, and no other layout it reads")
              << "): its tensors are listed, nothing was loaded\n";
  }
}

}  // namespace

Command add_info_command(CLI::App& parent) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* app =
      parent.add_subcommand("info",
                            "List the tensors of a checkpoint (directory, .safetensors file or "
                            "*.safetensors.index.json) with dtypes, shapes and sizes");
  app->add_option("path", options->path,
                  "checkpoint directory, .safetensors file or *.safetensors.index.json")
      ->required();
  app->add_flag("--summary", options->summary,
                "counts and bytes by dtype and the largest tensors instead of the full list");
  add_quantization_flags(*app, options->quantization);
  return {app, [options] { run_info(*options); }};
}

}  // namespace oasr::cli
