// QuantizedActivation: an 8-bit activation with its fp32 scales, travelling
// from the quantize step (or a fused producer) to the scaled GEMM that reads
// it. Code between them may read its shape and nothing else.
#pragma once

#include "core/tensor.h"
#include "quant/format.h"

namespace oasr::quant {

struct QuantizedActivation {
  Tensor data;                    // int8 or float8_e4m3fn [M, K], contiguous
  Tensor scale;                   // fp32 [M]: one per row (a static scale is repeated per row)
  QDType format = QDType::kBf16;  // set by whoever quantizes (kBf16: not yet)

  const Shape& shape() const { return data.shape(); }
};

}  // namespace oasr::quant
