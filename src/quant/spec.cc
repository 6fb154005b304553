#include "quant/spec.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "core/error.h"
#include "quant/methods/quant_method.h"
#include "quant/number_format.h"

namespace oasr::quant {

std::vector<std::string> split_comma_list(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

namespace {

// A JSON string or list of strings (ignore, module_types).
std::vector<std::string> string_list(const nlohmann::json& value, const char* key) {
  std::vector<std::string> out;
  if (value.is_string()) return {value.get<std::string>()};
  OASR_CHECK(value.is_array(), kInvalidArgument, "quantization config: '", key,
             "' must be a string or a list of strings, got ", value.dump());
  for (const auto& item : value) {
    OASR_CHECK(item.is_string(), kInvalidArgument, "quantization config: '", key,
               "' must hold strings, got ", item.dump());
    out.push_back(item.get<std::string>());
  }
  return out;
}

QDType parse_qdtype(const std::string& text, const std::string& what) {
  if (const NumberFormat* format = find_number_format(text)) return format->id;
  std::string known;
  for (QDType id : number_formats())
    known += (known.empty() ? "" : ", ") + std::string(to_string(id));
  OASR_THROW(kCorruptFile, what, ": unknown quantized dtype '", text, "' (", known, ")");
}

Granularity parse_granularity(const std::string& text, const std::string& what) {
  for (Granularity g : {Granularity::kPerTensor, Granularity::kPerChannel, Granularity::kPerToken,
                        Granularity::kBlock}) {
    if (to_string(g) == text) return g;
  }
  OASR_THROW(kCorruptFile, what, ": unknown granularity '", text,
             "' (per_tensor, per_channel, per_token, block)");
}

nlohmann::ordered_json tensor_quant_to_json(const TensorQuant& q) {
  nlohmann::ordered_json j;
  j["dtype"] = std::string(to_string(q.dtype));
  j["granularity"] = std::string(to_string(q.granularity));
  j["symmetric"] = q.symmetric;
  j["dynamic"] = q.dynamic;
  if (q.micro_scaled) j["micro_scaled"] = true;
  if (q.block_n != 0 || q.block_k != 0) j["block_shape"] = {q.block_n, q.block_k};
  return j;
}

template <typename T>
T required(const nlohmann::json& object, const char* key, const std::string& what) {
  OASR_CHECK(object.is_object() && object.contains(key), kCorruptFile, what, ": missing '", key,
             "'");
  try {
    return object.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    OASR_THROW(kCorruptFile, what, ": '", key, "' has the wrong type: ", object.at(key).dump());
  }
}

TensorQuant tensor_quant_from_json(const nlohmann::json& j, const std::string& what) {
  OASR_CHECK(j.is_object(), kCorruptFile, what, " must be an object, got ", j.dump());
  // A key this reader does not know (a group size, a zero point) changes what
  // the tensor holds; serving it as if absent would be silently wrong.
  for (const auto& [key, value] : j.items()) {
    OASR_CHECK(key == "dtype" || key == "granularity" || key == "symmetric" || key == "dynamic" ||
                   key == "micro_scaled" || key == "block_shape",
               kCorruptFile, what, ": unknown key '", key,
               "' (known: dtype, granularity, symmetric, dynamic, micro_scaled, block_shape); the "
               "checkpoint was written by another tool or a newer oasr");
  }
  const auto flag = [&](const char* key, bool fallback) {
    if (!j.contains(key)) return fallback;
    OASR_CHECK(j.at(key).is_boolean(), kCorruptFile, what, ": '", key,
               "' must be true or false, got ", j.at(key).dump());
    return j.at(key).get<bool>();
  };
  TensorQuant q;
  q.dtype = parse_qdtype(required<std::string>(j, "dtype", what), what);
  q.granularity = parse_granularity(required<std::string>(j, "granularity", what), what);
  q.symmetric = flag("symmetric", true);
  q.dynamic = flag("dynamic", false);
  q.micro_scaled = flag("micro_scaled", false);
  if (j.contains("block_shape")) {
    const auto& block = j.at("block_shape");
    OASR_CHECK(block.is_array() && block.size() == 2 && block[0].is_number_integer() &&
                   block[1].is_number_integer() && block[0].get<int64_t>() > 0 &&
                   block[1].get<int64_t>() > 0,
               kCorruptFile, what,
               ": block_shape must be [block_n, block_k] of positive integers, got ", block.dump());
    q.block_n = block[0].get<int64_t>();
    q.block_k = block[1].get<int64_t>();
  }
  return q;
}

LayerKind parse_kind(const std::string& text, const std::string& what) {
  for (LayerKind k :
       {LayerKind::kLinear, LayerKind::kPointwiseConv, LayerKind::kConv1d, LayerKind::kConv2d}) {
    if (to_string(k) == text) return k;
  }
  OASR_THROW(kCorruptFile, what, ": unknown layer kind '", text,
             "' (linear, pointwise_conv, conv1d, conv2d)");
}

}  // namespace

// ---- QuantizationRequest / QuantizationConfig --------------------------------

namespace {
std::atomic<int64_t> parses{0};
}  // namespace

bool QuantizationConfig::empty() const {
  return request_.scheme.empty() && request_.ignore.empty() && !request_.module_types.has_value() &&
         request_.kv_cache.empty();
}

int64_t QuantizationConfig::parse_count() {
  return parses.load();
}

QuantizationRequest QuantizationRequest::from_json(const nlohmann::json& value) {
  QuantizationRequest config;
  if (value.is_null()) return config;
  if (value.is_string()) {
    config.scheme = value.get<std::string>();
    return config;
  }
  OASR_CHECK(value.is_object(), kInvalidArgument,
             "quantization must be a scheme name or an object {scheme, ignore, module_types, "
             "kv_cache}, got ",
             value.dump());
  for (const auto& [key, item] : value.items()) {
    if (key == "scheme") {
      OASR_CHECK(item.is_string() || item.is_null(), kInvalidArgument,
                 "quantization config: 'scheme' must be a string, got ", item.dump());
      if (item.is_string()) config.scheme = item.get<std::string>();
    } else if (key == "ignore") {
      for (const std::string& glob : string_list(item, "ignore")) {
        for (const std::string& part : split_comma_list(glob)) config.ignore.push_back(part);
      }
    } else if (key == "module_types") {
      config.module_types = parse_layer_kinds(string_list(item, "module_types"));
    } else if (key == "kv_cache") {
      OASR_CHECK(item.is_string() || item.is_null(), kInvalidArgument,
                 "quantization config: 'kv_cache' must be a string, got ", item.dump());
      if (item.is_string()) config.kv_cache = item.get<std::string>();
    } else {
      OASR_THROW(kInvalidArgument, "quantization config: unknown key '", key,
                 "'; accepted: scheme, ignore, module_types, kv_cache");
    }
  }
  return config;
}

QuantizationRequest QuantizationRequest::from_options(const std::string& scheme,
                                                      const std::vector<std::string>& options) {
  QuantizationRequest config;
  config.scheme = scheme;
  std::vector<std::string> kinds;
  for (const std::string& option : options) {
    const size_t eq = option.find('=');
    OASR_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument, "--quantization-option '",
               option,
               "' is not key=value (ignore=GLOB,..., module_types=KIND,..., kv_cache=fp8_e4m3)");
    const std::string key = option.substr(0, eq);
    const std::string value = option.substr(eq + 1);
    if (key == "ignore") {
      for (const std::string& glob : split_comma_list(value)) config.ignore.push_back(glob);
    } else if (key == "module_types") {
      kinds.push_back(value);
    } else if (key == "kv_cache") {
      config.kv_cache = value;
    } else {
      OASR_THROW(kInvalidArgument, "--quantization-option: unknown key '", key,
                 "'; accepted: ignore, module_types, kv_cache");
    }
  }
  if (!kinds.empty()) config.module_types = parse_layer_kinds(kinds);
  return config;
}

QuantizationConfig QuantizationConfig::parse(QuantizationRequest request) {
  ++parses;
  const std::string& scheme = request.scheme;
  const std::vector<std::string>& ignore = request.ignore;
  const std::optional<std::vector<LayerKind>>& module_types = request.module_types;
  const std::string& kv_cache = request.kv_cache;
  if (scheme.empty()) {
    OASR_CHECK(ignore.empty(), kInvalidArgument,
               "quantization 'ignore' was given without a scheme; ignore chooses the layers "
               "online quantization skips, so name a scheme (e.g. --quantization int8_w8a8) or "
               "drop it");
    OASR_CHECK(!module_types.has_value(), kInvalidArgument,
               "quantization 'module_types' was given without a scheme; module_types chooses the "
               "layers online quantization quantizes, so name a scheme (e.g. --quantization "
               "int8_w8a8) or drop it");
  } else {
    check_servable(scheme_preset(scheme));
  }
  OASR_CHECK(kv_cache.empty() || kv_cache == kKvCacheFp8, kInvalidArgument,
             "unknown kv_cache format '", kv_cache, "'; the accepted one is fp8_e4m3");
  return QuantizationConfig(std::move(request));
}

std::string QuantizationConfig::dump() const {
  const std::string& scheme = request_.scheme;
  const std::vector<std::string>& ignore = request_.ignore;
  const std::optional<std::vector<LayerKind>>& module_types = request_.module_types;
  const std::string& kv_cache = request_.kv_cache;
  std::ostringstream out;
  out << "scheme=" << (scheme.empty() ? "none" : scheme);
  if (!ignore.empty()) {
    out << " ignore=";
    for (size_t i = 0; i < ignore.size(); ++i) out << (i ? "," : "") << ignore[i];
  }
  if (module_types) {
    out << " module_types=";
    for (size_t i = 0; i < module_types->size(); ++i) {
      out << (i ? "," : "") << to_string((*module_types)[i]);
    }
  }
  if (!kv_cache.empty()) out << " kv_cache=" << kv_cache;
  return out.str();
}

std::string scheme_family(const std::string& scheme_name) {
  constexpr std::string_view kStatic = "_static";
  if (scheme_name.size() > kStatic.size() &&
      scheme_name.compare(scheme_name.size() - kStatic.size(), kStatic.size(), kStatic) == 0) {
    return scheme_name.substr(0, scheme_name.size() - kStatic.size());
  }
  return scheme_name;
}

// ---- QuantizationSpec -------------------------------------------------------

const LayerQuantization* QuantizationSpec::find_layer(const std::string& path) const {
  for (const LayerQuantization& layer : layers) {
    if (layer.path == path) return &layer;
  }
  return nullptr;
}

const QuantScheme& QuantizationSpec::scheme(const std::string& name) const {
  for (const QuantScheme& s : schemes) {
    if (s.name == name) return s;
  }
  OASR_THROW(kNotFound, "the quantization spec defines no scheme '", name, "'");
}

std::vector<std::string> QuantizationSpec::scheme_names() const {
  std::vector<std::string> names;
  for (const LayerQuantization& layer : layers) {
    if (std::find(names.begin(), names.end(), layer.scheme) == names.end()) {
      names.push_back(layer.scheme);
    }
  }
  return names;
}

nlohmann::ordered_json scheme_to_json(const QuantScheme& scheme) {
  nlohmann::ordered_json j;
  j["weight"] = tensor_quant_to_json(scheme.weight);
  j["input"] = scheme.input ? tensor_quant_to_json(*scheme.input) : nlohmann::ordered_json();
  return j;
}

QuantScheme scheme_from_json(const std::string& name, const nlohmann::json& value,
                             const std::string& what) {
  const std::string where = what + " scheme '" + name + "'";
  OASR_CHECK(value.is_object(), kCorruptFile, where, " must be an object, got ", value.dump());
  for (const auto& [key, item] : value.items()) {
    OASR_CHECK(key == "weight" || key == "input", kCorruptFile, where, ": unknown key '", key,
               "' (known: weight, input); the checkpoint was written by another tool or a newer "
               "oasr");
  }
  QuantScheme scheme;
  scheme.name = name;
  OASR_CHECK(value.contains("weight"), kCorruptFile, where, ": missing 'weight'");
  scheme.weight = tensor_quant_from_json(value.at("weight"), where + " weight");
  if (value.contains("input") && !value.at("input").is_null()) {
    scheme.input = tensor_quant_from_json(value.at("input"), where + " input");
  }
  return scheme;
}

nlohmann::ordered_json QuantizationSpec::to_json() const {
  nlohmann::ordered_json j;
  nlohmann::ordered_json scheme_map = nlohmann::ordered_json::object();
  for (const QuantScheme& s : schemes) scheme_map[s.name] = scheme_to_json(s);
  j["schemes"] = scheme_map;
  nlohmann::ordered_json layer_map = nlohmann::ordered_json::object();
  for (const LayerQuantization& layer : layers) {
    nlohmann::ordered_json entry;
    entry["scheme"] = layer.scheme;
    entry["kind"] = std::string(to_string(layer.kind));
    if (layer.runtime_smoothed) entry["smooth_inv"] = true;
    layer_map[layer.path] = entry;
  }
  j["layers"] = layer_map;
  j["kv_cache"] = kv_cache.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(kv_cache);
  nlohmann::ordered_json prov = producer.is_object() ? producer : nlohmann::ordered_json::object();
  nlohmann::ordered_json skipped_list = nlohmann::ordered_json::array();
  for (const SkippedLayer& s : skipped)
    skipped_list.push_back({{"layer", s.path}, {"reason", s.reason}});
  prov["skipped"] = skipped_list;
  j["producer"] = prov;
  return j;
}

QuantizationSpec QuantizationSpec::from_json(const nlohmann::json& value, const std::string& what) {
  const std::string where = what + " \"quantization\"";
  OASR_CHECK(value.is_object(), kCorruptFile, where, " must be an object, got ", value.dump());
  for (const auto& [key, item] : value.items()) {
    OASR_CHECK(key == "schemes" || key == "layers" || key == "kv_cache" || key == "producer",
               kCorruptFile, where, ": unknown key '", key,
               "' (a newer writer?); known: schemes, layers, kv_cache, producer");
  }
  QuantizationSpec spec;
  spec.online = false;
  if (value.contains("schemes")) {
    const auto& schemes = value.at("schemes");
    OASR_CHECK(schemes.is_object(), kCorruptFile, where, ": 'schemes' must be an object");
    const std::vector<std::string> presets = scheme_preset_names();
    for (const auto& [name, item] : schemes.items()) {
      QuantScheme scheme = scheme_from_json(name, item, where);
      // A scheme is served by its preset's method: a name this oasr does not
      // know, or known fields under a known name changed, would be served as
      // something the checkpoint does not say.
      const auto known = [&] {
        std::string list;
        for (const std::string& preset : presets) list += (list.empty() ? "" : ", ") + preset;
        return list;
      };
      OASR_CHECK(std::find(presets.begin(), presets.end(), name) != presets.end(), kUnsupported,
                 where, ": scheme '", name, "' is no scheme this oasr knows (", known(),
                 "); the checkpoint was written by another tool or edited: re-quantize the "
                 "full-precision model with `oasr quantize`");
      const QuantScheme& preset = scheme_preset(name);
      OASR_CHECK(scheme.weight == preset.weight && scheme.input == preset.input, kCorruptFile,
                 where, ": scheme '", name, "' declares ", scheme_to_json(scheme).dump(),
                 ", which is not the ", name, " preset (", scheme_to_json(preset).dump(),
                 "); the checkpoint was edited: re-quantize it with `oasr quantize`");
      spec.schemes.push_back(std::move(scheme));
    }
  }
  if (value.contains("layers")) {
    const auto& layers = value.at("layers");
    OASR_CHECK(layers.is_object(), kCorruptFile, where,
               ": 'layers' must be an object {module path: {scheme, kind}}");
    for (const auto& [path, item] : layers.items()) {
      const std::string layer_what = where + " layer '" + path + "'";
      LayerQuantization layer;
      layer.path = path;
      layer.scheme = required<std::string>(item, "scheme", layer_what);
      layer.kind = parse_kind(required<std::string>(item, "kind", layer_what), layer_what);
      layer.runtime_smoothed = item.value("smooth_inv", false);
      const bool known = std::any_of(spec.schemes.begin(), spec.schemes.end(),
                                     [&](const QuantScheme& s) { return s.name == layer.scheme; });
      OASR_CHECK(known, kCorruptFile, layer_what, " uses scheme '", layer.scheme,
                 "', which 'schemes' does not define");
      spec.layers.push_back(layer);
    }
  }
  if (value.contains("kv_cache") && !value.at("kv_cache").is_null()) {
    spec.kv_cache = value.at("kv_cache").get<std::string>();
    OASR_CHECK(spec.kv_cache == kKvCacheFp8, kCorruptFile, where, ": unknown kv_cache '",
               spec.kv_cache, "'");
  }
  if (value.contains("producer") && value.at("producer").is_object()) {
    spec.producer = value.at("producer");
    if (spec.producer.contains("skipped")) {
      for (const auto& item : spec.producer.at("skipped")) {
        spec.skipped.push_back({item.value("layer", ""), item.value("reason", "")});
      }
      spec.producer.erase("skipped");
    }
  }
  return spec;
}

}  // namespace oasr::quant
