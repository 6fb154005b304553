// Decode options as each architecture declares them.
//
// An architecture declares the decode keys its recognizer reads
// (models::Architecture::decode_options): name, kind of value, range or
// choices, what an unset key means, help. Everything else is generated from
// those declarations: the CLI flags and their --help, the server's form
// fields, the Python package's keyword arguments, the options layer's parsing
// (engine/engine_options.h) and the refusals. A request's values travel as a
// DecodeValues map keyed by those names; a recognizer reads the keys it
// declared and resolves the rest from its checkpoint's defaults.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace oasr::engine {

enum class DecodeValueKind { kInteger, kNumber, kBool, kText, kNumberList };

// The CLI's type name of a kind: INT, FLOAT, BOOL, TEXT, LIST.
const char* decode_kind_type_name(DecodeValueKind kind);

// One option's value; the alternative is the declaration's kind.
using DecodeValue = std::variant<int64_t, double, bool, std::string, std::vector<double>>;

struct DecodeOptionSpec {
  std::string key;  // "beam_size"; the CLI flag is --beam-size
  DecodeValueKind kind = DecodeValueKind::kText;
  std::string help;          // one sentence, for --help and the README
  std::string default_text;  // what leaving it unset means ("10", "the checkpoint's")
  // Inclusive bounds of an integer, a number or each number of a list; a
  // number is always finite. `special` values are taken outside the bounds
  // (chunk_size's -1: offline).
  std::optional<double> min{};
  std::optional<double> max{};
  std::vector<double> special{};
  std::vector<std::string> choices{};  // a text option's values; empty: any text
  std::vector<std::string> aliases{};  // other keys for it (decoding_method)
};

// "--beam-size" for "beam_size".
std::string decode_flag(std::string_view key);
// "beam_size (--beam-size)": how messages name a key.
std::string decode_label(std::string_view key);
// What a value of `spec` is, for messages: "an integer in [1, 128]",
// "-1 or an integer >= 1", "sequential or windows", "true or false".
std::string decode_takes(const DecodeOptionSpec& spec);

// Text (a flag, a form field) -> a value of spec's kind; kInvalidArgument
// naming the key, its flag and what it takes. Bounds are not checked here.
DecodeValue parse_decode_value(const DecodeOptionSpec& spec, const std::string& text);
// A JSON value (string, number, boolean, list of numbers) -> the same.
DecodeValue decode_value_from_json(const DecodeOptionSpec& spec, const nlohmann::json& value);
// Refuses a value outside spec's bounds or choices (kInvalidArgument naming
// the key, the value and what it takes).
void check_decode_value(const DecodeOptionSpec& spec, const DecodeValue& value);
// "10", "0.5", "true", "windows", "0,0.2,0.4".
std::string format_decode_value(const DecodeValue& value);

// Decode option values by key: what a request sets over the engine's
// defaults (DecodeOverrides), or one request's resolved settings
// (DecodeOptions: every key the architecture declares that has a value).
class DecodeValues {
 public:
  bool empty() const { return values_.empty(); }
  bool has(std::string_view key) const { return values_.find(key) != values_.end(); }
  void set(std::string key, DecodeValue value) { values_[std::move(key)] = std::move(value); }
  // Text as text (a bare const char* would otherwise pick the bool alternative).
  void set(std::string key, const char* text) { set(std::move(key), std::string(text)); }
  void erase(std::string_view key);

  // The value of `key` as T, or nullopt when unset; kInternal when it holds
  // another kind (a declaration and its reader disagree).
  template <class T>
  std::optional<T> find(std::string_view key) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    const T* value = std::get_if<T>(&it->second);
    if (value == nullptr) throw_kind_mismatch(key);
    return *value;
  }
  // The same, kInternal when unset.
  template <class T>
  T get(std::string_view key) const {
    std::optional<T> value = find<T>(key);
    if (!value) throw_missing(key);
    return *std::move(value);
  }

  // Each key `over` sets replaces this one's.
  DecodeValues overlaid(const DecodeValues& over) const;
  const std::map<std::string, DecodeValue, std::less<>>& items() const { return values_; }
  // "beam_size=10 decode_method=attention_rescoring" (sorted by key).
  std::string dump() const;
  bool operator==(const DecodeValues&) const = default;

 private:
  [[noreturn]] static void throw_kind_mismatch(std::string_view key);
  [[noreturn]] static void throw_missing(std::string_view key);
  std::map<std::string, DecodeValue, std::less<>> values_;
};

// What a request asks of decoding; each key left unset takes the engine's
// default (the checkpoint's decode config, then the architecture's).
using DecodeOverrides = DecodeValues;
// The resolved decode settings of one request.
using DecodeOptions = DecodeValues;

// The key every architecture declares for its decode method.
inline constexpr const char* kDecodeMethodKey = "decode_method";

// An upper bound on beams so a typo cannot run for minutes: CTC prefix beam
// search costs O(beam^2) per frame and an autoregressive beam search one
// decoder row per beam per step. The checkpoint defaults are 10 (U2++) and
// 5 (Whisper).
inline constexpr int64_t kMaxBeamSize = 128;

// The declaration of `key` (or of an alias) in `specs`, or null.
const DecodeOptionSpec* find_decode_spec(std::span<const DecodeOptionSpec> specs,
                                         std::string_view key);

}  // namespace oasr::engine
