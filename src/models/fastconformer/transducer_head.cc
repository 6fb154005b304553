#include "models/fastconformer/transducer_head.h"

#include <string>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/write_slots.h"

namespace oasr::models {
namespace {

// The spec: the joiner's decoder_proj / output_linear are read directly by a
// fused kernel, so they are never quantized and a spec naming one is refused.
constexpr const char* kJoinerRefusal =
    "the transducer joiner's decoder_proj / output_linear are not quantizable (a fused joint "
    "reads their weights directly)";

}  // namespace

RnntPredictor::RnntPredictor(const FastConformerConfig& config) : Module("RNNTDecoder") {
  const FastConformerTransducerConfig& t = config.transducer;
  auto prediction = register_module("prediction", std::make_shared<Module>("ModuleDict"));
  embed_ = prediction->register_module(
      "embed", std::make_shared<layers::Embedding>(config.blank_id() + 1, t.pred_hidden));
  auto dec_rnn = prediction->register_module("dec_rnn", std::make_shared<Module>("LSTMDropout"));
  lstm_ = dec_rnn->register_module(
      "lstm", std::make_shared<layers::Lstm>(t.pred_hidden, t.pred_hidden, t.pred_rnn_layers));
}

Tensor RnntPredictor::step(const Tensor& labels, layers::Lstm::State& state) const {
  return lstm_->step(embed_->forward(labels), state);
}

RnntJoint::RnntJoint(const FastConformerConfig& config)
    : Module("RNNTJoint"),
      activation_(config.transducer.activation),
      classes_(config.blank_id() + 1 + static_cast<int64_t>(config.transducer.durations.size())) {
  const FastConformerTransducerConfig& t = config.transducer;
  enc_ = register_module(
      "enc", std::make_shared<layers::Linear>(config.encoder.d_model, t.joint_hidden, true));
  pred_ = register_module("pred",
                          std::make_shared<layers::Linear>(t.pred_hidden, t.joint_hidden, true));
  auto joint_net = register_module("joint_net", std::make_shared<Module>("Sequential"));
  output_ = joint_net->register_module(
      t.output_linear_index(), std::make_shared<layers::Linear>(t.joint_hidden, classes_, true));
  // Both run once per search step on a few rows.
  pred_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  output_->set_cpu_algorithm(ops::LinearAlgorithm::kRowDot);
  pred_->refuse_quantization(kJoinerRefusal);
  output_->refuse_quantization(kJoinerRefusal);
}

Tensor RnntJoint::project_encoder(const Tensor& encoded) const {
  return enc_->forward(encoded);
}

Tensor RnntJoint::project_prednet(const Tensor& g) const {
  return pred_->forward(g);
}

Tensor RnntJoint::joint_after_projection(const Tensor& f, const Tensor& g) const {
  return output_->forward(ops::activation(ops::add(f, g), activation_));
}

TransducerBatchSteps::TransducerBatchSteps(const RnntPredictor& predictor, const RnntJoint& joint,
                                           const Tensor& encoded, int64_t blank_id)
    : predictor_(predictor), joint_(joint), frames_(encoded.size(1)) {
  const int64_t batch = encoded.size(0);
  const Tensor projected = joint_.project_encoder(encoded);
  encoder_projected_ = projected.reshape({batch * frames_, projected.size(2)}).contiguous();
  // Every row starts from <SOS> (blank) and a zero LSTM state.
  state_ = predictor_.zero_state(batch);
  std::vector<int64_t> sos(static_cast<size_t>(batch), blank_id);
  predictor_projected_ = joint_.project_prednet(predictor_.step(ids(sos), state_)).contiguous();
}

Tensor TransducerBatchSteps::ids(std::span<const int64_t> values) const {
  Tensor host = Tensor::empty({static_cast<int64_t>(values.size())}, DType::kI64);
  std::copy(values.begin(), values.end(), host.data<int64_t>());
  return host.to(encoder_projected_.device());
}

Tensor TransducerBatchSteps::joint(std::span<const int64_t> rows, std::span<const int64_t> frames) {
  std::vector<int64_t> flat(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) flat[i] = rows[i] * frames_ + frames[i];
  const Tensor f = ops::embedding(ids(flat), encoder_projected_);
  const Tensor g = ops::embedding(ids(rows), predictor_projected_);
  return joint_.joint_after_projection(f, g).to(Device::cpu()).to(DType::kF32).contiguous();
}

void TransducerBatchSteps::predict(std::span<const int64_t> rows, std::span<const int64_t> labels) {
  const Tensor slots = ids(rows);
  layers::Lstm::State state;
  for (size_t k = 0; k < state_.h.size(); ++k) {
    state.h.push_back(ops::embedding(slots, state_.h[k]));
    state.c.push_back(ops::embedding(slots, state_.c[k]));
  }
  const Tensor g = joint_.project_prednet(predictor_.step(ids(labels), state));
  for (size_t k = 0; k < state_.h.size(); ++k) {
    ops::write_slots(state.h[k].contiguous(), state_.h[k], slots);
    ops::write_slots(state.c[k].contiguous(), state_.c[k], slots);
  }
  ops::write_slots(g.contiguous(), predictor_projected_, slots);
}

}  // namespace oasr::models
