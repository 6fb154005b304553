// A NeMo FastConformer model with NeMo's state-dict names: "encoder."
// (fastconformer_encoder.h) and either the CTC head of EncDecCTCModelBPE
// ("decoder.decoder_layers.0", ConvASRDecoder: a kernel-1 Conv1d from
// d_model to vocabulary + blank, then log_softmax) or the transducer head of
// EncDecRNNTBPEModel ("decoder." predictor and "joint.", transducer_head.h),
// RNN-T or TDT, and for a hybrid (EncDecHybridRNNTCTCBPEModel) also
// aux_ctc's CTC head ("ctc_decoder.decoder_layers.0"). Its quantization
// layout and load sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "asr/materialize_options.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "models/fastconformer/fastconformer_config.h"
#include "models/fastconformer/fastconformer_encoder.h"
#include "models/fastconformer/nemo_source.h"
#include "models/fastconformer/transducer_head.h"
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

inline constexpr const char* kFastConformerArchitectureName = "nemo_fastconformer";

class FastConformerModel : public Module {
 public:
  explicit FastConformerModel(const FastConformerConfig& config);

  // feats float32 [B, T, F] (NeMo's features transposed to frames-first),
  // rows valid up to lengths[b].
  FastConformerEncoder::Output encode(const Tensor& feats, std::span<const int64_t> lengths) const {
    return encoder_->forward(feats, lengths);
  }
  // CTC models and hybrids: the CTC head's log-probabilities, float32 [B, T', vocabulary + 1]
  // on the host.
  Tensor ctc_log_probs(const Tensor& encoded) const;

  struct Output {
    Tensor log_probs;              // float32 [B, T', vocabulary + 1] on the host
    std::vector<int64_t> lengths;  // valid frames per row
  };
  // CTC models and hybrids: encode, then the CTC head.
  Output forward(const Tensor& feats, std::span<const int64_t> lengths) const;

  const FastConformerConfig& config() const { return config_; }
  const FastConformerEncoder& encoder() const { return *encoder_; }
  // Transducer models (config().is_transducer()).
  const RnntPredictor& predictor() const;
  const RnntJoint& joint() const;

 private:
  FastConformerConfig config_;
  std::shared_ptr<FastConformerEncoder> encoder_;
  std::shared_ptr<layers::PointwiseConv1d> ctc_head_;  // CTC, hybrid
  std::shared_ptr<RnntPredictor> predictor_;           // RNN-T, TDT
  std::shared_ptr<RnntJoint> joint_;                   // RNN-T, TDT
};

// What stays full precision (spec, "What stays full precision": Nemotron's
// subsampling, relative position projection, the predictor and the joint;
// the joiner's decoder_proj / output_linear refuse quantization themselves)
// and the feed-forward GEMM chains. No smoothing layout yet, so SmoothQuant
// refuses it by name.
quant::QuantLayout fastconformer_quantization_layout(const FastConformerConfig& config);

struct MaterializedFastConformer {
  std::unique_ptr<FastConformerModel> model;
  quant::QuantizationSpec spec;
};

// The model built from the source's config, then the shared load sequence.
MaterializedFastConformer materialize_fastconformer_model(
    const NemoSource& source, const quant::QuantizationConfig& quantization,
    const engine::MaterializeOptions& options);

}  // namespace oasr::models
