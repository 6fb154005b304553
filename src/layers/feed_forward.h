// The position-wise feed-forward network down(act(up(x))), written once for
// every architecture (WeNet's PositionwiseFeedForward w_1 / w_2, Whisper's
// fc1 / fc2). Its two linears are registered on the module that owns it,
// under the upstream names, so the state-dict paths stay the upstream's:
// WeNet keeps them in a child module ("feed_forward.w_1"), Whisper directly
// on the layer ("fc1"). Quantization reaches both linears, and the up ->
// down pair is a GEMM chain the fused producers can arm (quant/layout.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/activations.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace oasr::layers {

struct FeedForwardSpec {
  int64_t dim = 0;     // model width
  int64_t hidden = 0;  // inner width
  Activation activation = Activation::kRelu;
  bool bias = true;     // both linears
  std::string up_name;  // state-dict names ("w_1", "fc1")
  std::string down_name;
};

class FeedForward {
 public:
  FeedForward() = default;
  // Registers the two linears on `owner`.
  FeedForward(Module& owner, const FeedForwardSpec& spec);

  // x: the served-dtype tensor or its pre-norm's 8-bit output. With the
  // up -> down chain armed, the hidden activation travels as 8-bit only.
  Tensor forward(const GemmInput& x) const;

  // Both linears on this CPU algorithm (a decoder step's few rows: row-dot).
  void set_cpu_algorithm(ops::LinearAlgorithm algorithm);

 private:
  std::shared_ptr<LinearActivation> up_;
  std::shared_ptr<Linear> down_;
};

}  // namespace oasr::layers
