#include "models/hf_dir.h"

#include <nlohmann/json.hpp>

#include <exception>
#include <system_error>

#include "io/json_file.h"

namespace oasr::models {

std::string hf_model_type_rejection(const std::filesystem::path& dir, std::string_view model_type) {
  const std::filesystem::path config_path = dir / "config.json";
  std::error_code error;
  if (!std::filesystem::is_regular_file(config_path, error)) {
    return config_path.string() + " (the Hugging Face model config) is missing";
  }
  try {
    const nlohmann::json config = io::read_json_file(config_path);
    if (!config.is_object()) return config_path.string() + " is not a JSON object";
    const auto type = config.find("model_type");
    if (type == config.end()) return config_path.string() + " has no \"model_type\"";
    if (!type->is_string() || type->get<std::string>() != model_type) {
      return config_path.string() + "'s model_type is " + type->dump() + ", not \"" +
             std::string(model_type) + "\"";
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace oasr::models
