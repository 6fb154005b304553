#include "quantize/apply_links.h"

#include <cctype>
#include <map>
#include <set>

#include "core/env.h"
#include "core/error.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/quantizable.h"
#include "quant/methods/fused_producers.h"
#include "quantize/apply.h"

namespace oasr::quant {
namespace {

// The bound quantized layer at `path`, or nullptr with `why` set.
layers::QuantizableLayer* bound_layer(const std::map<std::string, Module*>& modules,
                                      const std::string& path, std::string& why) {
  auto it = modules.find(path);
  auto* layer = it == modules.end() ? nullptr : dynamic_cast<layers::QuantizableLayer*>(it->second);
  if (layer == nullptr) {
    why = path + " is not a quantizable layer of this model";
  } else if (!layer->quantized()) {
    why = path + " is full precision";
  } else if (!layer->quant_method()->bound()) {
    why = path + " is not bound to a kernel lane";
  } else {
    return layer;
  }
  return nullptr;
}

Device layer_device(const layers::QuantizableLayer& layer) {
  return layer.quant_module().param("weight").device();
}

// Why the norm -> GEMM link of `group` cannot be armed ("" = it can).
std::string norm_link_refusal(const SmoothGroup& group,
                              const std::map<std::string, Module*>& modules, QDType& format) {
  std::string why;
  for (size_t i = 0; i < group.consumers.size(); ++i) {
    const layers::QuantizableLayer* layer = bound_layer(modules, group.consumers[i], why);
    if (layer == nullptr) return why;
    const QuantMethod& method = *layer->quant_method();
    if (!method.takes_plain_per_token_input()) {
      return group.consumers[i] + " quantizes its input " +
             (method.has_static_input() ? "at a static scale" : "with a runtime smoother");
    }
    if (i == 0) format = method.format();
    if (method.format() != format) return "its consumers use more than one format";
    if (!fused_producers_available(layer_device(*layer))) {
      return "no fused norm -> quantize kernel on " + layer_device(*layer).str() + " yet";
    }
    const NumberFormat& row = method.number_format();
    if (!row.fuses_norm_quant_on(layer_device(*layer))) {
      return "the " + row.name + " format has no fused norm -> quantize body on " +
             layer_device(*layer).str();
    }
  }
  return group.consumers.empty() ? "it declares no consumers" : "";
}

std::string chain_link_refusal(const layers::QuantizableLayer* producer,
                               const layers::QuantizableLayer* consumer) {
  const QuantMethod& p = *producer->quant_method();
  const QuantMethod& c = *consumer->quant_method();
  if (!c.has_static_input()) {
    return consumer->quant_module().path() +
           " quantizes its input per token (a chain needs a "
           "static input scale)";
  }
  if (p.format() != c.format()) return "the two layers use different formats";
  if (dynamic_cast<const layers::Linear*>(producer) == nullptr) {
    return "the producer is not a dense GEMM layer";
  }
  if (!fused_producers_available(layer_device(*producer))) {
    return "no scaled_mm_quant kernel on " + layer_device(*producer).str() + " yet";
  }
  const NumberFormat& row = p.number_format();
  if (!row.fuses_quantizing_epilogue_on(layer_device(*producer))) {
    return "the " + row.name + " format has no quantizing epilogue on " +
           layer_device(*producer).str();
  }
  return "";
}

// "encoder.encoders.3" for "encoder.encoders.3.self_attn.linear_q": an
// encoder module path up to its first numeric component; "" otherwise.
std::string encoder_block_of(const std::string& path) {
  // U2++'s "encoder.encoders.N", Hugging Face's "model.encoder.layers.N".
  if (path.rfind("encoder.", 0) != 0 && path.rfind("model.encoder.", 0) != 0) return "";
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('.', start);
    if (end == std::string::npos) end = path.size();
    bool numeric = end > start;
    for (size_t i = start; i < end; ++i) numeric = numeric && std::isdigit(path[i]) != 0;
    if (numeric) return path.substr(0, end);
    start = end + 1;
  }
  return "";
}

}  // namespace

LinkSummary link_quantization(Module& model, const QuantLayout& layout,
                              const LinkOptions& options) {
  LinkSummary summary;
  summary.enabled = options.enabled.value_or(env::quant_fusion_enabled());
  const auto modules = modules_by_path(model);
  // Start from nothing armed: every layer quantizes its own input.
  for (const auto& [path, module] : modules) {
    if (auto* norm = dynamic_cast<layers::LayerNorm*>(module)) norm->disarm_output_quant();
    if (auto* layer = dynamic_cast<layers::QuantizableLayer*>(module)) {
      layer->arm_output_quant(nullptr);
      if (layer->quantized()) layer->set_input_quantizer("");
    }
  }
  if (summary.enabled) {
    for (const SmoothGroup& group : layout.smooth_groups) {
      if (!group.fuse_output_quant || group.producer.empty()) continue;
      auto it = modules.find(group.producer);
      auto* norm = it == modules.end() ? nullptr : dynamic_cast<layers::LayerNorm*>(it->second);
      OASR_CHECK(norm != nullptr, kInternal, "the ", layout.architecture,
                 " layout fuses the output of '", group.producer,
                 "', which is not a LayerNorm of this model");
      QDType format{};  // set by norm_link_refusal from the consumers
      const std::string why = norm_link_refusal(group, modules, format);
      if (!why.empty()) {
        summary.not_armed.push_back(group.producer + ": " + why);
        continue;
      }
      norm->arm_output_quant(format);
      const std::string label =
          group.producer +
          (norm->adds_residual() ? " (add_layer_norm_residual_quant)" : " (layer_norm_quant)");
      for (const std::string& consumer : group.consumers) {
        dynamic_cast<layers::QuantizableLayer*>(modules.at(consumer))->set_input_quantizer(label);
      }
      ++summary.norm_links;
    }
    for (const GemmChain& chain : layout.gemm_chains) {
      std::string why;
      layers::QuantizableLayer* producer = bound_layer(modules, chain.producer, why);
      layers::QuantizableLayer* consumer =
          producer != nullptr ? bound_layer(modules, chain.consumer, why) : nullptr;
      if (consumer != nullptr) why = chain_link_refusal(producer, consumer);
      if (!why.empty()) {
        summary.not_armed.push_back(chain.producer + ": " + why);
        continue;
      }
      producer->arm_output_quant(consumer);
      consumer->set_input_quantizer(chain.producer + " (scaled_mm_quant)");
      ++summary.chain_links;
    }
  }
  summary.standalone_quantize_launches_per_block =
      standalone_quantize_launches_per_block(model, layout);
  return summary;
}

std::vector<int64_t> standalone_quantize_launches_per_block(const Module& model,
                                                            const QuantLayout& layout) {
  const auto modules = modules_by_path(model);
  // Index of the SmoothGroup each GEMM reads its input through (one X).
  std::map<std::string, size_t> group_of;
  for (size_t g = 0; g < layout.smooth_groups.size(); ++g) {
    for (const std::string& consumer : layout.smooth_groups[g].consumers) {
      group_of.emplace(consumer, g);
    }
  }
  // Block -> the distinct quantizes its layers launch themselves.
  std::map<std::string, std::set<std::string>> launches;
  std::vector<std::string> block_order;
  for (auto& [path, module] : const_cast<Module&>(model).named_modules()) {
    const auto* layer = dynamic_cast<const layers::QuantizableLayer*>(module);
    if (layer == nullptr || !layer->quantized()) continue;
    // Only the block GEMMs the layout describes (not, e.g., a subsampling conv).
    auto g = group_of.find(path);
    if (g == group_of.end() && layout.chain_into(path) == nullptr) continue;
    const std::string block = encoder_block_of(path);
    if (block.empty()) continue;
    if (launches.count(block) == 0) block_order.push_back(block);
    std::set<std::string>& distinct = launches[block];
    const QuantMethod& method = *layer->quant_method();
    const std::string own = method.own_input_quantizer();
    if (method.input_quantizer() != own) continue;  // an armed producer emits its input
    const std::string input = g != group_of.end() ? "group " + std::to_string(g->second) : path;
    distinct.insert(input + " | " + std::string(to_string(method.format())) + " | " + own);
  }
  std::vector<int64_t> counts;
  for (const std::string& block : block_order) {
    counts.push_back(static_cast<int64_t>(launches[block].size()));
  }
  return counts;
}

void add_link_report(QuantizationInfo& info, const Module& model, const QuantLayout& layout) {
  info.standalone_quantize_launches_per_block =
      standalone_quantize_launches_per_block(model, layout);
}

}  // namespace oasr::quant
