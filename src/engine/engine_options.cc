#include "engine/engine_options.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <set>

#include "core/error.h"
#include "models/architecture.h"

namespace oasr::engine {
namespace {

// What the keys fill; the quantization pieces are combined at the end.
struct Target {
  EngineConfig config;
  std::string scheme;
  std::vector<std::string> quantization_options;
  std::optional<quant::QuantizationConfig> quantization_object;  // JSON's object form
};

// An engine-wide key (the decode keys come from the architectures'
// declarations, models::declared_decode_options()).
struct Key {
  const char* name;
  const char* flag;
  const char* takes;  // what the value is, for messages
  bool repeatable;
  void (*apply)(Target& target, const Key& key, const std::string& value);
};

std::string label(const Key& key) {
  return std::string(key.name) + " (" + key.flag + ")";
}

int64_t parse_integer(const Key& key, const std::string& value) {
  int64_t out = 0;
  const char* end = value.data() + value.size();
  const auto [at, error] = std::from_chars(value.data(), end, out);
  OASR_CHECK(error == std::errc() && at == end && !value.empty(), kInvalidArgument, label(key),
             " takes ", key.takes, ", got '", value, "'");
  return out;
}

const Key kKeys[] = {
    {"ckpt_dir", "--ckpt-dir", "a checkpoint directory", false,
     [](Target& t, const Key&, const std::string& v) { t.config.ckpt_dir = v; }},
    {"device", "--device", "cpu, cuda or cuda:N", false,
     [](Target& t, const Key&, const std::string& v) { t.config.device = v; }},
    {"dtype", "--dtype", "float32, float16 or bfloat16", false,
     [](Target& t, const Key&, const std::string& v) { t.config.dtype = v; }},
    {"max_batch_size", "--max-batch-size", "an integer >= 1", false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.max_batch_size = parse_integer(k, v);
     }},
    {"threads", "--threads", "an integer >= 0", false,
     [](Target& t, const Key& k, const std::string& v) {
       const int64_t n = parse_integer(k, v);
       OASR_CHECK(n >= 0 && n <= std::numeric_limits<int>::max(), kInvalidArgument, label(k),
                  " must be >= 0 (0: the machine's hardware threads), got ", v);
       t.config.threads = static_cast<int>(n);
     }},
    {"quantization", "--quantization", "a scheme (int8_w8a8, fp8_w8a8, ...)", false,
     [](Target& t, const Key&, const std::string& v) { t.scheme = v; }},
    {"quantization_option", "--quantization-option",
     "key=value (ignore=GLOB[,GLOB...], module_types=KIND[,KIND...], kv_cache=fp8_e4m3)", true,
     [](Target& t, const Key&, const std::string& v) { t.quantization_options.push_back(v); }},
};

// The engine keys before the decode keys; quantization after them.
bool before_decode_keys(const Key& key) {
  return std::string_view(key.name).rfind("quantization", 0) != 0;
}

std::string decode_key_list() {
  std::string out;
  for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
    out += (out.empty() ? "" : ", ") + option.spec.key;
  }
  return out;
}

std::string key_list() {
  std::string out;
  for (const std::string& key : engine_option_keys()) out += (out.empty() ? "" : ", ") + key;
  return out;
}

// One key as given: an engine key, or a decode key some architecture declares.
struct FoundKey {
  const Key* engine = nullptr;
  const DecodeOptionSpec* decode = nullptr;
  std::string name() const { return engine != nullptr ? engine->name : decode->key; }
};

FoundKey find_key(const std::string& name) {
  for (const Key& key : kKeys) {
    if (name == key.name) return {&key, nullptr};
  }
  if (const DecodeOptionSpec* spec = models::find_declared_decode_option(name)) {
    return {nullptr, spec};
  }
  OASR_THROW(kInvalidArgument, "unknown engine option '", name, "'; the options are ", key_list());
}

// Applies the pairs in order; `decode_only` refuses the engine-wide keys.
class Parser {
 public:
  explicit Parser(bool decode_only) : decode_only_(decode_only) {}

  FoundKey admit(const std::string& name) {
    const FoundKey key = find_key(name);
    OASR_CHECK(!decode_only_ || key.decode != nullptr, kInvalidArgument, "option '", name,
               "' is fixed when the engine is built; a request takes only the decode options (",
               decode_key_list(), ")");
    const bool repeatable = key.engine != nullptr && key.engine->repeatable;
    OASR_CHECK(repeatable || seen_.insert(key.name()).second, kInvalidArgument, "option ",
               key.engine != nullptr ? label(*key.engine) : decode_label(key.decode->key),
               " is given more than once; give it once");
    return key;
  }
  void apply(const std::string& name, const std::string& value) {
    const FoundKey key = admit(name);
    if (key.engine != nullptr) {
      key.engine->apply(target_, *key.engine, value);
    } else {
      target_.config.decode.set(key.decode->key, parse_decode_value(*key.decode, value));
    }
  }
  void apply_json(const std::string& name, const nlohmann::json& value) {
    const FoundKey key = admit(name);
    target_.config.decode.set(key.decode->key, decode_value_from_json(*key.decode, value));
  }
  Target& target() { return target_; }

 private:
  bool decode_only_;
  std::set<std::string> seen_;
  Target target_;
};

// A JSON scalar as the text a key=value pair of an engine key would carry.
std::string scalar_text(const Key& key, const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();
  OASR_THROW(kInvalidArgument, "option '", key.name, "' takes ", key.takes, ", got ", value.dump());
}

void apply_json(Parser& parser, const nlohmann::json& object) {
  OASR_CHECK(object.is_object(), kInvalidArgument,
             "engine options in JSON must be an object of key: value, got ", object.dump());
  for (const auto& [name, value] : object.items()) {
    const FoundKey key = find_key(name);
    if (key.decode != nullptr) {
      parser.apply_json(name, value);
    } else if (name == "quantization" && value.is_object()) {
      parser.admit(name);
      parser.target().quantization_object = quant::QuantizationConfig::from_json(value);
    } else if (name == "quantization_option" && value.is_array()) {
      for (const nlohmann::json& item : value) parser.apply(name, scalar_text(*key.engine, item));
    } else {
      parser.apply(name, scalar_text(*key.engine, value));
    }
  }
}

EngineConfig finish(Target& target) {
  if (target.quantization_object) {
    OASR_CHECK(target.quantization_options.empty(), kInvalidArgument,
               "quantization given as an object takes its ignore / module_types / kv_cache "
               "inside it; drop quantization_option");
    target.config.quantization = *target.quantization_object;
  } else {
    target.config.quantization =
        quant::QuantizationConfig::from_options(target.scheme, target.quantization_options);
  }
  return target.config;
}

}  // namespace

std::pair<std::string, std::string> split_option(const std::string& text) {
  const auto eq = text.find('=');
  OASR_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument, "option '", text,
             "' is not key=value; the keys are ", key_list());
  return {text.substr(0, eq), text.substr(eq + 1)};
}

EngineConfig engine_config_from_options(const OptionList& options) {
  Parser parser(false);
  for (const auto& [name, value] : options) parser.apply(name, value);
  return finish(parser.target());
}

EngineConfig engine_config_from_json(const nlohmann::json& object) {
  Parser parser(false);
  apply_json(parser, object);
  return finish(parser.target());
}

DecodeOverrides decode_overrides_from_options(const OptionList& options) {
  Parser parser(true);
  for (const auto& [name, value] : options) parser.apply(name, value);
  return parser.target().config.decode;
}

DecodeOverrides decode_overrides_from_json(const nlohmann::json& object) {
  Parser parser(true);
  apply_json(parser, object);
  return parser.target().config.decode;
}

std::vector<std::string> engine_option_keys() {
  std::vector<std::string> out;
  for (const Key& key : kKeys) {
    if (before_decode_keys(key)) out.emplace_back(key.name);
  }
  for (const std::string& key : decode_option_keys()) out.push_back(key);
  for (const Key& key : kKeys) {
    if (!before_decode_keys(key)) out.emplace_back(key.name);
  }
  return out;
}

std::vector<std::string> decode_option_keys() {
  std::vector<std::string> out;
  for (const models::DeclaredDecodeOption& option : models::declared_decode_options()) {
    out.push_back(option.spec.key);
  }
  return out;
}

}  // namespace oasr::engine
