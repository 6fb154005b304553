// The fused quantize producers (spec "Fewer quantize launches"): a pre-norm
// that emits its consumers' per-token 8-bit input itself, in the same pass
// as the (residual add and) LayerNorm. The GEMM-chain producer is
// QuantMethod::scaled_mm_quant. Each is bit-identical to the unfused pair
// (the norm, then quantize_per_token); quant/kernels/cpu/fused_producers.h
// holds the CPU reference bodies the GPU kernels match.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "quant/format.h"
#include "quant/quantized_activation.h"

namespace oasr::quant {

// Whether the fused producers have a body on `device`: the CPU always, CUDA
// in CUDA builds (quant/kernels/cuda/quantize_cuda.h).
bool fused_producers_available(Device device);

// q, scale = quantize_per_token(layer_norm(x, weight, bias, eps)) in
// `format`. x [..., D] float32 (the CPU's served dtype; a CUDA x may also be
// float16 / bfloat16, with weight and bias of its dtype); the result is
// [rows, D] on x's device with one fp32 scale per row.
QuantizedActivation layer_norm_quant(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                     float eps, QDType format);

struct AddLayerNormQuantResult {
  Tensor sum;                     // residual + alpha * x: the new residual stream, x's dtype
  QuantizedActivation quantized;  // quantize_per_token(layer_norm(sum))
};
// The residual add, the LayerNorm and the per-token quantize in one pass;
// alpha = 1 is ops::add_layer_norm, 0.5 the macaron half-step.
AddLayerNormQuantResult add_layer_norm_residual_quant(const Tensor& x, const Tensor& residual,
                                                      float alpha, const Tensor& weight,
                                                      const Tensor& bias, float eps, QDType format);

// Process-wide counts of fused-producer calls, so a test (or a benchmark)
// can attribute a forward to the fused path rather than assume it.
enum class FusedProducer { kLayerNormQuant, kAddLayerNormResidualQuant, kScaledMMQuant };
struct FusedProducerCalls {
  int64_t layer_norm_quant = 0;
  int64_t add_layer_norm_residual_quant = 0;
  int64_t scaled_mm_quant = 0;
  int64_t total() const {
    return layer_norm_quant + add_layer_norm_residual_quant + scaled_mm_quant;
  }
};
FusedProducerCalls fused_producer_calls();
void note_fused_producer_call(FusedProducer producer);

}  // namespace oasr::quant
