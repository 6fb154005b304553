// The U2++ Conformer's architecture descriptor (models/architecture.h): native
// oasr directories whose config says "u2pp_conformer", WeNet experiment
// directories (train.yaml + *.pt) and WeNet .pt files.
#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "models/architecture.h"
#include "models/native_checkpoint.h"

namespace oasr::models {
namespace {

namespace fs = std::filesystem;

bool native_config_names_u2pp(const fs::path& dir) {
  std::ifstream in(dir / kNativeConfigName);
  if (!in) return false;
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return config.is_object() && config.value("architecture", "") == kArchitectureName;
}

bool detect_u2pp(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    if (looks_like_native_dir(path)) return native_config_names_u2pp(path);
    return fs::is_regular_file(path / "train.yaml", error);
  }
  return path.extension() == ".pt" && fs::is_regular_file(path, error);
}

const U2ppModel& as_u2pp(const Module& model) {
  const auto* u2pp = dynamic_cast<const U2ppModel*>(&model);
  OASR_CHECK(u2pp != nullptr, kInternal, "the U2++ quantization layout got a ", model.type_name(),
             " model, not a U2ppModel");
  return *u2pp;
}

}  // namespace

Architecture u2pp_architecture() {
  Architecture architecture;
  architecture.name = kArchitectureName;
  architecture.display_name = "U2++";
  architecture.detect = detect_u2pp;
  architecture.materialize = [](const fs::path& path, const quant::QuantizationConfig& quantization,
                                const MaterializeOptions& options) {
    MaterializedU2pp loaded =
        materialize_u2pp_model(load_checkpoint_dir(path), quantization, options);
    return MaterializedModel{std::move(loaded.model), std::move(loaded.spec)};
  };
  architecture.quantization_layout = [](const Module& model) {
    return u2pp_quantization_layout(as_u2pp(model).config());
  };
  return architecture;
}

}  // namespace oasr::models
