// English normalization for scoring; the rules are listed in text_normalizer.h.
#include "eval/text_normalizer.h"

#include <array>
#include <cctype>
#include <vector>

#include "core/error.h"

namespace oasr::eval {
namespace {

constexpr uint64_t kMaxCardinal = 1'000'000'000'000ULL;

constexpr std::array<const char*, 20> kOnes = {
    "zero",     "one",     "two",     "three",     "four",     "five",    "six",
    "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
    "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
constexpr std::array<const char*, 10> kTens = {"",      "",      "twenty",  "thirty", "forty",
                                               "fifty", "sixty", "seventy", "eighty", "ninety"};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// In the prepared text (see prepare()) every byte other than these few is
// part of a word: letters, digits and kept non-ASCII bytes.
bool is_word_byte(char c) {
  return c != ' ' && c != '.' && c != ',' && c != '$' && c != '\'';
}

void append_below_thousand(uint64_t value, std::string& out) {
  auto add = [&out](const char* word) {
    if (!out.empty()) out += ' ';
    out += word;
  };
  if (value >= 100) {
    add(kOnes[value / 100]);
    add("hundred");
    value %= 100;
  }
  if (value >= 20) {
    add(kTens[value / 10]);
    value %= 10;
    if (value != 0) add(kOnes[value]);
  } else if (value != 0) {
    add(kOnes[value]);
  }
}

// Decodes the UTF-8 sequence at text[pos]; returns its length, or 0 when the
// bytes are not valid UTF-8 (the caller then keeps the single byte as is).
size_t decode_utf8(std::string_view text, size_t pos, char32_t& code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[pos + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(k) & 0x3F);
  }
  return length;
}

bool is_separator_code_point(char32_t cp) {
  if (cp >= 0xA0 && cp <= 0xBF) return true;      // Latin-1 symbols: ¡ « » ° ¿ ...
  if (cp == 0xD7 || cp == 0xF7) return true;      // × ÷
  if (cp >= 0x2010 && cp <= 0x2015) return true;  // hyphens and dashes
  if (cp >= 0x201A && cp <= 0x201F) return true;  // low and double quotes
  return cp == 0x2026 || cp == 0x2039 || cp == 0x203A || cp == 0x3000;
}

// Rules 1-2: lowercase, map punctuation to spaces, "%" to " percent ", and
// keep the characters the number reader needs ('$', '.', ',', '\'').
std::string prepare(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    const char c = text[pos];
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      ++pos;
      if (std::isalpha(byte)) {
        out += static_cast<char>(std::tolower(byte));
      } else if (is_digit(c) || c == '$' || c == '.' || c == ',' || c == '\'') {
        out += c;
      } else if (c == '%') {
        out += " percent ";
      } else {
        out += ' ';  // whitespace, controls, every other ASCII symbol
      }
      continue;
    }
    char32_t cp = 0;
    const size_t length = decode_utf8(text, pos, cp);
    if (length == 0) {
      out += c;  // invalid byte: kept, never dropped silently
      ++pos;
    } else if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) {
      out += static_cast<char>(0xC3);  // Latin-1 capital -> small: +0x20
      out += static_cast<char>(0x80 + (cp - 0xC0) + 0x20);
      pos += length;
    } else if (cp == 0x2018 || cp == 0x2019) {
      out += '\'';
      pos += length;
    } else if (is_separator_code_point(cp)) {
      out += ' ';
      pos += length;
    } else {
      out.append(text.substr(pos, length));
      pos += length;
    }
  }
  return out;
}

void append_words(const std::string& words, std::vector<std::string>& out) {
  size_t start = 0;
  while (start < words.size()) {
    size_t end = words.find(' ', start);
    if (end == std::string::npos) end = words.size();
    if (end > start) out.emplace_back(words.substr(start, end - start));
    start = end + 1;
  }
}

std::string digits_one_by_one(std::string_view digits) {
  std::string out;
  for (char d : digits) {
    if (!out.empty()) out += ' ';
    out += kOnes[d - '0'];
  }
  return out;
}

// "1905" -> "nineteen oh five", "1900" -> "nineteen hundred".
std::string year_to_words(uint64_t year) {
  std::string out = cardinal_to_words(year / 100);
  const uint64_t low = year % 100;
  if (low == 0) return out + " hundred";
  if (low < 10) return out + " oh " + kOnes[low];
  return out + " " + cardinal_to_words(low);
}

// Integer digits (commas already removed) in words by rule 4.
std::string integer_to_words(const std::string& digits, bool may_be_year) {
  if (digits.size() > 1 && digits[0] == '0') return digits_one_by_one(digits);
  if (digits.size() > 13) return digits_one_by_one(digits);
  const uint64_t value = std::stoull(digits);
  if (value > kMaxCardinal) return digits_one_by_one(digits);
  if (may_be_year && digits.size() == 4 &&
      ((value >= 1100 && value <= 1999) || (value >= 2010 && value <= 2099))) {
    return year_to_words(value);
  }
  return cardinal_to_words(value);
}

void ordinalize_last(std::vector<std::string>& words) {
  std::string& word = words.back();
  static const std::array<std::pair<const char*, const char*>, 7> kIrregular = {{
      {"one", "first"},
      {"two", "second"},
      {"three", "third"},
      {"five", "fifth"},
      {"eight", "eighth"},
      {"nine", "ninth"},
      {"twelve", "twelfth"},
  }};
  for (const auto& [cardinal, ordinal] : kIrregular) {
    if (word == cardinal) {
      word = ordinal;
      return;
    }
  }
  if (word.back() == 'y') {
    word.pop_back();
    word += "ieth";
  } else {
    word += "th";
  }
}

void pluralize_last(std::vector<std::string>& words) {
  std::string& word = words.back();
  if (word.back() == 'y') {
    word.pop_back();
    word += "ies";
  } else if (word.back() == 'x') {
    word += "es";
  } else {
    word += 's';
  }
}

// True when text[pos..] starts with `suffix` and no word byte follows it.
bool suffix_ends_word(const std::string& text, size_t pos, std::string_view suffix) {
  if (text.compare(pos, suffix.size(), suffix) != 0) return false;
  const size_t end = pos + suffix.size();
  return end >= text.size() || !is_word_byte(text[end]);
}

// Reads the number starting at text[pos] (a digit) and appends its words;
// returns the position after everything it consumed.
size_t read_number(const std::string& text, size_t pos, bool money, std::vector<std::string>& out) {
  std::string digits;
  bool had_comma = false;
  while (pos < text.size() && is_digit(text[pos])) digits += text[pos++];
  // Thousands separators: ",ddd" not followed by another digit.
  while (pos + 3 < text.size() && text[pos] == ',' && is_digit(text[pos + 1]) &&
         is_digit(text[pos + 2]) && is_digit(text[pos + 3]) &&
         (pos + 4 >= text.size() || !is_digit(text[pos + 4]))) {
    digits.append(text, pos + 1, 3);
    pos += 4;
    had_comma = true;
  }
  std::string fraction;
  if (pos + 1 < text.size() && text[pos] == '.' && is_digit(text[pos + 1])) {
    ++pos;
    while (pos < text.size() && is_digit(text[pos])) fraction += text[pos++];
  }
  bool ordinal = false;
  bool plural = false;
  if (fraction.empty() && !money) {
    for (std::string_view suffix : {"st", "nd", "rd", "th"}) {
      if (suffix_ends_word(text, pos, suffix)) {
        ordinal = true;
        pos += suffix.size();
        break;
      }
    }
  }
  if (!ordinal && fraction.empty() && !money) {
    for (std::string_view suffix : {"s", "'s"}) {
      if (suffix_ends_word(text, pos, suffix)) {
        plural = true;
        pos += suffix.size();
        break;
      }
    }
  }

  const bool may_be_year = !had_comma && !ordinal && fraction.empty() && !money;
  const size_t first = out.size();
  append_words(integer_to_words(digits, may_be_year), out);
  const bool dollars_and_cents = money && fraction.size() == 2;
  if (!fraction.empty() && !dollars_and_cents) {
    out.emplace_back("point");
    append_words(digits_one_by_one(fraction), out);
  }
  if (ordinal) ordinalize_last(out);
  if (plural) pluralize_last(out);
  if (money) {
    const bool one = out.size() == first + 1 && out.back() == "one";
    out.emplace_back(one ? "dollar" : "dollars");
    if (dollars_and_cents && fraction != "00") {
      const uint64_t cents = std::stoull(fraction);
      append_words(cardinal_to_words(cents), out);
      out.emplace_back(cents == 1 ? "cent" : "cents");
    }
  }
  return pos;
}

}  // namespace

std::string cardinal_to_words(uint64_t value) {
  OASR_CHECK(value <= kMaxCardinal, kInvalidArgument, "cardinal_to_words: ", value,
             " is above the supported 10^12; read longer numbers digit by digit");
  if (value == 0) return kOnes[0];
  static const std::array<std::pair<uint64_t, const char*>, 4> kScales = {{
      {1'000'000'000'000ULL, "trillion"},
      {1'000'000'000ULL, "billion"},
      {1'000'000ULL, "million"},
      {1'000ULL, "thousand"},
  }};
  std::string out;
  for (const auto& [scale, name] : kScales) {
    if (value >= scale) {
      append_below_thousand(value / scale, out);
      out += ' ';
      out += name;
      value %= scale;
    }
  }
  append_below_thousand(value, out);
  return out;
}

std::string normalize_english(std::string_view raw) {
  const std::string text = prepare(raw);
  std::vector<std::string> words;
  std::string word;
  const auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (size_t pos = 0; pos < text.size();) {
    const char c = text[pos];
    const bool money = c == '$' && pos + 1 < text.size() && is_digit(text[pos + 1]);
    if (is_digit(c) || money) {
      flush();
      pos = read_number(text, money ? pos + 1 : pos, money, words);
    } else if (c == '\'') {
      // Rule 3: an apostrophe stays only inside a word.
      const bool inside = !word.empty() && pos + 1 < text.size() && is_word_byte(text[pos + 1]) &&
                          !is_digit(text[pos + 1]);
      if (inside) {
        word += c;
      } else {
        flush();
      }
      ++pos;
    } else if (!is_word_byte(c)) {
      flush();
      ++pos;
    } else {
      word += c;
      ++pos;
    }
  }
  flush();
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

}  // namespace oasr::eval
