#include "quant/report.h"

#include <map>
#include <sstream>

namespace oasr::quant {
namespace {

bool all_equal(const std::vector<int64_t>& values) {
  for (int64_t v : values) {
    if (v != values.front()) return false;
  }
  return true;
}

// "5", or "5/5/3" when the blocks differ.
std::string launches_text(const std::vector<int64_t>& per_block) {
  if (all_equal(per_block)) return std::to_string(per_block.front());
  std::string text;
  for (int64_t v : per_block) text += (text.empty() ? "" : "/") + std::to_string(v);
  return text;
}

}  // namespace

std::string QuantizationInfo::summary() const {
  if (!enabled()) return "full precision (no quantization)";
  std::ostringstream out;
  if (schemes.empty()) {
    out << "weights full precision";
  } else {
    for (size_t i = 0; i < schemes.size(); ++i) out << (i ? ", " : "") << schemes[i];
  }
  out << " (" << source << "): " << layers.size() << " quantized layers";
  std::map<std::string, int64_t> lanes;
  for (const LayerReport& layer : layers) ++lanes[layer.lane];
  if (!lanes.empty()) {
    out << ", lanes";
    for (const auto& [lane, count] : lanes) out << " " << lane << " x" << count;
  }
  out << ", KV cache " << (kv_cache.empty() ? "served dtype" : kv_cache);
  out << ", " << skipped.size() << " skipped";
  if (!standalone_quantize_launches_per_block.empty()) {
    out << ", " << launches_text(standalone_quantize_launches_per_block)
        << " standalone quantize launches per encoder block";
  }
  return out.str();
}

std::string QuantizationInfo::details() const {
  std::ostringstream out;
  out << summary() << "\n";
  for (const LayerReport& layer : layers) {
    out << "  " << layer.path << "  " << layer.type << "  " << layer.scheme << "  lane "
        << layer.lane << "  kernel " << layer.kernel << "  input: " << layer.input_quantizer
        << "\n";
  }
  for (const SkippedLayer& skip : skipped) {
    out << "  skipped " << skip.path << ": " << skip.reason << "\n";
  }
  return out.str();
}

nlohmann::ordered_json QuantizationInfo::to_json() const {
  nlohmann::ordered_json j;
  j["source"] = source;
  j["schemes"] = schemes;
  j["quantized_layers"] = quantized_layers();
  j["kv_cache"] = kv_cache.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(kv_cache);
  nlohmann::ordered_json layer_list = nlohmann::ordered_json::array();
  for (const LayerReport& layer : layers) {
    layer_list.push_back({{"path", layer.path},
                          {"type", layer.type},
                          {"kind", layer.kind},
                          {"scheme", layer.scheme},
                          {"lane", layer.lane},
                          {"kernel", layer.kernel},
                          {"input_quantizer", layer.input_quantizer}});
  }
  j["layers"] = layer_list;
  nlohmann::ordered_json skipped_list = nlohmann::ordered_json::array();
  for (const SkippedLayer& skip : skipped) {
    skipped_list.push_back({{"path", skip.path}, {"reason", skip.reason}});
  }
  j["skipped"] = skipped_list;
  if (!standalone_quantize_launches_per_block.empty()) {
    // One number when every block launches the same, else one per block.
    const auto& per_block = standalone_quantize_launches_per_block;
    j["standalone_quantize_launches_per_block"] = all_equal(per_block)
                                                      ? nlohmann::ordered_json(per_block.front())
                                                      : nlohmann::ordered_json(per_block);
  }
  return j;
}

}  // namespace oasr::quant
