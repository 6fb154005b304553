// Token ids -> text, as WeNet's tokenizers detokenize (wenet/text/
// char_tokenizer.py and bpe_tokenizer.py): look every id up in the units
// table (units.txt: "token id" per line), join the tokens with the connect
// symbol ("" by default); for BPE units, turn every U+2581 "▁" into a space
// and strip whitespace from both ends. Char units are joined as they are ("▁"
// stays). Ids are shown as their token whatever it is (<unk> included); the
// searches never emit blank, and <sos/eos> only if the CTC head ranks it
// first, in which case WeNet prints it too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace oasr::decode {

class UnitTable {
 public:
  // Reads units.txt: each non-blank line holds a token and its id separated
  // by whitespace. Refuses (kCorruptFile, naming file and line) a line of
  // another shape, a negative or non-numeric id, a repeated token or id.
  static UnitTable load(const std::filesystem::path& path);
  // The same from (token, id) pairs; refuses repeats (kInvalidArgument).
  static UnitTable from_entries(const std::vector<std::pair<std::string, int64_t>>& entries);

  size_t size() const { return token_of_id_.size(); }
  bool contains(int64_t id) const { return token_of_id_.count(id) != 0; }
  // The token of `id`; refuses an id the table does not have (kInvalidArgument).
  const std::string& token(int64_t id) const;
  // The id of `token`, or -1.
  int64_t id(std::string_view token) const;

 private:
  std::unordered_map<int64_t, std::string> token_of_id_;
  std::unordered_map<std::string, int64_t> id_of_token_;
};

enum class TokenizerKind {
  kChar,  // WeNet's "char" tokenizer: tokens joined as they are
  kBpe,   // WeNet's "bpe" tokenizer: "▁" -> space, outer whitespace stripped
};

struct DetokenizeOptions {
  TokenizerKind kind = TokenizerKind::kChar;
  std::string connect_symbol;  // WeNet's tokenizer_conf connect_symbol ("" by default)
};

std::string detokenize(const UnitTable& units, std::span<const int64_t> ids,
                       const DetokenizeOptions& options = {});

// Python's str.strip() with no argument: removes leading and trailing
// Unicode whitespace (str.isspace) from UTF-8 text.
std::string strip_python_whitespace(std::string_view text);

}  // namespace oasr::decode
