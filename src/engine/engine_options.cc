#include "engine/engine_options.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <set>

#include "core/error.h"

namespace oasr::engine {
namespace {

// What the keys fill; the quantization pieces are combined at the end.
struct Target {
  EngineConfig config;
  std::string scheme;
  std::vector<std::string> quantization_options;
  std::optional<quant::QuantizationConfig> quantization_object;  // JSON's object form
};

struct Key {
  const char* name;
  const char* flag;
  const char* takes;  // what the value is, for messages
  bool decode;        // a request may set it
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

double parse_number(const Key& key, const std::string& value) {
  // strtod reads "nan" and "inf" too: the range checks then name them.
  errno = 0;
  char* end = nullptr;
  const double out = std::strtod(value.c_str(), &end);
  OASR_CHECK(!value.empty() && end == value.c_str() + value.size() && errno != ERANGE,
             kInvalidArgument, label(key), " takes ", key.takes, ", got '", value, "'");
  return out;
}

constexpr const char* kBoolTakes = "true or false";
constexpr const char* kListTakes = "a comma list of numbers (e.g. 0,0.2,0.4,0.6,0.8,1.0)";

std::vector<double> parse_number_list(const Key& key, const std::string& value) {
  std::vector<double> out;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    const std::string piece =
        value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    OASR_CHECK(!piece.empty(), kInvalidArgument, label(key), " takes ", key.takes, ", got '", value,
               "'");
    out.push_back(parse_number(key, piece));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool parse_bool(const Key& key, const std::string& value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  OASR_THROW(kInvalidArgument, label(key), " takes ", key.takes, ", got '", value, "'");
}

const Key kKeys[] = {
    {"ckpt_dir", "--ckpt-dir", "a checkpoint directory", false, false,
     [](Target& t, const Key&, const std::string& v) { t.config.ckpt_dir = v; }},
    {"device", "--device", "cpu, cuda or cuda:N", false, false,
     [](Target& t, const Key&, const std::string& v) { t.config.device = v; }},
    {"dtype", "--dtype", "float32, float16 or bfloat16", false, false,
     [](Target& t, const Key&, const std::string& v) { t.config.dtype = v; }},
    {"max_batch_size", "--max-batch-size", "an integer >= 1", false, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.max_batch_size = parse_integer(k, v);
     }},
    {"threads", "--threads", "an integer >= 0", false, false,
     [](Target& t, const Key& k, const std::string& v) {
       const int64_t n = parse_integer(k, v);
       OASR_CHECK(n >= 0 && n <= std::numeric_limits<int>::max(), kInvalidArgument, label(k),
                  " must be >= 0 (0: the machine's hardware threads), got ", v);
       t.config.threads = static_cast<int>(n);
     }},
    {"decode_method", "--decode-method", "a decode method name", true, false,
     [](Target& t, const Key&, const std::string& v) { t.config.decode.method = v; }},
    {"beam_size", "--beam-size", "an integer", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.beam_size = parse_integer(k, v);
     }},
    {"ctc_weight", "--ctc-weight", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.ctc_weight = parse_number(k, v);
     }},
    {"reverse_weight", "--reverse-weight", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.reverse_weight = parse_number(k, v);
     }},
    {"chunk_size", "--chunk-size", "an integer (-1: offline)", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.chunk_size = parse_integer(k, v);
     }},
    {"left_chunks", "--left-chunks", "an integer (-1: all)", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.left_chunks = parse_integer(k, v);
     }},
    {"length_penalty", "--length-penalty", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.length_penalty = parse_number(k, v);
     }},
    {"timestamps", "--timestamps", kBoolTakes, true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.timestamps = parse_bool(k, v);
     }},
    {"long_form", "--long-form", "sequential or windows", true, false,
     [](Target& t, const Key&, const std::string& v) { t.config.decode.long_form = v; }},
    {"temperatures", "--temperatures", kListTakes, true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.temperatures = parse_number_list(k, v);
     }},
    {"compression_ratio_threshold", "--compression-ratio-threshold", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.compression_ratio_threshold = parse_number(k, v);
     }},
    {"logprob_threshold", "--logprob-threshold", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.logprob_threshold = parse_number(k, v);
     }},
    {"no_speech_threshold", "--no-speech-threshold", "a number", true, false,
     [](Target& t, const Key& k, const std::string& v) {
       t.config.decode.no_speech_threshold = parse_number(k, v);
     }},
    {"quantization", "--quantization", "a scheme (int8_w8a8, fp8_w8a8, ...)", false, false,
     [](Target& t, const Key&, const std::string& v) { t.scheme = v; }},
    {"quantization_option", "--quantization-option",
     "key=value (ignore=GLOB[,GLOB...], module_types=KIND[,KIND...], kv_cache=fp8_e4m3)", false,
     true,
     [](Target& t, const Key&, const std::string& v) { t.quantization_options.push_back(v); }},
};

std::string key_list() {
  std::string out;
  for (const Key& key : kKeys) out += (out.empty() ? "" : ", ") + std::string(key.name);
  return out;
}

const Key& find_key(const std::string& name) {
  const std::string canonical = name == "decoding_method" ? "decode_method" : name;
  for (const Key& key : kKeys) {
    if (canonical == key.name) return key;
  }
  OASR_THROW(kInvalidArgument, "unknown engine option '", name, "'; the options are ", key_list());
}

// Applies the pairs in order; `decode_only` refuses the engine-wide keys.
class Parser {
 public:
  explicit Parser(bool decode_only) : decode_only_(decode_only) {}

  const Key& admit(const std::string& name) {
    const Key& key = find_key(name);
    OASR_CHECK(!decode_only_ || key.decode, kInvalidArgument, "option '", name,
               "' is fixed when the engine is built; a request takes only the decode options "
               "(decode_method, beam_size, ctc_weight, reverse_weight, chunk_size, left_chunks, "
               "length_penalty, timestamps, long_form, temperatures, "
               "compression_ratio_threshold, logprob_threshold, no_speech_threshold)");
    OASR_CHECK(key.repeatable || seen_.insert(key.name).second, kInvalidArgument, "option ",
               label(key), " is given more than once; give it once");
    return key;
  }
  void apply(const std::string& name, const std::string& value) {
    const Key& key = admit(name);
    key.apply(target_, key, value);
  }
  Target& target() { return target_; }

 private:
  bool decode_only_;
  std::set<std::string> seen_;
  Target target_;
};

// A JSON scalar as the text a key=value pair would carry.
std::string scalar_text(const std::string& name, const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer() || value.is_number_unsigned()) return value.dump();
  if (value.is_number_float()) return value.dump();
  // A JSON boolean for the keys that take one (timestamps); for the others
  // it is refused below, naming what they take.
  if (value.is_boolean() && std::string(find_key(name).takes) == kBoolTakes) {
    return value.get<bool>() ? "true" : "false";
  }
  OASR_THROW(kInvalidArgument, "option '", name, "' takes ", find_key(name).takes, ", got ",
             value.dump());
}

void apply_json(Parser& parser, const nlohmann::json& object) {
  OASR_CHECK(object.is_object(), kInvalidArgument,
             "engine options in JSON must be an object of key: value, got ", object.dump());
  for (const auto& [name, value] : object.items()) {
    if (name == "quantization" && value.is_object()) {
      parser.admit(name);
      parser.target().quantization_object = quant::QuantizationConfig::from_json(value);
    } else if (name == "quantization_option" && value.is_array()) {
      for (const nlohmann::json& item : value) parser.apply(name, scalar_text(name, item));
    } else if (value.is_array() && std::string(find_key(name).takes) == kListTakes) {
      // A JSON list of numbers for the list keys (temperatures).
      std::string text;
      for (const nlohmann::json& item : value) {
        OASR_CHECK(item.is_number(), kInvalidArgument, "option '", name, "' takes ", kListTakes,
                   ", got ", value.dump());
        text += (text.empty() ? "" : ",") + item.dump();
      }
      parser.apply(name, text);
    } else {
      parser.apply(name, scalar_text(name, value));
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
  target.config.quantization.validate();
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
  for (const Key& key : kKeys) out.emplace_back(key.name);
  return out;
}

}  // namespace oasr::engine
