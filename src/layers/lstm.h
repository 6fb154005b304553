// A stacked LSTM stepped one input at a time (torch.nn.LSTM with
// batch_first=False, no projection, eval mode), under PyTorch's parameter
// names weight_ih_l{k} [4H, in], weight_hh_l{k} [4H, H], bias_ih_l{k} and
// bias_hh_l{k} [4H], gates in PyTorch's order (input, forget, cell, output):
//   gates = x W_ih^T + b_ih + h W_hh^T + b_hh
//   c' = sigmoid(f) * c + sigmoid(i) * tanh(g),  h' = sigmoid(o) * tanh(c')
// Transducer predictors step it once per emitted token, so its GEMMs run the
// row-dot algorithm: a row's result does not depend on the other rows.
#pragma once

#include <cstdint>
#include <vector>

#include "layers/module.h"

namespace oasr::layers {

class Lstm : public Module {
 public:
  Lstm(int64_t input_size, int64_t hidden_size, int64_t num_layers);

  // Per layer: h and c, each [B, H].
  struct State {
    std::vector<Tensor> h;
    std::vector<Tensor> c;
  };
  // Zeros for `batch` rows on the parameters' device and dtype (PyTorch's
  // initial state when none is given).
  State zero_state(int64_t batch) const;

  // x [B, input_size] -> the last layer's h' [B, H]; `state` is advanced.
  Tensor step(const Tensor& x, State& state) const;

  int64_t hidden_size() const { return hidden_size_; }
  int64_t num_layers() const { return num_layers_; }

 private:
  int64_t input_size_;
  int64_t hidden_size_;
  int64_t num_layers_;
};

}  // namespace oasr::layers
