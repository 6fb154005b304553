// U2++'s quantization layout and its materialize(): the model built from
// the checkpoint's config, then the shared load sequence
// (models/load_sequence.h) for every entry point -- the engine, oasr
// convert, oasr quantize.
#pragma once

#include <memory>
#include <string>

#include "models/load_sequence.h"
#include "models/u2pp/model_source.h"
#include "models/u2pp/u2pp_model.h"
#include "quant/spec.h"
#include "quantize/apply.h"

namespace oasr::models {

// What the U2++ Conformer keeps full precision (spec "What stays full
// precision"): the subsampling's output Linear, linear_pos, the CTC head and
// the decoder's output layer. It has no autoregressive KV cache. Its smooth
// groups and GEMM chains reproduce the spec's worked example for this
// config's blocks (encoder and rescoring decoder).
quant::QuantLayout u2pp_quantization_layout(const U2ppConfig& config);

struct MaterializedU2pp {
  std::unique_ptr<U2ppModel> model;
  quant::QuantizationSpec spec;  // empty when served full precision
};

MaterializedU2pp materialize_u2pp_model(const ModelSource& source,
                                        const quant::QuantizationConfig& quantization = {},
                                        const MaterializeOptions& options = {});

}  // namespace oasr::models
