// English text normalization for WER/CER scoring (`oasr eval`).
//
// Both the reference and the hypothesis go through the same function, so
// surface differences that a listener would not hear stop counting as errors.
// The rules, applied in this order, are deliberately small and fixed:
//
//  1. Case: ASCII and Latin-1 capitals (U+00C0..U+00DE except U+00D7) are
//     lowercased. Every other UTF-8 sequence is kept byte for byte; invalid
//     bytes are kept too (they become part of a word).
//  2. Symbols: "%" becomes the word "percent"; "$" directly before a number
//     makes it money (see 4). Other ASCII punctuation, hyphens and dashes
//     included, separates words, as do Latin-1 symbols (U+00A0..U+00BF, U+00D7,
//     U+00F7) and the common Unicode quotes, dashes and ellipsis.
//  3. Apostrophes (' and U+2018/U+2019) survive only between two word
//     characters: "don't" stays "don't", "'quoted'" becomes "quoted".
//     Contractions are not expanded.
//  4. Numbers are written out in words, so "42" and "forty two" score equal:
//     - cardinals up to 10^12 without "and": "105" -> "one hundred five",
//       "1,234" -> "one thousand two hundred thirty four" (commas are thousands
//       separators only when followed by exactly three digits);
//     - a plain four-digit integer in 1100..1999 or 2010..2099 is read as a
//       year, in pairs: "1999" -> "nineteen ninety nine", "1905" -> "nineteen oh
//       five", "1900" -> "nineteen hundred"; 2000..2009 stay cardinal;
//     - decimals read digit by digit after "point": "3.14" -> "three point one
//       four";
//     - ordinals: "1st" -> "first", "22nd" -> "twenty second";
//     - decades/plurals: "1990s" or "1990's" -> "nineteen nineties";
//     - money: "$5" -> "five dollars", "$1" -> "one dollar", "$2.50" -> "two
//       dollars fifty cents" (exactly two decimals), "$1.5" -> "one point five
//       dollars";
//     - digit strings with a leading zero, or above 10^12, are read digit by
//       digit: "007" -> "zero zero seven".
//  5. Whitespace is collapsed to single spaces, none leading or trailing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace oasr::eval {

// Normalizes `text` by the rules above; the result is lowercase words joined
// by single spaces (empty when nothing speakable remains).
std::string normalize_english(std::string_view text);

// Cardinal number in words, e.g. 1234 -> "one thousand two hundred thirty
// four". Throws kInvalidArgument above 10^12.
std::string cardinal_to_words(uint64_t value);

}  // namespace oasr::eval
