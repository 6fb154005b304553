// NeMo's transducer head at inference, under NeMo's state-dict names:
// "decoder." (RNNTDecoder: prediction.embed, an Embedding of vocabulary +
// blank whose blank row is the <SOS> input, and prediction.dec_rnn.lstm, a
// stacked LSTM) and "joint." (RNNTJoint: enc and pred project the encoder and
// predictor outputs to joint_hidden, joint_net = activation [, Dropout],
// Linear to the classes: tokens, blank, then TDT's durations). And the
// batched steps decode/transducer_greedy.h drives over one padded batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/activations.h"
#include "decode/transducer_greedy.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/lstm.h"
#include "layers/module.h"
#include "models/fastconformer/fastconformer_config.h"

namespace oasr::models {

class RnntPredictor : public Module {
 public:
  RnntPredictor(const FastConformerConfig& config);
  // Embeds labels (int64 [n], blank = <SOS>) and steps the LSTM: [n, pred_hidden].
  Tensor step(const Tensor& labels, layers::Lstm::State& state) const;
  layers::Lstm::State zero_state(int64_t batch) const { return lstm_->zero_state(batch); }
  int64_t num_layers() const { return lstm_->num_layers(); }

 private:
  std::shared_ptr<layers::Embedding> embed_;
  std::shared_ptr<layers::Lstm> lstm_;
};

class RnntJoint : public Module {
 public:
  RnntJoint(const FastConformerConfig& config);
  Tensor project_encoder(const Tensor& encoded) const;  // [..., d_model] -> [..., joint_hidden]
  Tensor project_prednet(const Tensor& g) const;        // [..., pred_hidden] -> [..., joint_hidden]
  // f, g [n, joint_hidden] -> [n, classes]: output_linear(act(f + g)).
  Tensor joint_after_projection(const Tensor& f, const Tensor& g) const;
  int64_t classes() const { return classes_; }

 private:
  Activation activation_;
  int64_t classes_;
  std::shared_ptr<layers::Linear> enc_;
  std::shared_ptr<layers::Linear> pred_;
  std::shared_ptr<layers::Linear> output_;
};

// One padded batch under greedy search: the encoder output projected once,
// and per row the predictor's LSTM state and projected output, gathered and
// scattered by row so that a step touches only the rows it names.
class TransducerBatchSteps final : public decode::TransducerSteps {
 public:
  // encoded [B, T, d_model] in the served dtype and device.
  TransducerBatchSteps(const RnntPredictor& predictor, const RnntJoint& joint,
                       const Tensor& encoded, int64_t blank_id);
  Tensor joint(std::span<const int64_t> rows, std::span<const int64_t> frames) override;
  void predict(std::span<const int64_t> rows, std::span<const int64_t> labels) override;

 private:
  Tensor ids(std::span<const int64_t> values) const;  // int64 [n] on the batch's device

  const RnntPredictor& predictor_;
  const RnntJoint& joint_;
  int64_t frames_;
  Tensor encoder_projected_;    // [B * T, joint_hidden]
  Tensor predictor_projected_;  // [B, joint_hidden]
  layers::Lstm::State state_;   // per layer [B, pred_hidden]
};

}  // namespace oasr::models
