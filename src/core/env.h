// The one place oasr reads environment variables (DESIGN.md §1). Every
// variable the engine understands is declared here with its meaning, so a
// reader can find all of them in one file.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace oasr::env {

struct Variable {
  const char* name;
  const char* meaning;
};

// All variables oasr reads (for `oasr --help-env` and docs).
const std::vector<Variable>& known_variables();

// Raw lookup; returns nullopt when unset. Refuses (kInternal) a name that is
// not declared in known_variables(), so no stray getenv creeps in.
std::optional<std::string> get(const std::string& name);

// Typed helpers. A set-but-malformed value is an oasr::Error naming the
// variable and the accepted values.
std::string get_string(const std::string& name, const std::string& fallback);
bool get_bool(const std::string& name, bool fallback);
std::string get_choice(const std::string& name, const std::vector<std::string>& choices,
                       const std::string& fallback);

// OASR_QUANT_FUSION (default on): whether link_quantization may arm the
// fused quantize producers (norm -> GEMM, GEMM -> GEMM). 0 disarms them all,
// for A/B attribution; the arithmetic is bit-identical either way.
bool quant_fusion_enabled();

// OASR_QUANT_GEMV (default on): whether an int8 GEMM of at most 16 rows
// runs as the GEMV (quant/kernels/cuda/scaled_mm_cuda.h), which also folds
// the input's quantize in. 0 runs the tiled kernel after a separate quantize,
// for A/B timing; the bits are the same either way.
bool quant_gemv_enabled();

// OASR_FUSED_ATTENTION (default on): whether the CUDA encoder's relative-
// position self-attention (ops/attention.h) and an autoregressive decoder's
// cached self- and cross-attention (ops/cached_attention.h) run as one
// kernel each. 0 runs the unfused products, softmax and head copies, for A/B
// timing and accuracy.
bool fused_attention_enabled();

// OASR_CUDA_GRAPHS (default on): whether the CUDA encoder records a CUDA
// graph per input shape and replays it (core/device_graph_cache.h). 0 runs
// every call eagerly, for A/B timing; the bits are the same either way.
bool cuda_graphs_enabled();

// Reads every boolean switch above once, refusing a malformed value by its
// variable's name. A front end calls it at start-up (ASREngine does), so a
// typo is reported then, not as the first utterance's failure.
void check_switches();

}  // namespace oasr::env
