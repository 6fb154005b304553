#include "models/load_sequence.h"

#include <set>
#include <string>

#include "core/error.h"
#include "models/native_dir.h"
#include "quantize/apply.h"
#include "quantize/apply_links.h"

namespace oasr::models {
namespace {

// Module::load_state_dict, its refusal naming the directory and the likely
// cause: weights and config from different models (or a truncated export).
void load_weights(Module& model, const quant::QuantLayout& layout, const LoadSource& source) {
  try {
    model.load_state_dict(*source.weights);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    OASR_THROW(kInvalidArgument, source.dir.string(), ": ", e.what(),
               "\n  the weights do not fit the ", layout.architecture,
               " model that the directory's config describes: the config and the weights must "
               "come from the same model (a config edited by hand, or weights of another size?)");
  }
}

}  // namespace

quant::QuantizationSpec load_model(Module& model, const quant::QuantLayout& layout,
                                   const LoadSource& source,
                                   const quant::QuantizationConfig& quantization,
                                   const MaterializeOptions& options, const LoadHooks& hooks) {
  OASR_CHECK(source.weights != nullptr, kInvalidArgument, "load: the ", layout.architecture,
             " source from ", source.dir.string(), " holds no weights");
  quant::QuantizationSpec spec;
  if (!source.quantization.is_null()) {
    const quant::QuantizationSpec checkpoint_spec = quant::QuantizationSpec::from_json(
        source.quantization, (source.dir / kNativeConfigName).string());
    spec = quant::resolve_checkpoint_spec(checkpoint_spec, quantization, source.dir.string());
    OASR_CHECK(spec.kv_cache.empty() || layout.has_ar_kv_cache, kUnsupported,
               "kv_cache=", spec.kv_cache, ": the ", layout.architecture,
               " has no autoregressive decoder KV cache to store in fp8; drop kv_cache");
    if (hooks.spec_resolved) hooks.spec_resolved(spec);
    quant::prepare_quantized_slots(model, spec);
    load_weights(model, layout, source);  // strict, dtype-checked against the prepared slots
    if (hooks.weights_loaded) hooks.weights_loaded();
  } else {
    quant::SpecOptions spec_options;
    spec_options.online = true;
    spec_options.recipe = options.recipe;
    spec = quant::spec_from_config(quantization, model, layout, spec_options);
    if (hooks.spec_resolved) hooks.spec_resolved(spec);
    load_weights(model, layout, source);  // strict
    if (hooks.weights_loaded) hooks.weights_loaded();
    quant::quantize_model_online(model, spec);
  }
  model.to(options.dtype);
  model.to(options.device);
  if (options.bind) {
    quant::BindOptions bind;
    bind.device = options.device;
    bind.backend = options.scaled_mm_backend;
    quant::bind_quantization(model, bind);
    quant::link_quantization(model, layout);
  }
  return spec;
}

void check_block_count(const std::vector<std::string>& names, const std::string& prefix,
                       int64_t configured, const std::string& config_key,
                       const std::filesystem::path& config_file) {
  std::set<int64_t> held;
  for (const std::string& name : names) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    if (index.empty() || index.size() > 9 ||
        index.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    held.insert(std::stoll(index));
  }
  const int64_t count = static_cast<int64_t>(held.size());
  const bool consecutive = held.empty() || *held.rbegin() == count - 1;
  std::string holds;
  if (count == 0) {
    holds = "no " + prefix + "N blocks";
  } else if (consecutive) {
    holds = std::to_string(count) + " blocks (" + prefix + "0 .. " + prefix +
            std::to_string(count - 1) + ")";
  } else {
    holds = std::to_string(count) + " " + prefix + "N blocks with gaps (the highest is " + prefix +
            std::to_string(*held.rbegin()) + ")";
  }
  OASR_CHECK(configured == count && consecutive, kCorruptFile, config_file.string(), ": ",
             config_key, " is ", configured, " but the checkpoint holds ", holds,
             "; fix the config or use the checkpoint it came with");
}

}  // namespace oasr::models
