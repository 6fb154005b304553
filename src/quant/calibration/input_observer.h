// The calibration seam: a quantizable layer with an observer attached hands
// its input to it before computing (spec "Calibration": observers on GEMM and
// conv inputs at the layer seam). The layer's own result is unchanged.
#pragma once

#include <string>

#include "core/tensor.h"
#include "quant/layer_kind.h"

namespace oasr::quant {

class InputObserver {
 public:
  virtual ~InputObserver() = default;
  // x is the layer's input as its forward receives it: [..., K] channels
  // last for a linear / pointwise conv, [B, C, H, W] / [B, C, T] for a
  // Conv2d / Conv1d; any dtype and device.
  virtual void observe(const std::string& path, LayerKind kind, const Tensor& x) = 0;
};

}  // namespace oasr::quant
