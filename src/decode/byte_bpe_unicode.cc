// UTF-8, Unicode classes, NFC, the GPT-2 and Qwen2 pre-tokenizers and the byte map (see
// byte_bpe_unicode.h for what each follows).
#include "decode/byte_bpe_unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "core/error.h"

namespace oasr::decode::byte_bpe {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "decode/byte_bpe_unicode_ranges.inc"

bool in_ranges(char32_t c, const CodePointRange* begin, const CodePointRange* end) {
  // The first range whose last code point is >= c.
  const CodePointRange* it = std::lower_bound(
      begin, end, c, [](const CodePointRange& r, char32_t v) { return r.last < v; });
  return it != end && it->first <= c;
}

// Unicode's White_Space property, which is Oniguruma's \s for UTF-8 text.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

CharClass classify_slow(char32_t c) {
  if (is_white_space(c)) return CharClass::kWhitespace;
  if (in_ranges(c, std::begin(kLetterRanges), std::end(kLetterRanges))) return CharClass::kLetter;
  if (in_ranges(c, std::begin(kNumberRanges), std::end(kNumberRanges))) return CharClass::kNumber;
  return CharClass::kOther;
}

const std::array<CharClass, 128>& ascii_classes() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t{};
    for (char32_t c = 0; c < 128; ++c) t[c] = classify_slow(c);
    return t;
  }();
  return table;
}

// The length of the well-formed UTF-8 sequence at p (Unicode Table 3-7), or
// 0 when ill-formed; then *subpart is the length of its maximal ill-formed
// subpart (at least 1).
size_t sequence_length(const unsigned char* p, size_t available, size_t* subpart) {
  const unsigned char lead = p[0];
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char second_lo = 0x80;
  unsigned char second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // no overlong forms
    if (lead == 0xED) second_hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_lo = 0x90;  // no overlong forms
    if (lead == 0xF4) second_hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *subpart = 1;  // a continuation byte or a byte that never appears in UTF-8
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    const unsigned char lo = i == 1 ? second_lo : 0x80;
    const unsigned char hi = i == 1 ? second_hi : 0xBF;
    if (i >= available || p[i] < lo || p[i] > hi) {
      *subpart = i;
      return 0;
    }
  }
  return length;
}

char32_t decode_sequence(const unsigned char* p, size_t length) {
  switch (length) {
    case 1:
      return p[0];
    case 2:
      return (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
    case 3:
      return (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
    default:
      return (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
             (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu);
  }
}

}  // namespace

CharClass classify(char32_t code_point) {
  if (code_point < 128) return ascii_classes()[code_point];
  return classify_slow(code_point);
}

const char* unicode_version() {
  return kUnicodeVersion;
}

std::u32string decode_utf8_strict(std::string_view text, const char* what) {
  std::u32string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    size_t subpart = 0;
    const size_t length = sequence_length(p + i, text.size() - i, &subpart);
    OASR_CHECK(length != 0, kInvalidArgument, what, ": the text is not valid UTF-8 (byte ", i,
               " of ", text.size(), " starts an ill-formed sequence); pass UTF-8 text");
    out.push_back(decode_sequence(p + i, length));
    i += length;
  }
  return out;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t subpart = 0;
    const size_t length = sequence_length(p + i, bytes.size() - i, &subpart);
    if (length != 0) {
      out.append(bytes.substr(i, length));
      i += length;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      i += subpart;
    }
  }
  return out;
}

namespace {

// End of the run of characters of class `c` in `text` starting at i.
size_t class_run_end(std::u32string_view text, size_t i, CharClass c) {
  while (i < text.size() && classify(text[i]) == c) ++i;
  return i;
}

// Both patterns end with `\s+(?!\S)|\s+`; at i, with [i, run) a whitespace
// run: the whole run when it ends the text, else the run less its last
// character (which then prefixes the next piece) when that leaves one or
// more; otherwise `\s+`, which takes the single character.
size_t whitespace_piece_end(size_t i, size_t run, size_t n) {
  return (run == n || run - i < 2) ? run : run - 1;
}

// 's|'t|'re|'ve|'m|'ll|'d at i (both patterns list them in this order): the
// end of the match, or i. `fold_case` is Qwen2's (?i:...), Unicode simple
// case folding: 'S, 'RE, ... match, and so does U+017F LATIN SMALL LETTER
// LONG S, which folds to 's'.
size_t contraction_end(std::u32string_view text, size_t i, bool fold_case) {
  const size_t n = text.size();
  if (text[i] != U'\'' || i + 1 >= n) return i;
  auto is = [fold_case](char32_t c, char lower) {
    const char32_t l = static_cast<char32_t>(lower);
    return c == l || (fold_case && (c == l - 32 || (lower == 's' && c == U'\u017F')));
  };
  const char32_t a = text[i + 1];
  const char32_t b = i + 2 < n ? text[i + 2] : 0;
  if (is(a, 's') || is(a, 't')) return i + 2;
  if ((is(a, 'r') && is(b, 'e')) || (is(a, 'v') && is(b, 'e'))) return i + 3;
  if (is(a, 'm')) return i + 2;
  if (is(a, 'l') && is(b, 'l')) return i + 3;
  if (is(a, 'd')) return i + 2;
  return i;
}

}  // namespace

std::vector<Span> gpt2_split(std::u32string_view text) {
  std::vector<Span> spans;
  const size_t n = text.size();
  auto class_at = [&](size_t i) { return classify(text[i]); };
  auto run_end = [&](size_t i, CharClass c) { return class_run_end(text, i, c); };
  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, no word boundary).
    size_t end = contraction_end(text, i, false);
    if (end == i) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020 then a
      // run. Without the space the run would have to start at a space, which
      // no class but whitespace holds, so one attempt decides each branch.
      const size_t body = text[i] == U' ' ? i + 1 : i;
      if (body < n) {
        switch (class_at(body)) {
          case CharClass::kLetter:
            end = run_end(body, CharClass::kLetter);
            break;
          case CharClass::kNumber:
            end = run_end(body, CharClass::kNumber);
            break;
          case CharClass::kOther:
            end = run_end(body, CharClass::kOther);
            break;
          case CharClass::kWhitespace:
            break;
        }
      }
    }
    if (end == i) {
      // Here text[i] is whitespace.
      end = whitespace_piece_end(i, run_end(i, CharClass::kWhitespace), n);
    }
    spans.push_back(Span{i, end});
    i = end;
  }
  return spans;
}

std::vector<Span> qwen2_split(std::u32string_view text) {
  std::vector<Span> spans;
  const size_t n = text.size();
  auto class_at = [&](size_t i) { return classify(text[i]); };
  auto run_end = [&](size_t i, CharClass c) { return class_run_end(text, i, c); };
  auto is_line_break = [](char32_t c) { return c == U'\r' || c == U'\n'; };
  size_t i = 0;
  while (i < n) {
    // (?i:'s|'t|'re|'ve|'m|'ll|'d).
    size_t end = contraction_end(text, i, true);
    // [^\r\n\p{L}\p{N}]?\p{L}+: one optional character that is no line break,
    // letter or number (a space, a tab, punctuation), then letters.
    if (end == i) {
      const CharClass c = class_at(i);
      if (c == CharClass::kLetter) {
        end = run_end(i, CharClass::kLetter);
      } else if (c != CharClass::kNumber && !is_line_break(text[i]) && i + 1 < n &&
                 class_at(i + 1) == CharClass::kLetter) {
        end = run_end(i + 1, CharClass::kLetter);
      }
    }
    // \p{N}: one number character.
    if (end == i && class_at(i) == CharClass::kNumber) end = i + 1;
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    if (end == i) {
      const size_t body = text[i] == U' ' ? i + 1 : i;
      if (body < n && class_at(body) == CharClass::kOther) {
        end = run_end(body, CharClass::kOther);
        while (end < n && is_line_break(text[end])) ++end;
      }
    }
    if (end == i) {
      // Here text[i] is whitespace. \s*[\r\n]+: the run up to and including
      // its last line break (the greedy \s* gives back until one follows).
      const size_t run = run_end(i, CharClass::kWhitespace);
      for (size_t j = run; j > i; --j) {
        if (is_line_break(text[j - 1])) {
          end = j;
          break;
        }
      }
      if (end == i) end = whitespace_piece_end(i, run, n);
    }
    spans.push_back(Span{i, end});
    i = end;
  }
  return spans;
}

std::u32string nfc(std::u32string_view text) {
  std::string utf8;
  utf8.reserve(text.size());
  for (char32_t c : text) append_utf8(c, utf8);
  // utf8proc_NFC returns a malloc'd, NUL-terminated string; the input is
  // valid UTF-8 of scalar values (decode_utf8_strict made it), and a NUL
  // inside would end it early, so NUL-separated parts are normalized apart
  // (NUL has combining class 0 and composes with nothing: the same result).
  std::u32string out;
  out.reserve(text.size());
  size_t start = 0;
  while (start <= utf8.size()) {
    const size_t stop = std::min(utf8.find('\0', start), utf8.size());
    const std::string part = utf8.substr(start, stop - start);
    utf8proc_uint8_t* normalized =
        utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(part.c_str()));
    OASR_CHECK(normalized != nullptr, kInternal, "NFC normalization failed (out of memory?)");
    const std::string result(reinterpret_cast<const char*>(normalized));
    std::free(normalized);
    out += decode_utf8_strict(result, "NFC output");
    if (stop == utf8.size()) break;
    out.push_back(U'\0');
    start = stop + 1;
  }
  return out;
}

const char* nfc_unicode_version() {
  return utf8proc_unicode_version();
}

const std::array<char32_t, 256>& byte_to_char() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next_unprintable = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next_unprintable++;
    }
    return t;
  }();
  return table;
}

int byte_of_char(char32_t code_point) {
  // The images are U+0021..U+0143; invert once.
  static const std::array<int16_t, 0x144> inverse = [] {
    std::array<int16_t, 0x144> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b)
      t[byte_to_char()[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return t;
  }();
  return code_point < inverse.size() ? inverse[code_point] : -1;
}

}  // namespace oasr::decode::byte_bpe
