#include "core/env.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace oasr::env {

const std::vector<Variable>& known_variables() {
  static const std::vector<Variable> vars = {
      {"OASR_LOG_LEVEL", "trace|debug|info|warn|error|off (default: warn)"},
      {"OASR_SCALED_MM_BACKEND", "auto|native|mma_sync|cublaslt: the 8-bit GEMM lane"},
      {"OASR_QUANT_FUSION", "0 disarms every fused quantize producer (A/B attribution)"},
      {"OASR_QUANT_GEMV",
       "0 runs int8 GEMMs of M <= 16 rows through the lane's tiled kernel, with a separate "
       "input quantize, instead of the GEMV that quantizes on chip (A/B)"},
      {"OASR_FUSED_ATTENTION",
       "0 runs the CUDA attention unfused (products, softmax, copies; A/B): the encoder's "
       "self-attention and the decoder's cached and cross-attention"},
      {"OASR_CUDA_GRAPHS",
       "0 runs the CUDA encoder and the Whisper decoder step eagerly, never recording or "
       "replaying a CUDA graph (A/B)"},
      {"OASR_CPU_ISA",
       "auto|amx_int8|avx512_vnni|avx_vnni|avx2|scalar: caps the CPU SIMD level the kernels "
       "dispatch to "
       "(A/B, "
       "tests); "
       "never raises it above what cpuid reports"},
  };
  return vars;
}

std::optional<std::string> get(const std::string& name) {
  const auto& vars = known_variables();
  const bool declared =
      std::any_of(vars.begin(), vars.end(), [&](const Variable& v) { return name == v.name; });
  OASR_CHECK(declared, kInternal, "environment variable ", name,
             " is read but not declared in core/env.cc");
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string get_string(const std::string& name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

bool get_bool(const std::string& name, bool fallback) {
  auto value = get(name);
  if (!value || value->empty()) return fallback;
  std::string v = *value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  OASR_THROW(kInvalidArgument, "environment variable ", name, "='", *value,
             "' is not a boolean; use 1/0, true/false, yes/no or on/off");
}

std::string get_choice(const std::string& name, const std::vector<std::string>& choices,
                       const std::string& fallback) {
  auto value = get(name);
  if (!value || value->empty()) return fallback;
  if (std::find(choices.begin(), choices.end(), *value) != choices.end()) return *value;
  std::string accepted;
  for (const auto& c : choices) accepted += (accepted.empty() ? "" : "|") + c;
  OASR_THROW(kInvalidArgument, "environment variable ", name, "='", *value, "' is not one of ",
             accepted);
}

bool quant_fusion_enabled() {
  return get_bool("OASR_QUANT_FUSION", true);
}

bool quant_gemv_enabled() {
  return get_bool("OASR_QUANT_GEMV", true);
}

bool fused_attention_enabled() {
  return get_bool("OASR_FUSED_ATTENTION", true);
}

bool cuda_graphs_enabled() {
  return get_bool("OASR_CUDA_GRAPHS", true);
}

void check_switches() {
  quant_fusion_enabled();
  quant_gemv_enabled();
  fused_attention_enabled();
  cuda_graphs_enabled();
}

}  // namespace oasr::env
