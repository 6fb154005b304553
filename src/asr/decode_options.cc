#include "asr/decode_options.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace oasr::engine {
namespace {

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string join_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return out;
}

// "in [1, 128]", ">= 0", "<= 1", "" for the bounds of a number.
std::string bounds_text(const DecodeOptionSpec& spec) {
  if (spec.min && spec.max) {
    return " in [" + format_number(*spec.min) + ", " + format_number(*spec.max) + "]";
  }
  if (spec.min) return " >= " + format_number(*spec.min);
  if (spec.max) return " <= " + format_number(*spec.max);
  return "";
}

std::string special_text(const DecodeOptionSpec& spec) {
  std::string out;
  for (double value : spec.special) out += format_number(value) + " or ";
  return out;
}

bool in_bounds(const DecodeOptionSpec& spec, double value) {
  if (std::find(spec.special.begin(), spec.special.end(), value) != spec.special.end()) return true;
  return std::isfinite(value) && (!spec.min || value >= *spec.min) &&
         (!spec.max || value <= *spec.max);
}

[[noreturn]] void refuse_text(const DecodeOptionSpec& spec, const std::string& text) {
  OASR_THROW(kInvalidArgument, decode_label(spec.key), " takes ", decode_takes(spec), ", got '",
             text, "'");
}

double parse_number(const DecodeOptionSpec& spec, const std::string& text) {
  // strtod reads "nan" and "inf" too: the bounds check then names them.
  errno = 0;
  char* end = nullptr;
  const double out = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) {
    refuse_text(spec, text);
  }
  return out;
}

}  // namespace

const char* decode_kind_type_name(DecodeValueKind kind) {
  switch (kind) {
    case DecodeValueKind::kInteger:
      return "INT";
    case DecodeValueKind::kNumber:
      return "FLOAT";
    case DecodeValueKind::kBool:
      return "BOOL";
    case DecodeValueKind::kText:
      return "TEXT";
    case DecodeValueKind::kNumberList:
      return "LIST";
  }
  return "TEXT";
}

std::string decode_flag(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string decode_label(std::string_view key) {
  return std::string(key) + " (" + decode_flag(key) + ")";
}

std::string decode_takes(const DecodeOptionSpec& spec) {
  switch (spec.kind) {
    case DecodeValueKind::kInteger:
      return special_text(spec) + "an integer" + bounds_text(spec);
    case DecodeValueKind::kNumber:
      return special_text(spec) + "a finite number" + bounds_text(spec);
    case DecodeValueKind::kBool:
      return "true or false";
    case DecodeValueKind::kText:
      return spec.choices.empty() ? "a text" : join_choices(spec.choices);
    case DecodeValueKind::kNumberList:
      return "a comma list of numbers" + bounds_text(spec) + " (e.g. 0,0.2,0.4,0.6,0.8,1.0)";
  }
  return "a value";
}

DecodeValue parse_decode_value(const DecodeOptionSpec& spec, const std::string& text) {
  switch (spec.kind) {
    case DecodeValueKind::kInteger: {
      int64_t out = 0;
      const char* end = text.data() + text.size();
      const auto [at, error] = std::from_chars(text.data(), end, out);
      if (error != std::errc() || at != end || text.empty()) refuse_text(spec, text);
      return out;
    }
    case DecodeValueKind::kNumber:
      return parse_number(spec, text);
    case DecodeValueKind::kBool:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      refuse_text(spec, text);
    case DecodeValueKind::kText:
      return text;
    case DecodeValueKind::kNumberList: {
      std::vector<double> out;
      size_t start = 0;
      while (true) {
        const size_t comma = text.find(',', start);
        const std::string piece =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (piece.empty()) refuse_text(spec, text);
        out.push_back(parse_number(spec, piece));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      return out;
    }
  }
  refuse_text(spec, text);
}

DecodeValue decode_value_from_json(const DecodeOptionSpec& spec, const nlohmann::json& value) {
  if (value.is_string()) return parse_decode_value(spec, value.get<std::string>());
  if (value.is_number()) {
    if (spec.kind == DecodeValueKind::kText || spec.kind == DecodeValueKind::kBool) {
      OASR_THROW(kInvalidArgument, "option '", spec.key, "' takes ", decode_takes(spec), ", got ",
                 value.dump());
    }
    return parse_decode_value(spec, value.dump());
  }
  if (value.is_boolean() && spec.kind == DecodeValueKind::kBool) return value.get<bool>();
  if (value.is_array() && spec.kind == DecodeValueKind::kNumberList) {
    std::vector<double> out;
    for (const nlohmann::json& item : value) {
      OASR_CHECK(item.is_number(), kInvalidArgument, "option '", spec.key, "' takes ",
                 decode_takes(spec), ", got ", value.dump());
      out.push_back(item.get<double>());
    }
    return out;
  }
  OASR_THROW(kInvalidArgument, "option '", spec.key, "' takes ", decode_takes(spec), ", got ",
             value.dump());
}

void check_decode_value(const DecodeOptionSpec& spec, const DecodeValue& value) {
  const std::string label = decode_label(spec.key);
  if (const auto* integer = std::get_if<int64_t>(&value)) {
    OASR_CHECK(in_bounds(spec, static_cast<double>(*integer)), kInvalidArgument, label, " must be ",
               decode_takes(spec), ", got ", *integer);
  } else if (const auto* number = std::get_if<double>(&value)) {
    OASR_CHECK(in_bounds(spec, *number), kInvalidArgument, label, " must be ", decode_takes(spec),
               ", got ", *number);
  } else if (const auto* text = std::get_if<std::string>(&value)) {
    OASR_CHECK(spec.choices.empty() ||
                   std::find(spec.choices.begin(), spec.choices.end(), *text) != spec.choices.end(),
               kInvalidArgument, label, " must be ", join_choices(spec.choices), ", got '", *text,
               "'");
  } else if (const auto* list = std::get_if<std::vector<double>>(&value)) {
    OASR_CHECK(!list->empty(), kInvalidArgument, label,
               " needs at least one value, e.g. 0 or 0,0.2,0.4,0.6,0.8,1.0");
    for (size_t i = 0; i < list->size(); ++i) {
      OASR_CHECK(in_bounds(spec, (*list)[i]), kInvalidArgument, label, ": value ", i + 1,
                 " must be a number", bounds_text(spec), ", got ", (*list)[i]);
    }
  }
}

std::string format_decode_value(const DecodeValue& value) {
  if (const auto* integer = std::get_if<int64_t>(&value)) return std::to_string(*integer);
  if (const auto* number = std::get_if<double>(&value)) return format_number(*number);
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  std::string out;
  for (double number : std::get<std::vector<double>>(value)) {
    out += (out.empty() ? "" : ",") + format_number(number);
  }
  return out;
}

void DecodeValues::erase(std::string_view key) {
  const auto it = values_.find(key);
  if (it != values_.end()) values_.erase(it);
}

DecodeValues DecodeValues::overlaid(const DecodeValues& over) const {
  DecodeValues out = *this;
  for (const auto& [key, value] : over.values_) out.values_[key] = value;
  return out;
}

std::string DecodeValues::dump() const {
  std::string out;
  for (const auto& [key, value] : values_) {
    out += (out.empty() ? "" : " ") + key + "=" + format_decode_value(value);
  }
  return out;
}

void DecodeValues::throw_kind_mismatch(std::string_view key) {
  OASR_THROW(kInternal, "decode option '", key,
             "' holds another kind of value than its reader "
             "expects: the architecture's declaration and its recognizer disagree");
}

void DecodeValues::throw_missing(std::string_view key) {
  OASR_THROW(kInternal, "decode option '", key, "' is unset where its recognizer needs a value");
}

const DecodeOptionSpec* find_decode_spec(std::span<const DecodeOptionSpec> specs,
                                         std::string_view key) {
  for (const DecodeOptionSpec& spec : specs) {
    if (spec.key == key) return &spec;
    for (const std::string& alias : spec.aliases) {
      if (alias == key) return &spec;
    }
  }
  return nullptr;
}

}  // namespace oasr::engine
