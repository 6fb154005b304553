// Byte-level BPE (GPT-2 / Whisper style), behaving as Hugging Face
// tokenizers' Tokenizer does for a tokenizer.json with model BPE, the
// ByteLevel pre-tokenizer and the ByteLevel decoder:
//
// encode(text)  (Tokenizer.encode(text, add_special_tokens=False).ids)
//   1. added tokens are cut out first, literally, leftmost-longest: those
//      with normalized=false, then those with normalized=true in what is
//      left, after the normalizer (NFC, when the file has it) ran on it;
//      lstrip / rstrip tokens absorb the whitespace beside them;
//   2. every other piece gets a leading space if add_prefix_space is set
//      and it does not start with one, and is split by the GPT-2 pattern
//      (byte_bpe_unicode.h);
//   3. each pre-token's UTF-8 bytes become printable characters (GPT-2's
//      bytes_to_unicode), which are merged pairwise, always the pair of
//      lowest merge rank, leftmost first, until no ranked pair is left
//      (results cached per pre-token).
// decode(ids, skip_special_tokens)  (Tokenizer.decode)
//   ids -> token strings (special tokens dropped when asked) -> each
//   token's characters back to bytes (a token with a character outside the
//   byte map contributes its own UTF-8) -> one byte string, decoded as UTF-8
//   with every ill-formed part replaced by U+FFFD. Nothing is stripped and
//   no spaces are cleaned up: tokenizers' decode does no such thing (that
//   is transformers' clean_up_tokenization_spaces, which a directory with
//   only tokenizer.json does not configure). The one deliberate difference:
//   an id that names no token is refused (kInvalidArgument) where tokenizers
//   silently drops it; Whisper's timestamp ids (>= 50363 for tiny.en, which
//   its tokenizer.json does not list) must be handled by the caller.
//
// Qwen2's tokenizer.json (Qwen2-Audio's) is read too: the NFC normalizer
// (applied to the text between the normalized=false added tokens, before
// the normalized=true ones are cut out) and the pre-tokenizer Sequence of
// Split with Qwen2's pattern (byte_bpe_unicode.h) and ByteLevel without its
// own regex.
//
// Refused at load, with kUnsupported naming the field: a model type other
// than BPE, BPE dropout, byte_fallback, continuing_subword_prefix /
// end_of_word_suffix, a normalizer other than NFC, a pre-tokenizer other
// than ByteLevel or Qwen2's Sequence (another Split pattern is refused
// naming it), a decoder other than ByteLevel, added tokens with single_word. Malformed files:
// kCorruptFile naming the file and the entry; missing files: kNotFound.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace oasr::decode {

class ByteLevelBpeTokenizer {
 public:
  struct AddedToken {
    std::string content;
    int64_t id = 0;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;
  };

  static ByteLevelBpeTokenizer from_tokenizer_json(const std::filesystem::path& path);
  // GPT-2 / slow-tokenizer files: vocab.json ({token: id}), merges.txt (one
  // "a b" per line, an optional "#version" first line) and added_tokens.json
  // ({token: id}; an empty path means none). Every added token, and
  // <|endoftext|> when vocab.json has it (GPT-2's and Whisper's bos/eos/unk),
  // is special; add_prefix_space is off (as in GPT-2's and Whisper's
  // tokenizers).
  static ByteLevelBpeTokenizer from_vocab_merges(const std::filesystem::path& vocab_json,
                                                 const std::filesystem::path& merges_txt,
                                                 const std::filesystem::path& added_tokens_json);

  // Token ids of UTF-8 text (no special tokens added around it); refuses
  // text that is not valid UTF-8 (kInvalidArgument).
  std::vector<int64_t> encode(std::string_view text) const;
  // Text of token ids; an id naming no token is refused (kInvalidArgument).
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens = true) const;
  // The id of a token string as stored ("<|en|>", "Ġthe"); added tokens first.
  std::optional<int64_t> token_to_id(std::string_view token) const;
  // The token string of an id; kInvalidArgument for an id naming no token.
  std::string id_to_token(int64_t id) const;
  // Whether `id` names a token (the vocabulary or an added token).
  bool knows(int64_t id) const {
    return added_by_id_.count(id) != 0 || id_to_vocab_.count(id) != 0;
  }
  bool is_special(int64_t id) const;
  // One past the largest id of the vocabulary and the added tokens (for
  // Whisper's tokenizer.json, tokenizers' get_vocab_size(with_added_tokens=True)).
  int64_t vocab_size() const;

  bool add_prefix_space() const { return add_prefix_space_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct Merge {
    int64_t rank;
    int64_t merged_id;
  };
  struct Cache;  // per-pre-token results, shared by copies, guarded by a mutex

  ByteLevelBpeTokenizer();
  // Checks ids, builds the reverse maps and the merge table; `source` names
  // the file(s) in errors.
  void finish(const std::vector<std::pair<std::string, std::string>>& merge_pairs,
              const std::string& source);
  void encode_piece(std::u32string_view piece, std::vector<int64_t>& ids) const;
  void encode_word(std::u32string_view word, std::vector<int64_t>& ids) const;
  void bpe(std::string_view bytes, std::vector<int64_t>& ids) const;

  std::unordered_map<std::string, int64_t> vocab_;  // model vocabulary
  std::unordered_map<int64_t, std::string> id_to_vocab_;
  std::vector<AddedToken> added_;
  std::unordered_map<std::string, size_t> added_by_content_;  // -> index in added_
  std::unordered_map<int64_t, size_t> added_by_id_;
  std::unordered_set<std::string> special_contents_;
  std::vector<std::u32string> added_chars_;  // added_[i].content as code points
  // Added tokens (indices) by first code point, longest first: matched on the
  // raw text (normalized=false) and then on what is left (normalized=true).
  std::unordered_map<char32_t, std::vector<size_t>> raw_added_, normalized_added_;
  std::array<int64_t, 256> byte_ids_{};         // id of each byte's character, -1 if none
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  std::optional<int64_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  // How text between added tokens is split before the BPE: not at all
  // (ByteLevel with use_regex false), by GPT-2's pattern, or by Qwen2's.
  enum class Split { kNone, kGpt2, kQwen2 };
  bool add_prefix_space_ = false;
  Split split_ = Split::kGpt2;
  bool nfc_ = false;  // the NFC normalizer
  int64_t vocab_size_ = 0;
  std::shared_ptr<Cache> cache_;
};

}  // namespace oasr::decode
