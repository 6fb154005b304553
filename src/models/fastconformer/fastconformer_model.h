// A NeMo FastConformer CTC model (EncDecCTCModelBPE) with NeMo's state-dict
// names: "encoder." (fastconformer_encoder.h) and "decoder.decoder_layers.0"
// (ConvASRDecoder: a kernel-1 Conv1d from d_model to vocabulary + blank,
// then log_softmax). Its quantization layout and load sequence.
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
#include "quant/layout.h"
#include "quant/spec.h"

namespace oasr::models {

inline constexpr const char* kFastConformerArchitectureName = "nemo_fastconformer";

class FastConformerCtcModel : public Module {
 public:
  explicit FastConformerCtcModel(const FastConformerConfig& config);

  struct Output {
    Tensor log_probs;              // float32 [B, T', vocabulary + 1] on the host
    std::vector<int64_t> lengths;  // valid frames per row
  };
  // feats float32 [B, T, F] (NeMo's features transposed to frames-first),
  // rows valid up to lengths[b].
  Output forward(const Tensor& feats, std::span<const int64_t> lengths) const;

  const FastConformerConfig& config() const { return config_; }
  const FastConformerEncoder& encoder() const { return *encoder_; }

 private:
  FastConformerConfig config_;
  std::shared_ptr<FastConformerEncoder> encoder_;
  std::shared_ptr<layers::PointwiseConv1d> ctc_head_;
};

// What stays full precision (spec, "What stays full precision": Nemotron's
// subsampling and relative position projection) and the feed-forward GEMM
// chains. No smoothing layout yet, so SmoothQuant refuses it by name.
quant::QuantLayout fastconformer_quantization_layout(const FastConformerConfig& config);

struct MaterializedFastConformer {
  std::unique_ptr<FastConformerCtcModel> model;
  quant::QuantizationSpec spec;
};

// The model built from the source's config, then the shared load sequence.
MaterializedFastConformer materialize_fastconformer_model(
    const NemoSource& source, const quant::QuantizationConfig& quantization,
    const engine::MaterializeOptions& options);

}  // namespace oasr::models
