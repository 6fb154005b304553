// QuantLayout: what an architecture declares about its own structure
// (its quantization_layout(); spec "SmoothQuant" and "Fewer quantize
// launches"). Data only -- no code path of the engine branches on an
// architecture:
//   - the layers kept full precision when layers are selected by kind;
//   - SmoothGroups: GEMMs that share one input X, and where the matching
//     1/s of a SmoothQuant scale s is absorbed (the fold);
//   - GemmChains: a producer GEMM whose output is the consumer GEMM's input,
//     so the producer's epilogue can emit the consumer's 8-bit input;
//   - the full-precision GEMMs that must run batch-invariant kernels when
//     the model is quantized (spec "Numerics").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace oasr::quant {

// Where X / s goes (spec "SmoothQuant", the fold table).
enum class SmoothFold {
  // LayerNorm gamma /= s, beta /= s. Valid when only commuting ops (zero
  // mask, zero pad, a same-domain cache concatenation) sit between the norm
  // and its GEMMs and the norm's output feeds nothing else.
  kNormAffine,
  // The producing V projection's output rows (weight rows and bias) /= s:
  // attention is linear in V per channel, so the attention output reaching
  // linear_out carries 1/s per channel.
  kVToO,
  // The previous GEMM's output rows and bias /= s; the activation between
  // them must be positively homogeneous (ReLU).
  kProducerRows,
  // Nothing upstream changes: the consumer stores smooth_inv = 1/s and its
  // quantize step applies it. Always valid.
  kRuntime,
};
std::string_view to_string(SmoothFold fold);  // norm_affine, v_to_o, producer_rows, runtime

struct SmoothGroup {
  SmoothFold fold = SmoothFold::kRuntime;
  // The module that absorbs 1/s: the LayerNorm (norm_affine), the V
  // projection (v_to_o) or the producer GEMM (producer_rows); empty for
  // runtime.
  std::string producer;
  // The GEMMs reading X (module paths); one s is shared by all of them.
  std::vector<std::string> consumers;
  // The producer (a pre-norm) may emit the consumers' per-token 8-bit input
  // itself (layer_norm_quant / add_layer_norm_residual_quant), armed when
  // every consumer is quantized per token, without a runtime smoother, in
  // one format.
  bool fuse_output_quant = false;
};

// producer's output is consumer's input (through the producer's activation).
struct GemmChain {
  std::string producer;
  std::string consumer;
};

struct QuantLayout {
  struct Kept {
    std::string glob;    // module-path glob
    std::string reason;  // why it stays full precision
  };
  std::string architecture;               // for messages ("U2++ Conformer")
  std::vector<Kept> keep_full_precision;  // skipped when selected by kind
  bool has_ar_kv_cache = false;           // an autoregressive decoder KV cache exists
  // Empty: the architecture declares no smoothing layout, so SmoothQuant
  // refuses it by name (online round-to-nearest still serves it).
  std::vector<SmoothGroup> smooth_groups;
  std::vector<GemmChain> gemm_chains;
  // Full-precision GEMMs (module paths) pinned to batch-invariant kernels
  // when the model is quantized.
  std::vector<std::string> batch_invariant;

  bool declares_smoothing() const { return !smooth_groups.empty(); }
  // The group whose consumers include `path`, or nullptr.
  const SmoothGroup* group_of(const std::string& path) const;
  // The chain whose consumer (or producer) is `path`, or nullptr.
  const GemmChain* chain_into(const std::string& consumer) const;
  const GemmChain* chain_from(const std::string& producer) const;
};

}  // namespace oasr::quant
