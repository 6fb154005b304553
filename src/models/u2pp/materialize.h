// The one load sequence (spec "Load order") for every entry point -- the
// engine, oasr convert, oasr quantize:
//   1. build the model from the checkpoint's config;
//   2a. a quantized native checkpoint (format_version 2): its spec is
//       authoritative (a request may only repeat its scheme); each quantized
//       layer's slots are created before the strict, dtype-checked load;
//   2b. otherwise the full-precision weights load, then each layer the
//       requested spec selects quantizes its own weight on the host (online);
//   3. the dtype cast (quantized tensors keep theirs), the device move, and
//      lane binding: each quantized layer picks its kernel once.
#pragma once

#include <memory>
#include <string>

#include "models/materialize_options.h"
#include "models/u2pp/model_source.h"
#include "models/u2pp/u2pp_model.h"
#include "quant/apply.h"
#include "quant/spec.h"

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
