// What every Hugging Face model directory starts with: a config.json whose
// model_type names the architecture. Shared by the architectures that read
// such directories (Whisper, Qwen2-Audio) for their detect() and its reason.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace oasr::models {

// Why `dir` is not a Hugging Face directory of `model_type`, in words
// ("DIR/config.json's model_type is "bert", not "whisper""); empty when it
// is one. Never throws.
std::string hf_model_type_rejection(const std::filesystem::path& dir, std::string_view model_type);

}  // namespace oasr::models
