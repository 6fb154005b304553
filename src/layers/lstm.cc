#include "layers/lstm.h"

#include <string>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"

namespace oasr::layers {

Lstm::Lstm(int64_t input_size, int64_t hidden_size, int64_t num_layers)
    : Module("LSTM"), input_size_(input_size), hidden_size_(hidden_size), num_layers_(num_layers) {
  OASR_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0, kInvalidArgument,
             "LSTM sizes must be positive: input ", input_size, ", hidden ", hidden_size,
             ", layers ", num_layers);
  for (int64_t k = 0; k < num_layers; ++k) {
    const std::string l = "_l" + std::to_string(k);
    register_parameter("weight_ih" + l, {4 * hidden_size, k == 0 ? input_size : hidden_size});
    register_parameter("weight_hh" + l, {4 * hidden_size, hidden_size});
    register_parameter("bias_ih" + l, {4 * hidden_size});
    register_parameter("bias_hh" + l, {4 * hidden_size});
  }
}

Lstm::State Lstm::zero_state(int64_t batch) const {
  const Tensor& w = param("weight_hh_l0");
  State state;
  for (int64_t k = 0; k < num_layers_; ++k) {
    state.h.push_back(Tensor::zeros({batch, hidden_size_}, w.dtype(), w.device()));
    state.c.push_back(Tensor::zeros({batch, hidden_size_}, w.dtype(), w.device()));
  }
  return state;
}

Tensor Lstm::step(const Tensor& x, State& state) const {
  OASR_CHECK(x.dim() == 2 && x.size(1) == input_size_, kInvalidArgument, path(),
             ": the LSTM step takes [B, ", input_size_, "], got ", shape_str(x.shape()));
  OASR_CHECK(static_cast<int64_t>(state.h.size()) == num_layers_ &&
                 static_cast<int64_t>(state.c.size()) == num_layers_,
             kInvalidArgument, path(), ": the state holds ", state.h.size(), " layers, not ",
             num_layers_);
  const int64_t hidden = hidden_size_;
  const auto gate = [hidden](const Tensor& gates, int64_t index, Activation activation) {
    return ops::activation(gates.narrow(1, index * hidden, hidden).contiguous(), activation);
  };
  Tensor input = x;
  for (int64_t k = 0; k < num_layers_; ++k) {
    const std::string l = "_l" + std::to_string(k);
    const Tensor gates = ops::add(ops::linear(input, param("weight_ih" + l), param("bias_ih" + l),
                                              ops::LinearAlgorithm::kRowDot),
                                  ops::linear(state.h[k], param("weight_hh" + l),
                                              param("bias_hh" + l), ops::LinearAlgorithm::kRowDot));
    const Tensor c =
        ops::add(ops::mul(gate(gates, 1, Activation::kSigmoid), state.c[k]),
                 ops::mul(gate(gates, 0, Activation::kSigmoid), gate(gates, 2, Activation::kTanh)));
    const Tensor h =
        ops::mul(gate(gates, 3, Activation::kSigmoid), ops::activation(c, Activation::kTanh));
    state.c[k] = c;
    state.h[k] = h;
    input = h;
  }
  return input;
}

}  // namespace oasr::layers
