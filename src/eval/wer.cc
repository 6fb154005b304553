// Levenshtein alignment counts for WER/CER; the tie rule is in wer.h.
#include "eval/wer.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace oasr::eval {
namespace {

// A DP cell: the edit distance so far and, among alignments achieving it,
// the largest number of substitutions. Compared lexicographically.
struct Cell {
  int64_t cost = 0;
  int64_t substitutions = 0;
};

bool better(const Cell& a, const Cell& b) {
  return a.cost < b.cost || (a.cost == b.cost && a.substitutions > b.substitutions);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  return 1;  // ASCII, or an invalid lead byte counted as one character
}

}  // namespace

const char* error_rate_unit_name(ErrorRateUnit unit) {
  return unit == ErrorRateUnit::kWord ? "wer" : "cer";
}

ErrorRateUnit parse_error_rate_unit(std::string_view name) {
  if (name == "wer") return ErrorRateUnit::kWord;
  if (name == "cer") return ErrorRateUnit::kCharacter;
  OASR_THROW(kInvalidArgument, "unknown metric '", name, "'; use wer or cer");
}

double EditCounts::error_rate() const {
  return static_cast<double>(errors()) /
         static_cast<double>(std::max<int64_t>(reference_length, 1));
}

EditCounts& EditCounts::operator+=(const EditCounts& other) {
  substitutions += other.substitutions;
  deletions += other.deletions;
  insertions += other.insertions;
  reference_length += other.reference_length;
  return *this;
}

EditCounts align(const std::vector<std::string>& reference,
                 const std::vector<std::string>& hypothesis) {
  const size_t n = reference.size();
  const size_t m = hypothesis.size();
  // Two rows suffice: row i holds the best cell for reference[0..i) vs
  // hypothesis[0..j) for every j.
  std::vector<Cell> previous(m + 1);
  std::vector<Cell> current(m + 1);
  for (size_t j = 0; j <= m; ++j) previous[j] = {static_cast<int64_t>(j), 0};
  for (size_t i = 1; i <= n; ++i) {
    current[0] = {static_cast<int64_t>(i), 0};
    for (size_t j = 1; j <= m; ++j) {
      const bool match = reference[i - 1] == hypothesis[j - 1];
      Cell best = previous[j - 1];  // hit or substitution
      if (!match) {
        best.cost += 1;
        best.substitutions += 1;
      }
      const Cell deletion{previous[j].cost + 1, previous[j].substitutions};
      const Cell insertion{current[j - 1].cost + 1, current[j - 1].substitutions};
      if (better(deletion, best)) best = deletion;
      if (better(insertion, best)) best = insertion;
      current[j] = best;
    }
    std::swap(previous, current);
  }
  const Cell end = previous[m];
  EditCounts counts;
  counts.reference_length = static_cast<int64_t>(n);
  counts.substitutions = end.substitutions;
  // S + D + I = cost and D - I = n - m determine D and I from S.
  const int64_t deletions_plus_insertions = end.cost - end.substitutions;
  const int64_t length_difference = static_cast<int64_t>(n) - static_cast<int64_t>(m);
  counts.deletions = (deletions_plus_insertions + length_difference) / 2;
  counts.insertions = (deletions_plus_insertions - length_difference) / 2;
  OASR_CHECK(counts.deletions >= 0 && counts.insertions >= 0 &&
                 counts.deletions - counts.insertions == length_difference,
             kInternal, "align: inconsistent edit counts (cost ", end.cost, ", substitutions ",
             end.substitutions, ", lengths ", n, "/", m, ")");
  return counts;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && is_space(text[pos])) ++pos;
    const size_t start = pos;
    while (pos < text.size() && !is_space(text[pos])) ++pos;
    if (pos > start) words.emplace_back(text.substr(start, pos - start));
  }
  return words;
}

std::vector<std::string> split_characters(std::string_view text) {
  std::vector<std::string> characters;
  for (size_t pos = 0; pos < text.size();) {
    if (is_space(text[pos])) {
      ++pos;
      continue;
    }
    size_t length = utf8_length(static_cast<unsigned char>(text[pos]));
    length = std::min(length, text.size() - pos);
    characters.emplace_back(text.substr(pos, length));
    pos += length;
  }
  return characters;
}

std::vector<std::string> tokenize(std::string_view text, ErrorRateUnit unit) {
  return unit == ErrorRateUnit::kWord ? split_words(text) : split_characters(text);
}

EditCounts EvalResult::add(std::string id, std::string reference, std::string hypothesis) {
  const EditCounts counts = align(tokenize(reference, unit), tokenize(hypothesis, unit));
  totals += counts;
  ++utterances;
  if (per_utterance) {
    per_utterance->push_back({std::move(id), std::move(reference), std::move(hypothesis), counts});
  }
  return counts;
}

void to_json(nlohmann::json& json, const EvalResult& result) {
  const bool words = result.unit == ErrorRateUnit::kWord;
  const char* length_key = words ? "reference_words" : "reference_characters";
  json = nlohmann::json::object();
  json["metric"] = error_rate_unit_name(result.unit);
  json[error_rate_unit_name(result.unit)] = result.totals.error_rate();
  json["errors"] = result.totals.errors();
  json["substitutions"] = result.totals.substitutions;
  json["deletions"] = result.totals.deletions;
  json["insertions"] = result.totals.insertions;
  json[length_key] = result.totals.reference_length;
  json["utterances"] = result.utterances;
  if (!result.per_utterance) return;
  nlohmann::json list = nlohmann::json::array();
  for (const UtteranceScore& score : *result.per_utterance) {
    list.push_back({{"id", score.id},
                    {"reference", score.reference},
                    {"hypothesis", score.hypothesis},
                    {error_rate_unit_name(result.unit), score.counts.error_rate()},
                    {"errors", score.counts.errors()},
                    {"substitutions", score.counts.substitutions},
                    {"deletions", score.counts.deletions},
                    {"insertions", score.counts.insertions},
                    {length_key, score.counts.reference_length}});
  }
  json["per_utterance"] = std::move(list);
}

}  // namespace oasr::eval
