#include "models/materialize.h"

#include "core/error.h"
#include "models/native_checkpoint.h"

namespace oasr::models {

quant::QuantLayout u2pp_quantization_layout() {
  quant::QuantLayout layout;
  layout.architecture = "U2++ Conformer";
  layout.keep_full_precision = {
      {"encoder.embed.out.*",
       "the subsampling's output Linear (pinned to batch-invariant kernels)"},
      {"encoder.embed.linear",
       "the subsampling's output Linear (pinned to batch-invariant kernels)"},
      {"*.linear_pos", "the relative-position projection (pinned to batch-invariant kernels)"},
      {"ctc.*", "the CTC head"},
      {"decoder.*output_layer", "the decoder's output layer"},
  };
  layout.has_ar_kv_cache = false;
  return layout;
}

MaterializedU2pp materialize_u2pp_model(const ModelSource& source,
                                        const quant::QuantizationConfig& quantization,
                                        const MaterializeOptions& options) {
  OASR_CHECK(source.weights != nullptr, kInvalidArgument, "load: the source from ",
             source.dir.string(), " holds no weights");
  quantization.validate();
  const quant::QuantLayout layout = u2pp_quantization_layout();
  MaterializedU2pp out;
  out.model = std::make_unique<U2ppModel>(source.config.model);
  U2ppModel& model = *out.model;
  if (!source.quantization.is_null()) {
    const std::string what = (source.dir / kNativeConfigName).string();
    const quant::QuantizationSpec checkpoint_spec =
        quant::QuantizationSpec::from_json(source.quantization, what);
    out.spec = quant::resolve_checkpoint_spec(checkpoint_spec, quantization, source.dir.string());
    OASR_CHECK(out.spec.kv_cache.empty() || layout.has_ar_kv_cache, kUnsupported,
               "kv_cache=", out.spec.kv_cache, ": the ", layout.architecture,
               " has no autoregressive decoder KV cache to store in fp8; drop kv_cache");
    quant::prepare_quantized_slots(model, out.spec);
    model.load(*source.weights);
  } else {
    quant::SpecOptions spec_options;
    spec_options.online = true;
    spec_options.recipe = options.recipe;
    out.spec = quant::spec_from_config(quantization, model, layout, spec_options);
    model.load(*source.weights);
    quant::quantize_model_online(model, out.spec);
  }
  model.to(options.dtype);
  model.to(options.device);
  if (options.bind) {
    quant::BindOptions bind;
    bind.device = options.device;
    bind.backend = options.scaled_mm_backend;
    quant::bind_quantization(model, bind);
  }
  return out;
}

}  // namespace oasr::models
