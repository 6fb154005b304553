#include "decode/units.h"

#include <charconv>
#include <fstream>
#include <optional>

#include "core/error.h"

namespace oasr::decode {
namespace {

constexpr std::string_view kBpeWordBoundary = "\u2581";  // "▁"

struct CodePoint {
  char32_t value;
  size_t bytes;
};

// Decodes the UTF-8 code point at text[pos]; nullopt on malformed input.
std::optional<CodePoint> decode_utf8(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t bytes = 0;
  char32_t value = 0;
  if (lead < 0x80) return CodePoint{lead, 1};
  if ((lead & 0xE0) == 0xC0) {
    bytes = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    bytes = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    bytes = 4;
    value = lead & 0x07;
  } else {
    return std::nullopt;
  }
  if (pos + bytes > text.size()) return std::nullopt;
  for (size_t i = 1; i < bytes; ++i) {
    const auto next = static_cast<unsigned char>(text[pos + i]);
    if ((next & 0xC0) != 0x80) return std::nullopt;
    value = (value << 6) | (next & 0x3F);
  }
  return CodePoint{value, bytes};
}

// The code points for which Python's str.isspace() is true.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's str.split() with no argument on one line of UTF-8 text; nullopt
// when the line is not valid UTF-8.
std::optional<std::vector<std::string>> split_python_whitespace(std::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  for (size_t pos = 0; pos < line.size();) {
    const std::optional<CodePoint> cp = decode_utf8(line, pos);
    if (!cp) return std::nullopt;
    if (is_python_space(cp->value)) {
      if (!field.empty()) fields.push_back(std::move(field));
      field.clear();
    } else {
      field.append(line.substr(pos, cp->bytes));
    }
    pos += cp->bytes;
  }
  if (!field.empty()) fields.push_back(std::move(field));
  return fields;
}

std::optional<int64_t> parse_id(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

UnitTable UnitTable::from_entries(const std::vector<std::pair<std::string, int64_t>>& entries) {
  UnitTable table;
  for (const auto& [token, id] : entries) {
    OASR_CHECK(id >= 0, kInvalidArgument, "UnitTable: token '", token, "' has negative id ", id);
    OASR_CHECK(table.id_of_token_.emplace(token, id).second, kInvalidArgument, "UnitTable: token '",
               token, "' appears twice");
    OASR_CHECK(table.token_of_id_.emplace(id, token).second, kInvalidArgument, "UnitTable: id ", id,
               " is given to both '", table.token_of_id_.at(id), "' and '", token, "'");
  }
  return table;
}

UnitTable UnitTable::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kNotFound, "UnitTable: cannot open units file ", path.string());
  std::vector<std::pair<std::string, int64_t>> entries;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::optional<std::vector<std::string>> fields = split_python_whitespace(line);
    OASR_CHECK(fields.has_value(), kCorruptFile, "UnitTable: ", path.string(), " line ", number,
               " is not valid UTF-8");
    if (fields->empty()) continue;
    OASR_CHECK(fields->size() == 2, kCorruptFile, "UnitTable: ", path.string(), " line ", number,
               " must be '<token> <id>', got '", line, "'");
    const std::optional<int64_t> id = parse_id((*fields)[1]);
    OASR_CHECK(id.has_value(), kCorruptFile, "UnitTable: ", path.string(), " line ", number,
               ": the id '", (*fields)[1], "' is not a non-negative integer");
    entries.emplace_back((*fields)[0], *id);
  }
  OASR_CHECK(in.eof(), kIo, "UnitTable: reading ", path.string(), " failed");
  try {
    return from_entries(entries);
  } catch (const Error& e) {
    OASR_THROW(kCorruptFile, path.string(), ": ", e.what());
  }
}

const std::string& UnitTable::token(int64_t id) const {
  const auto it = token_of_id_.find(id);
  OASR_CHECK(it != token_of_id_.end(), kInvalidArgument, "UnitTable: id ", id,
             " is not in the units table (", size(), " units); the model and units disagree");
  return it->second;
}

int64_t UnitTable::id(std::string_view token) const {
  const auto it = id_of_token_.find(std::string(token));
  return it == id_of_token_.end() ? -1 : it->second;
}

std::string strip_python_whitespace(std::string_view text) {
  // Code point boundaries of the text; whitespace is stripped whole code
  // points at a time from both ends.
  std::vector<std::pair<size_t, CodePoint>> points;
  for (size_t pos = 0; pos < text.size();) {
    const std::optional<CodePoint> cp = decode_utf8(text, pos);
    OASR_CHECK(cp.has_value(), kInvalidArgument,
               "strip_python_whitespace: the text is not valid UTF-8 at byte ", pos);
    points.emplace_back(pos, *cp);
    pos += cp->bytes;
  }
  size_t first = 0, last = points.size();
  while (first < last && is_python_space(points[first].second.value)) ++first;
  while (last > first && is_python_space(points[last - 1].second.value)) --last;
  if (first == last) return {};
  const size_t begin = points[first].first;
  const size_t end = points[last - 1].first + points[last - 1].second.bytes;
  return std::string(text.substr(begin, end - begin));
}

std::string detokenize(const UnitTable& units, std::span<const int64_t> ids,
                       const DetokenizeOptions& options) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += options.connect_symbol;
    text += units.token(ids[i]);
  }
  if (options.kind == TokenizerKind::kChar) return text;
  std::string spaced;
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kBpeWordBoundary.size(), kBpeWordBoundary) == 0) {
      spaced += ' ';
      pos += kBpeWordBoundary.size();
    } else {
      spaced += text[pos++];
    }
  }
  return strip_python_whitespace(spaced);
}

}  // namespace oasr::decode
