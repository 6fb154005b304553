// Word and character error rates for `oasr eval`.
//
// Alignment: unit-cost Levenshtein (substitution, deletion, insertion each
// cost 1). The total number of errors is the edit distance and does not
// depend on how ties are broken, but the split into S/D/I does (for "a b" vs
// "b c", two substitutions and one deletion + one hit + one insertion both
// cost 2). The rule here: among all minimum-cost alignments, report the one
// with the most substitutions. Because D - I = |ref| - |hyp| is fixed and
// S + D + I is the distance, this fixes all three counts uniquely, whatever
// path a backtrace would take. (jiwer/rapidfuzz take one greedy backtrace and
// can report fewer substitutions for the same total; Kaldi's compute-wer also
// prefers substitutions.)
//
// Units: WER aligns whitespace-separated words; CER aligns UTF-8 code points
// of the text with all whitespace removed (so a misplaced word boundary costs
// nothing in CER). Both expect already-normalized text (text_normalizer.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace oasr::eval {

enum class ErrorRateUnit { kWord, kCharacter };

// "wer" / "cer"; parse throws kInvalidArgument for anything else.
const char* error_rate_unit_name(ErrorRateUnit unit);
ErrorRateUnit parse_error_rate_unit(std::string_view name);

struct EditCounts {
  int64_t substitutions = 0;
  int64_t deletions = 0;
  int64_t insertions = 0;
  int64_t reference_length = 0;  // words (WER) or characters (CER)

  int64_t errors() const { return substitutions + deletions + insertions; }
  // errors / reference_length. An empty reference divides by 1 instead, so
  // insertions against silence still give a finite number (JSON has no inf).
  double error_rate() const;
  EditCounts& operator+=(const EditCounts& other);
};

// Aligns two token sequences by the rule in the header comment.
EditCounts align(const std::vector<std::string>& reference,
                 const std::vector<std::string>& hypothesis);

// Splits normalized text into the tokens the unit aligns.
std::vector<std::string> split_words(std::string_view text);
std::vector<std::string> split_characters(std::string_view text);  // whitespace dropped
std::vector<std::string> tokenize(std::string_view text, ErrorRateUnit unit);

// One scored utterance, as `oasr eval --output-format json` reports it.
struct UtteranceScore {
  std::string id;
  std::string reference;   // normalized
  std::string hypothesis;  // normalized
  EditCounts counts;
};

// Corpus-level result: sums of per-utterance counts; the rate is
// sum(errors) / sum(reference lengths), not a mean of per-utterance rates.
struct EvalResult {
  ErrorRateUnit unit = ErrorRateUnit::kWord;
  EditCounts totals;
  int64_t utterances = 0;
  std::optional<std::vector<UtteranceScore>> per_utterance;

  // Scores one pair (both already normalized) and adds it to the totals;
  // keeps the utterance detail when `per_utterance` is engaged. Returns
  // this utterance's counts.
  EditCounts add(std::string id, std::string reference, std::string hypothesis);
};

// JSON: {"metric": "wer", "wer": 0.1, "substitutions": .., "deletions": ..,
// "insertions": .., "reference_words": .., "utterances": .., "per_utterance":
// [{"id", "reference", "hypothesis", "errors", "substitutions", ...}]}. For CER
// the keys are "cer" and "reference_characters". per_utterance is omitted
// when not collected.
void to_json(nlohmann::json& json, const EvalResult& result);

}  // namespace oasr::eval
