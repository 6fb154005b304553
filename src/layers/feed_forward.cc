#include "layers/feed_forward.h"

#include "core/error.h"

namespace oasr::layers {

FeedForward::FeedForward(Module& owner, const FeedForwardSpec& spec) {
  OASR_CHECK(spec.dim > 0 && spec.hidden > 0 && !spec.up_name.empty() && !spec.down_name.empty(),
             kInternal, owner.type_name(), ": incomplete feed-forward spec");
  up_ = owner.register_module(spec.up_name, std::make_shared<LinearActivation>(
                                                spec.dim, spec.hidden, spec.activation, spec.bias));
  down_ = owner.register_module(spec.down_name,
                                std::make_shared<Linear>(spec.hidden, spec.dim, spec.bias));
}

Tensor FeedForward::forward(const GemmInput& x) const {
  OASR_CHECK(up_ != nullptr, kInternal, "FeedForward: used before construction");
  return down_->forward(up_->chain_forward(x));
}

void FeedForward::set_cpu_algorithm(ops::LinearAlgorithm algorithm) {
  up_->set_cpu_algorithm(algorithm);
  down_->set_cpu_algorithm(algorithm);
}

}  // namespace oasr::layers
