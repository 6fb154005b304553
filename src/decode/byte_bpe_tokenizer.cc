// Byte-level BPE: loading (tokenizer.json or vocab.json + merges.txt +
// added_tokens.json), encode and decode. Behaviour: byte_bpe_tokenizer.h.
#include "decode/byte_bpe_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_error.h"
#include "decode/byte_bpe_unicode.h"

namespace oasr::decode {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kMaxCachedWordBytes = 256;   // longer pre-tokens are rare: not cached
constexpr size_t kMaxCacheEntries = 1 << 16;  // then the cache starts over

std::string read_file(const fs::path& path, const char* what) {
  OASR_CHECK(fs::is_regular_file(path), kNotFound, what, " ", path.string(),
             " does not exist (or is not a file)");
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, "cannot open ", what, " ", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  OASR_CHECK(!in.bad(), kIo, "cannot read ", what, " ", path.string());
  return buffer.str();
}

json parse_json(const fs::path& path, const char* what) {
  const std::string text = read_file(path, what);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number like 1e999
    OASR_THROW(kCorruptFile, what, " ", path.string(), " is not valid JSON: ", json_error_text(e));
  }
}

// Reads `object[key]` as T, refusing a wrong type with the file and key named.
template <typename T>
T get_field(const json& object, const char* key, const std::string& where, T fallback) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    OASR_THROW(kCorruptFile, where, ": field '", key, "' has the wrong type (", it->type_name(),
               ")");
  }
}

// Below 2^32: merges pack two ids into one key, and one past the largest id
// (the vocabulary size) must not overflow.
constexpr int64_t kIdLimit = int64_t{1} << 32;

int64_t id_field(const json& value, const std::string& where) {
  OASR_CHECK(
      value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kIdLimit,
      kCorruptFile, where, ": a token id must be an integer in [0, 2^32), got ", value.dump());
  return value.get<int64_t>();
}

bool is_white_space(char32_t c) {
  return byte_bpe::classify(c) == byte_bpe::CharClass::kWhitespace;
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  for (char32_t c : text) byte_bpe::append_utf8(c, out);
  return out;
}

// The Split pattern of Qwen2's tokenizer.json, matched by byte_bpe::qwen2_split.
constexpr std::string_view kQwen2Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2's pre-tokenizer: a Sequence of Split {pattern {Regex: kQwen2Pattern},
// behavior Isolated, invert false} and ByteLevel {add_prefix_space false,
// use_regex false}. Any other sequence is refused naming what differs.
void check_qwen2_sequence(const json& pre, const std::string& where) {
  const std::string at = where + " pre_tokenizer";
  OASR_CHECK(pre.contains("pretokenizers") && pre.at("pretokenizers").is_array() &&
                 pre.at("pretokenizers").size() == 2,
             kUnsupported, at,
             ": a Sequence pre-tokenizer is read only as Qwen2's [Split, ByteLevel]; this one is ",
             pre.dump());
  const json& split = pre.at("pretokenizers")[0];
  const json& byte_level = pre.at("pretokenizers")[1];
  OASR_CHECK(split.is_object() && get_field<std::string>(split, "type", at, "") == "Split" &&
                 byte_level.is_object() &&
                 get_field<std::string>(byte_level, "type", at, "") == "ByteLevel",
             kUnsupported, at, ": a Sequence pre-tokenizer is read only as Qwen2's [Split, ",
             "ByteLevel]; this one is ", pre.dump());
  const json pattern = split.contains("pattern") ? split.at("pattern") : json();
  const bool qwen2 = pattern.is_object() && pattern.contains("Regex") &&
                     pattern.at("Regex").is_string() &&
                     pattern.at("Regex").get<std::string>() == kQwen2Pattern;
  OASR_CHECK(qwen2, kUnsupported, at, ": the Split pattern ", pattern.dump(),
             " is not Qwen2's; oasr matches that pattern and GPT-2's (ByteLevel) only");
  OASR_CHECK(get_field<std::string>(split, "behavior", at, "") == "Isolated" &&
                 !get_field<bool>(split, "invert", at, false),
             kUnsupported, at, ": the Split must be behavior Isolated, invert false; found ",
             split.dump());
  OASR_CHECK(!get_field<bool>(byte_level, "add_prefix_space", at, true) &&
                 !get_field<bool>(byte_level, "use_regex", at, true),
             kUnsupported, at,
             ": after the Split, ByteLevel must have add_prefix_space and use_regex false; found ",
             byte_level.dump());
}

}  // namespace

struct ByteLevelBpeTokenizer::Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int64_t>> words;
};

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer() : cache_(std::make_shared<Cache>()) {}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_tokenizer_json(const fs::path& path) {
  const json root = parse_json(path, "tokenizer.json");
  const std::string where = path.string();
  OASR_CHECK(root.is_object(), kCorruptFile, where, ": the top level must be a JSON object");
  ByteLevelBpeTokenizer tok;

  // The model.
  OASR_CHECK(root.contains("model") && root.at("model").is_object(), kCorruptFile, where,
             ": no 'model' object");
  const json& model = root.at("model");
  const std::string type = get_field<std::string>(model, "type", where + " model", "");
  OASR_CHECK(type == "BPE", kUnsupported, where, ": model type '", type,
             "' is not supported; oasr reads byte-level BPE tokenizers (model type BPE)");
  OASR_CHECK(get_field<double>(model, "dropout", where + " model", 0.0) == 0.0, kUnsupported, where,
             ": BPE dropout is a training-time augmentation; set model.dropout to null");
  OASR_CHECK(!get_field<bool>(model, "byte_fallback", where + " model", false), kUnsupported, where,
             ": model.byte_fallback is for SentencePiece-style BPE, not byte-level BPE");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    OASR_CHECK(get_field<std::string>(model, affix, where + " model", "").empty(), kUnsupported,
               where, ": model.", affix, " is not used by byte-level BPE and is not supported");
  }
  tok.fuse_unk_ = get_field<bool>(model, "fuse_unk", where + " model", false);
  tok.ignore_merges_ = get_field<bool>(model, "ignore_merges", where + " model", false);
  const std::string unk = get_field<std::string>(model, "unk_token", where + " model", "");

  OASR_CHECK(model.contains("vocab") && model.at("vocab").is_object(), kCorruptFile, where,
             ": model.vocab must be an object {token: id}");
  for (const auto& [token, id] : model.at("vocab").items()) {
    tok.vocab_.emplace(token, id_field(id, where + " model.vocab['" + token + "']"));
  }
  if (!unk.empty()) {
    const auto it = tok.vocab_.find(unk);
    OASR_CHECK(it != tok.vocab_.end(), kCorruptFile, where, ": model.unk_token '", unk,
               "' is not in the vocabulary");
    tok.unk_id_ = it->second;
  }

  // Merges: "a b" strings (older files) or [a, b] pairs (tokenizers >= 0.20).
  OASR_CHECK(model.contains("merges") && model.at("merges").is_array(), kCorruptFile, where,
             ": model.merges must be an array");
  std::vector<std::pair<std::string, std::string>> merge_pairs;
  const json& merges = model.at("merges");
  merge_pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      OASR_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
                 kCorruptFile, where, ": model.merges[", i, "] = \"", line,
                 "\" is not two tokens separated by one space");
      merge_pairs.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else {
      OASR_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                 kCorruptFile, where, ": model.merges[", i, "] = ", m.dump(),
                 " is neither \"a b\" nor [\"a\", \"b\"]");
      merge_pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    }
  }

  // Pipeline pieces around the model: only what byte-level BPE needs.
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end() && !normalizer->is_null()) {
    const std::string type = normalizer->is_object()
                                 ? get_field<std::string>(*normalizer, "type", where, "?")
                                 : normalizer->dump();
    OASR_CHECK(type == "NFC", kUnsupported, where, ": normalizer '", type,
               "' is not supported; oasr reads byte-level BPE with no normalizer or with NFC");
    tok.nfc_ = true;
  }
  const auto pre = root.find("pre_tokenizer");
  OASR_CHECK(pre != root.end() && pre->is_object(), kUnsupported, where,
             ": byte-level BPE needs a ByteLevel pre_tokenizer; this file has none");
  const std::string pre_type = get_field<std::string>(*pre, "type", where, "");
  if (pre_type == "Sequence") {
    check_qwen2_sequence(*pre, where);
    tok.add_prefix_space_ = false;
    tok.split_ = Split::kQwen2;
  } else {
    OASR_CHECK(pre_type == "ByteLevel", kUnsupported, where, ": pre_tokenizer type '", pre_type,
               "' is not supported; oasr reads the ByteLevel pre-tokenizer (GPT-2 pattern) and "
               "Qwen2's Sequence of Split and ByteLevel");
    // tokenizers' defaults for a ByteLevel without these fields.
    tok.add_prefix_space_ = get_field<bool>(*pre, "add_prefix_space", where, true);
    tok.split_ = get_field<bool>(*pre, "use_regex", where, true) ? Split::kGpt2 : Split::kNone;
  }
  const auto decoder = root.find("decoder");
  OASR_CHECK(decoder != root.end() && decoder->is_object() &&
                 get_field<std::string>(*decoder, "type", where, "") == "ByteLevel",
             kUnsupported, where,
             ": byte-level BPE needs the ByteLevel decoder; this file's decoder is ",
             decoder == root.end() ? std::string("missing") : decoder->dump());

  // Added tokens.
  const auto added = root.find("added_tokens");
  if (added != root.end() && !added->is_null()) {
    OASR_CHECK(added->is_array(), kCorruptFile, where, ": added_tokens must be an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string at = where + " added_tokens[" + std::to_string(i) + "]";
      OASR_CHECK(a.is_object() && a.contains("id") && a.contains("content"), kCorruptFile, at,
                 ": needs 'id' and 'content'");
      AddedToken t;
      t.id = id_field(a.at("id"), at);
      t.content = get_field<std::string>(a, "content", at, "");
      OASR_CHECK(!t.content.empty(), kCorruptFile, at, ": empty content");
      t.special = get_field<bool>(a, "special", at, false);
      t.lstrip = get_field<bool>(a, "lstrip", at, false);
      t.rstrip = get_field<bool>(a, "rstrip", at, false);
      t.normalized = get_field<bool>(a, "normalized", at, !t.special);
      OASR_CHECK(!get_field<bool>(a, "single_word", at, false), kUnsupported, at, " ('", t.content,
                 "'): single_word added tokens are not supported");
      tok.added_.push_back(std::move(t));
    }
  }
  tok.finish(merge_pairs, where);
  return tok;
}

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_vocab_merges(const fs::path& vocab_json,
                                                               const fs::path& merges_txt,
                                                               const fs::path& added_tokens_json) {
  ByteLevelBpeTokenizer tok;
  const json vocab = parse_json(vocab_json, "vocab.json");
  OASR_CHECK(vocab.is_object(), kCorruptFile, vocab_json.string(),
             ": must be a JSON object {token: id}");
  for (const auto& [token, id] : vocab.items()) {
    tok.vocab_.emplace(token, id_field(id, vocab_json.string() + " ['" + token + "']"));
  }

  // merges.txt: tokenizers' reader skips a first line starting "#version";
  // every other non-empty line is "a b".
  std::vector<std::pair<std::string, std::string>> merge_pairs;
  std::istringstream lines(read_file(merges_txt, "merges.txt"));
  std::string line;
  for (size_t number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    OASR_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
               kCorruptFile, merges_txt.string(), " line ", number, ": \"", line,
               "\" is not two tokens separated by one space");
    merge_pairs.emplace_back(line.substr(0, space), line.substr(space + 1));
  }

  if (!added_tokens_json.empty()) {
    const json added = parse_json(added_tokens_json, "added_tokens.json");
    OASR_CHECK(added.is_object(), kCorruptFile, added_tokens_json.string(),
               ": must be a JSON object {token: id}");
    for (const auto& [content, id] : added.items()) {
      OASR_CHECK(!content.empty(), kCorruptFile, added_tokens_json.string(), ": empty token");
      AddedToken t;
      t.content = content;
      t.id = id_field(id, added_tokens_json.string() + " ['" + content + "']");
      t.special = true;
      tok.added_.push_back(std::move(t));
    }
    // JSON objects carry no order; ids give a stable one.
    std::sort(tok.added_.begin(), tok.added_.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }
  const auto eot = tok.vocab_.find("<|endoftext|>");
  if (eot != tok.vocab_.end()) {
    const bool listed = std::any_of(tok.added_.begin(), tok.added_.end(), [](const AddedToken& t) {
      return t.content == "<|endoftext|>";
    });
    if (!listed)
      tok.added_.insert(tok.added_.begin(), AddedToken{"<|endoftext|>", eot->second, true});
  }
  tok.add_prefix_space_ = false;
  tok.split_ = Split::kGpt2;
  tok.finish(merge_pairs, vocab_json.string() + " + " + merges_txt.string());
  return tok;
}

void ByteLevelBpeTokenizer::finish(
    const std::vector<std::pair<std::string, std::string>>& merge_pairs,
    const std::string& source) {
  for (const auto& [token, id] : vocab_) {
    const auto [it, inserted] = id_to_vocab_.emplace(id, token);
    OASR_CHECK(inserted, kCorruptFile, source, ": id ", id, " is given to two tokens ('",
               it->second, "' and '", token, "')");
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& t = added_[i];
    const auto [by_content, new_content] = added_by_content_.emplace(t.content, i);
    OASR_CHECK(new_content, kCorruptFile, source, ": added token '", t.content,
               "' is listed twice");
    const auto [by_id, new_id] = added_by_id_.emplace(t.id, i);
    OASR_CHECK(new_id, kCorruptFile, source, ": added tokens '", added_[by_id->second].content,
               "' and '", t.content, "' share id ", t.id);
    if (t.special) special_contents_.insert(t.content);
    vocab_size_ = std::max(vocab_size_, t.id + 1);
    // A normalized token is matched against normalized text, so it is
    // normalized too (tokenizers does the same when it builds its matcher).
    std::u32string chars = byte_bpe::decode_utf8_strict(t.content, "added token");
    if (t.normalized && nfc_) chars = byte_bpe::nfc(chars);
    added_chars_.push_back(std::move(chars));
    (t.normalized ? normalized_added_ : raw_added_)[added_chars_.back().front()].push_back(i);
  }
  for (auto* table : {&raw_added_, &normalized_added_}) {
    for (auto& [first, list] : *table) {
      std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
        return added_chars_[a].size() > added_chars_[b].size();
      });
    }
  }
  for (int b = 0; b < 256; ++b) {
    std::string one;
    byte_bpe::append_utf8(byte_bpe::byte_to_char()[static_cast<size_t>(b)], one);
    const auto it = vocab_.find(one);
    byte_ids_[static_cast<size_t>(b)] = it == vocab_.end() ? -1 : it->second;
  }
  for (size_t rank = 0; rank < merge_pairs.size(); ++rank) {
    const auto& [left, right] = merge_pairs[rank];
    const auto l = vocab_.find(left);
    const auto r = vocab_.find(right);
    const auto merged = vocab_.find(left + right);
    OASR_CHECK(l != vocab_.end() && r != vocab_.end() && merged != vocab_.end(), kCorruptFile,
               source, ": merge ", rank, " '", left, " ", right, "' uses a token missing from the ",
               "vocabulary ('",
               l == vocab_.end() ? left : (r == vocab_.end() ? right : left + right), "')");
    // A repeated pair keeps its last rank, as tokenizers' map building does.
    merges_[(static_cast<uint64_t>(l->second) << 32) | static_cast<uint64_t>(r->second)] =
        Merge{static_cast<int64_t>(rank), merged->second};
  }
}

std::vector<int64_t> ByteLevelBpeTokenizer::encode(std::string_view text) const {
  // Segments of the text with the added token they are, or none. First the
  // added tokens with normalized=false on the raw text, then the rest is
  // normalized (NFC when the file says so) and the added tokens with
  // normalized=true are cut out of it, as tokenizers' AddedVocabulary does.
  struct Segment {
    std::u32string text;
    std::optional<size_t> added;
  };
  std::vector<Segment> segments{
      {byte_bpe::decode_utf8_strict(text, "ByteLevelBpeTokenizer::encode"), std::nullopt}};
  for (const bool normalized_pass : {false, true}) {
    if (normalized_pass && nfc_) {
      for (Segment& segment : segments) {
        if (!segment.added) segment.text = byte_bpe::nfc(segment.text);
      }
    }
    // Added tokens of this pass by first character, longest first, so the
    // first hit at a position is the leftmost-longest match.
    const auto& candidates = normalized_pass ? normalized_added_ : raw_added_;
    if (candidates.empty()) continue;
    std::vector<Segment> next;
    for (Segment& segment : segments) {
      if (segment.added) {
        next.push_back(std::move(segment));
        continue;
      }
      const std::u32string& chars = segment.text;
      const size_t size = chars.size();
      size_t plain_start = 0;  // start of the text not yet emitted
      size_t pos = 0;
      while (pos < size) {
        std::optional<size_t> hit;
        if (const auto first = candidates.find(chars[pos]); first != candidates.end()) {
          for (size_t c : first->second) {
            const std::u32string& s = added_chars_[c];
            if (s.size() <= size - pos && std::u32string_view(chars).substr(pos, s.size()) == s) {
              hit = c;
              break;
            }
          }
        }
        if (!hit) {
          ++pos;
          continue;
        }
        size_t begin = pos;
        size_t end = pos + added_chars_[*hit].size();
        if (added_[*hit].lstrip) {
          while (begin > plain_start && is_white_space(chars[begin - 1])) --begin;
        }
        if (added_[*hit].rstrip) {
          while (end < size && is_white_space(chars[end])) ++end;
        }
        if (begin > plain_start) {
          next.push_back({chars.substr(plain_start, begin - plain_start), std::nullopt});
        }
        next.push_back({chars.substr(begin, end - begin), *hit});
        plain_start = pos = end;
      }
      if (plain_start < size) next.push_back({chars.substr(plain_start), std::nullopt});
    }
    segments = std::move(next);
  }

  std::vector<int64_t> ids;
  for (const Segment& segment : segments) {
    if (segment.added) {
      ids.push_back(added_[*segment.added].id);
    } else if (!segment.text.empty()) {  // empty text gets no prefix space: no ids
      encode_piece(segment.text, ids);
    }
  }
  return ids;
}

void ByteLevelBpeTokenizer::encode_piece(std::u32string_view piece,
                                         std::vector<int64_t>& ids) const {
  std::u32string prefixed;
  if (add_prefix_space_ && (piece.empty() || piece.front() != U' ')) {
    prefixed.reserve(piece.size() + 1);
    prefixed.push_back(U' ');
    prefixed.append(piece);
    piece = prefixed;
  }
  if (split_ == Split::kNone) {
    if (!piece.empty()) encode_word(piece, ids);
    return;
  }
  const std::vector<byte_bpe::Span> spans =
      split_ == Split::kQwen2 ? byte_bpe::qwen2_split(piece) : byte_bpe::gpt2_split(piece);
  for (const byte_bpe::Span& span : spans) {
    encode_word(piece.substr(span.begin, span.end - span.begin), ids);
  }
}

void ByteLevelBpeTokenizer::encode_word(std::u32string_view word, std::vector<int64_t>& ids) const {
  const std::string bytes = to_utf8(word);
  const bool cacheable = bytes.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    const auto it = cache_->words.find(bytes);
    if (it != cache_->words.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> word_ids;
  bpe(bytes, word_ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->words.size() >= kMaxCacheEntries) cache_->words.clear();
    cache_->words.emplace(bytes, word_ids);
  }
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
}

void ByteLevelBpeTokenizer::bpe(std::string_view bytes, std::vector<int64_t>& ids) const {
  if (ignore_merges_) {
    // The whole word, as GPT-2's printable characters, when it is a token.
    std::string byte_chars;
    for (unsigned char b : bytes) byte_bpe::append_utf8(byte_bpe::byte_to_char()[b], byte_chars);
    const auto whole = vocab_.find(byte_chars);
    if (whole != vocab_.end()) {
      ids.push_back(whole->second);
      return;
    }
  }
  // Initial symbols: one per byte (one byte-map character each), as
  // tokenizers' BPE makes them; a character missing from the vocabulary
  // becomes unk (runs fused with fuse_unk) or, with no unk token, is
  // dropped, as tokenizers does.
  struct Symbol {
    int64_t id;
    int prev, next;  // neighbours in the live list, -1 at the ends
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(bytes.size());
  bool last_was_unk = false;
  for (unsigned char b : bytes) {
    const int64_t id = byte_ids_[b];
    if (id >= 0) {
      symbols.push_back({id, 0, 0, true});
      last_was_unk = false;
    } else if (unk_id_) {
      if (!(fuse_unk_ && last_was_unk)) symbols.push_back({*unk_id_, 0, 0, true});
      last_was_unk = true;
    }
  }
  const int count = static_cast<int>(symbols.size());
  for (int i = 0; i < count; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < count ? i + 1 : -1;
  }
  auto merge_of = [&](int left) -> const Merge* {
    const int right = symbols[left].next;
    if (right < 0) return nullptr;
    const auto it = merges_.find((static_cast<uint64_t>(symbols[left].id) << 32) |
                                 static_cast<uint64_t>(symbols[right].id));
    return it == merges_.end() ? nullptr : &it->second;
  };
  // Candidate merges ordered by (rank, position of the left symbol): the
  // lowest rank first, leftmost among equals. Entries go stale when a
  // neighbour changes; they are re-checked when popped.
  using Candidate = std::tuple<int64_t, int, int64_t>;  // rank, left index, merged id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (int i = 0; i < count; ++i) {
    if (const Merge* m = merge_of(i)) queue.emplace(m->rank, i, m->merged_id);
  }
  while (!queue.empty()) {
    const auto [rank, left, merged_id] = queue.top();
    queue.pop();
    if (!symbols[left].alive) continue;
    const Merge* current = merge_of(left);
    if (current == nullptr || current->rank != rank || current->merged_id != merged_id) continue;
    const int right = symbols[left].next;
    symbols[left].id = merged_id;
    symbols[right].alive = false;
    symbols[left].next = symbols[right].next;
    if (symbols[right].next >= 0) symbols[symbols[right].next].prev = left;
    if (symbols[left].prev >= 0) {
      if (const Merge* m = merge_of(symbols[left].prev)) {
        queue.emplace(m->rank, symbols[left].prev, m->merged_id);
      }
    }
    if (const Merge* m = merge_of(left)) queue.emplace(m->rank, left, m->merged_id);
  }
  for (int i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

std::string ByteLevelBpeTokenizer::decode(std::span<const int64_t> ids,
                                          bool skip_special_tokens) const {
  std::string bytes;
  for (const int64_t id : ids) {
    const std::string token = id_to_token(id);
    if (skip_special_tokens && special_contents_.count(token) != 0) continue;
    // A token made only of byte-map characters is those bytes; otherwise
    // (an added token such as "日本") its own UTF-8, as tokenizers does.
    const std::u32string chars = byte_bpe::decode_utf8_strict(token, "token");
    std::string token_bytes;
    bool all_mapped = true;
    for (char32_t c : chars) {
      const int b = byte_bpe::byte_of_char(c);
      if (b < 0) {
        all_mapped = false;
        break;
      }
      token_bytes.push_back(static_cast<char>(b));
    }
    bytes += all_mapped ? token_bytes : token;
  }
  return byte_bpe::utf8_lossy(bytes);
}

std::optional<int64_t> ByteLevelBpeTokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = added_by_content_.find(key); it != added_by_content_.end()) {
    return added_[it->second].id;
  }
  if (const auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  return std::nullopt;
}

std::string ByteLevelBpeTokenizer::id_to_token(int64_t id) const {
  if (const auto it = added_by_id_.find(id); it != added_by_id_.end()) {
    return added_[it->second].content;
  }
  const auto it = id_to_vocab_.find(id);
  OASR_CHECK(it != id_to_vocab_.end(), kInvalidArgument, "ByteLevelBpeTokenizer: token id ", id,
             " is not in the vocabulary (ids run from 0 to ", vocab_size_ - 1,
             "); for Whisper, timestamp ids must be removed before decoding text");
  return it->second;
}

bool ByteLevelBpeTokenizer::is_special(int64_t id) const {
  const auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_[it->second].special;
}

int64_t ByteLevelBpeTokenizer::vocab_size() const {
  return vocab_size_;
}

}  // namespace oasr::decode
