// From semantics to storage (materialize): a QuantScheme
// lowered to the physical spec a layer allocates, for one GPU generation.
// The only place in quant/ that reads the GPU generation (sm; 0 = CPU).
#pragma once

#include <string>

#include "core/dtype.h"
#include "quant/format.h"

namespace oasr::quant {

enum class PhysicalKind { kFullPrecision, kInt8, kFp8, kNvfp4 };
enum class Nvfp4ScaleLayout { kLinear, k128x4 };

struct PhysicalSpec {
  PhysicalKind kind = PhysicalKind::kFullPrecision;
  // The kernel-selection key: "full_precision", "int8_per_channel",
  // "fp8_per_channel", "fp8_per_tensor", "fp8_block_128_128",
  // "nvfp4_block_16_linear", "nvfp4_block_16_128x4".
  std::string spec_id;
  // The stored weight's element type: the served float type for full
  // precision (a hint only), int8, float8_e4m3fn, or uint8 (two E2M1 per byte).
  DType weight_dtype = DType::kF32;
  Granularity weight_granularity = Granularity::kPerTensor;
  int64_t block_n = 0, block_k = 0;  // block granularity
  Nvfp4ScaleLayout nvfp4_scale_layout = Nvfp4ScaleLayout::kLinear;
  bool needs_activation_quant = false;
};

// sm: the compute capability as 10 * major + minor (90 for H100), 0 for the CPU.
// NVFP4 takes the 128x4 scale layout from sm 100 (Blackwell) on, the
// linear layout below. A weight dtype without a physical spec is refused.
PhysicalSpec materialize(const QuantScheme& scheme, int sm);

std::string_view to_string(Nvfp4ScaleLayout layout);  // "linear", "128x4"

}  // namespace oasr::quant
