// Link derivation (spec "Fewer quantize launches"): after bind_quantization,
// arms the fused quantize producers a model's QuantLayout declares and its
// quantization allows, and records who quantizes each layer's input.
//
//   norm -> GEMM: a SmoothGroup with fuse_output_quant whose producer is a
//     LayerNorm, armed when every consumer is quantized and bound, takes a
//     per-token input without a runtime smoother, and all share one format.
//   GEMM -> GEMM: a GemmChain, armed when the consumer has a static input
//     scale and both layers are quantized (and bound) in the same format.
//
// A link is armed only where the fused producers have a body for the
// model's device (fused_producers_available); OASR_QUANT_FUSION=0 or
// LinkOptions::enabled = false disarms every link. Either way a model
// returns the same bits: the fused producers are bit-identical to the
// unfused pairs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layers/module.h"
#include "quant/layout.h"
#include "quant/report.h"

namespace oasr::quant {

struct LinkOptions {
  // Unset: OASR_QUANT_FUSION (default on). false disarms every link (A/B).
  std::optional<bool> enabled;
};

struct LinkSummary {
  bool enabled = true;      // fusion was allowed (options / OASR_QUANT_FUSION)
  int64_t norm_links = 0;   // pre-norms armed to emit 8-bit output
  int64_t chain_links = 0;  // GEMM chains armed (scaled_mm_quant)
  // Declared links left disarmed although fusion was allowed: "<producer>: why".
  std::vector<std::string> not_armed;
  // Per encoder block, in block order (see standalone_quantize_launches_per_block).
  std::vector<int64_t> standalone_quantize_launches_per_block;
};

// Disarms every link of `model`, then arms the ones `layout` declares and
// the layers' bound methods allow (see above). Idempotent; call again after
// rebinding. Layers whose input no producer emits keep "self (...)".
LinkSummary link_quantization(Module& model, const QuantLayout& layout,
                              const LinkOptions& options = {});

// The standalone quantize launches of each encoder block ("encoder.<...>.N."
// module paths), counted from the model's armed links: a quantized layer fed
// by an armed producer launches none; the layers quantizing their own input
// launch one per distinct quantize -- consumers of one SmoothGroup (GEMMs
// reading the same X, e.g. linear_q / linear_k / linear_v) quantizing it by
// the same rule count once. Empty when the model has no quantized encoder block.
std::vector<int64_t> standalone_quantize_launches_per_block(const Module& model,
                                                            const QuantLayout& layout);

// Fills info.standalone_quantize_launches_per_block from the model's links.
void add_link_report(QuantizationInfo& info, const Module& model, const QuantLayout& layout);

}  // namespace oasr::quant
