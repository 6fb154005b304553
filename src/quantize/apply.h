// The glue between a quantization request and a model's layers (spec "Load
// order"). The quantize/ library, above layers/ in the include order.
//
//   native quantized checkpoint:
//     spec = resolve_checkpoint_spec(QuantizationSpec::from_json(...), requested, dir);
//     prepare_quantized_slots(model, spec);   // before the strict, dtype-checked load
//     model.load_state_dict(weights);
//   online:
//     spec = spec_from_config(config, model, layout);
//     model.load_state_dict(full_precision_weights);
//     quantize_model_online(model, spec);     // each layer quantizes its own weight
//   then model.to(dtype), model.to(device), bind_quantization(model, options).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "layers/module.h"
#include "quant/layout.h"
#include "quant/methods/quant_method.h"
#include "quant/report.h"
#include "quant/spec.h"

namespace oasr::quant {

struct SpecOptions {
  // Online quantization (at load): conv kinds and static schemes, which need
  // calibration, are refused. oasr quantize passes false.
  bool online = true;
  std::string recipe;  // provenance ("online" when empty and online)
};

// One selection rule: targets are layer kinds ("linear", "pointwise_conv",
// "conv1d", "conv2d", "conv", "all") or module-path globs. A layer named by
// a glob is named explicitly: one that cannot be quantized is refused,
// instead of skipped as a kind selection would.
struct SelectionRule {
  std::vector<std::string> targets;
  QuantScheme scheme;
};

// The spec a QuantizationConfig asks for on this model: every quantizable
// layer of the selected kinds, minus `ignore` and the layout's kept layers,
// minus the ones that cannot take the scheme (recorded in `skipped` with the
// reason). Refusals: those of QuantizationConfig::parse (already passed), plus static schemes
// and conv kinds online, fp8 with a conv kind, kv_cache on a model without
// an autoregressive KV cache.
QuantizationSpec spec_from_config(const QuantizationConfig& config, const Module& model,
                                  const QuantLayout& layout = {}, const SpecOptions& options = {});

// The general form (importers' plans): rules in order (the first rule that
// selects a layer wins), then `default_scheme` for the remaining layers of
// the default kinds (none when unset), minus `ignore` globs.
QuantizationSpec spec_from_rules(const std::vector<SelectionRule>& rules,
                                 const std::optional<QuantScheme>& default_scheme,
                                 const std::vector<std::string>& ignore, const Module& model,
                                 const QuantLayout& layout = {}, const SpecOptions& options = {});

// A quantized checkpoint's spec is authoritative. Naming one of its schemes
// (or the static/dynamic alias of one) is a no-op; another scheme, or
// ignore / module_types, is refused. kv_cache is taken from the request.
QuantizationSpec resolve_checkpoint_spec(const QuantizationSpec& checkpoint,
                                         const QuantizationConfig& requested,
                                         const std::string& checkpoint_name);

// Every module of `model` by its path (the root is "").
std::map<std::string, Module*> modules_by_path(const Module& model);

// Refuses a spec naming a layer the model lacks, one that is not
// quantizable, of another kind, or that cannot take its scheme (unaligned).
void validate_spec_for_model(const QuantizationSpec& spec, const Module& model);

// Native: turns each spec layer's weight slot into its method's storage,
// unloaded, so the strict load checks names, shapes and dtypes before any
// data is read.
void prepare_quantized_slots(Module& model, const QuantizationSpec& spec);

// Online: each spec layer quantizes its own loaded full-precision weight.
void quantize_model_online(Module& model, const QuantizationSpec& spec);

// Every quantized layer picks its kernel lane once. options.backend empty:
// OASR_SCALED_MM_BACKEND.
void bind_quantization(Module& model, BindOptions options = {});

// The report of what `model` serves under `spec`.
QuantizationInfo quantization_info(const Module& model, const QuantizationSpec& spec);

}  // namespace oasr::quant
