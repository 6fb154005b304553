// The text machinery under ByteLevelBpeTokenizer (byte_bpe_tokenizer.h),
// each piece defined as Hugging Face tokenizers defines it:
//  - UTF-8 decoding of the input (invalid input is refused) and lossy UTF-8
//    decoding of detokenized bytes (Rust's String::from_utf8_lossy: each
//    maximal ill-formed subpart becomes one U+FFFD, the Unicode standard's
//    recommended practice, which Python's errors="replace" follows too);
//  - the Unicode classes the GPT-2 pre-tokenization pattern uses: \p{L}
//    (general category L*), \p{N} (N*), \s (the White_Space property, as
//    Oniguruma's \s is), from a generated range table (Unicode 14.0; see
//    byte_bpe_unicode_ranges.inc); no regex library or ICU is needed;
//  - the GPT-2 pre-tokenizer: the pattern
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//    matched by a hand-written scanner that follows the alternation's
//    leftmost-first, backtracking semantics exactly;
//  - the Qwen2 pre-tokenizer (the Split pattern of Qwen2's tokenizer.json)
//      (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//      | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//    matched the same way;
//  - Unicode NFC (the NFC normalizer), by utf8proc;
//  - GPT-2's byte <-> printable-character map (bytes_to_unicode).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oasr::decode::byte_bpe {

enum class CharClass : uint8_t { kLetter, kNumber, kWhitespace, kOther };

// Class of a Unicode scalar value as the pre-tokenizer sees it; whitespace
// wins over letter/number (no code point is both).
CharClass classify(char32_t code_point);
const char* unicode_version();  // of the generated table, "14.0.0"

// Decodes UTF-8 into code points; refuses ill-formed input (kInvalidArgument,
// naming `what` and the byte offset).
std::u32string decode_utf8_strict(std::string_view text, const char* what);
void append_utf8(char32_t code_point, std::string& out);

// Lossy UTF-8 validation: valid sequences are kept, every maximal ill-formed
// subpart is replaced by U+FFFD (EF BF BD).
std::string utf8_lossy(std::string_view bytes);

// One pre-token: [begin, end) code-point offsets into the text.
struct Span {
  size_t begin;
  size_t end;
};
// Splits `text` into the GPT-2 pattern's matches (they cover it entirely).
std::vector<Span> gpt2_split(std::u32string_view text);

// Splits `text` into the Qwen2 pattern's matches (they cover it entirely).
std::vector<Span> qwen2_split(std::u32string_view text);

// The Unicode NFC form of `text` (canonical decomposition, then canonical
// composition), as tokenizers' NFC normalizer computes it.
std::u32string nfc(std::u32string_view text);
const char* nfc_unicode_version();  // utf8proc's, e.g. "15.0.0"

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
// other 68 to U+0100.. in byte order.
const std::array<char32_t, 256>& byte_to_char();
// The inverse; -1 for a code point that is no byte's image.
int byte_of_char(char32_t code_point);

}  // namespace oasr::decode::byte_bpe
