#include "quant/physical.h"

#include "core/error.h"

namespace oasr::quant {

std::string_view to_string(Nvfp4ScaleLayout layout) {
  return layout == Nvfp4ScaleLayout::k128x4 ? "128x4" : "linear";
}

PhysicalSpec materialize(const QuantScheme& scheme, int sm) {
  const TensorQuant& w = scheme.weight;
  PhysicalSpec spec;
  spec.weight_granularity = w.granularity;
  spec.block_n = w.block_n;
  spec.block_k = w.block_k;
  spec.needs_activation_quant = scheme.input.has_value();
  switch (w.dtype) {
    case QDType::kBf16:
      spec.kind = PhysicalKind::kFullPrecision;
      spec.spec_id = "full_precision";
      spec.weight_dtype = DType::kBF16;
      spec.needs_activation_quant = false;
      return spec;
    case QDType::kInt8:
      OASR_CHECK(w.granularity == Granularity::kPerChannel, kUnsupported,
                 "materialize: int8 weights have a per-channel physical spec only, not ",
                 to_string(w.granularity), " (scheme '", scheme.name, "')");
      spec.kind = PhysicalKind::kInt8;
      spec.spec_id = "int8_per_channel";
      spec.weight_dtype = DType::kI8;
      return spec;
    case QDType::kFp8E4M3:
      spec.kind = PhysicalKind::kFp8;
      spec.weight_dtype = DType::kF8E4M3;
      if (w.granularity == Granularity::kBlock) {
        spec.spec_id = "fp8_block_" + std::to_string(w.block_n) + "_" + std::to_string(w.block_k);
      } else if (w.granularity == Granularity::kPerChannel ||
                 w.granularity == Granularity::kPerTensor) {
        spec.spec_id = std::string("fp8_") + std::string(to_string(w.granularity));
      } else {
        OASR_THROW(kUnsupported, "materialize: fp8 weights cannot have ", to_string(w.granularity),
                   " scales (scheme '", scheme.name, "')");
      }
      return spec;
    case QDType::kNvfp4:
      spec.kind = PhysicalKind::kNvfp4;
      spec.weight_dtype = DType::kU8;
      spec.block_n = 1;
      spec.block_k = 16;
      spec.nvfp4_scale_layout = sm >= 100 ? Nvfp4ScaleLayout::k128x4 : Nvfp4ScaleLayout::kLinear;
      spec.spec_id =
          std::string("nvfp4_block_16_") + std::string(to_string(spec.nvfp4_scale_layout));
      return spec;
    case QDType::kInt4:
      break;
  }
  OASR_THROW(kUnsupported, "materialize: no physical spec for ", to_string(w.dtype),
             " weights (scheme '", scheme.name, "')");
}

}  // namespace oasr::quant
