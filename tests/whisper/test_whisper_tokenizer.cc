// ByteLevelBpeTokenizer against Hugging Face tokenizers
// (gen_whisper_tokenizer.py): encode, decode (with and without special
// tokens), token_to_id, is_special and vocab_size for Whisper tiny.en's real
// tokenizer.json, the same vocabulary as vocab.json + merges.txt +
// added_tokens.json, a small BPE trained by the tokenizers library (merges
// in both serialized forms) and one trained with Qwen2's pipeline (NFC,
// Qwen2's Split pattern); the pre-tokenizer's pieces; the Unicode class of
// every code point.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/byte_bpe_tokenizer.h"
#include "decode/byte_bpe_unicode.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using decode::ByteLevelBpeTokenizer;
using nlohmann::json;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

ByteLevelBpeTokenizer load(const json& files) {
  if (files.contains("tokenizer_json")) {
    return ByteLevelBpeTokenizer::from_tokenizer_json(
        files.at("tokenizer_json").get<std::string>());
  }
  return ByteLevelBpeTokenizer::from_vocab_merges(files.at("vocab_json").get<std::string>(),
                                                  files.at("merges_txt").get<std::string>(),
                                                  files.at("added_tokens_json").get<std::string>());
}

// Printable form of a string for failure messages (escapes non-ASCII).
std::string show(const std::string& s) {
  return json(s).dump();
}

std::string show_ids(const std::vector<int64_t>& ids) {
  return json(ids).dump();
}

// The pieces of `text` (NFC-normalized first when `nfc`) under the GPT-2 or
// the Qwen2 pattern, in the pre-tokenizer's byte-mapped form.
std::vector<std::string> pieces_of(const std::string& text, const std::string& split, bool nfc) {
  std::u32string chars = decode::byte_bpe::decode_utf8_strict(text, "test");
  if (nfc) chars = decode::byte_bpe::nfc(chars);
  std::vector<std::string> pieces;
  const auto spans =
      split == "qwen2" ? decode::byte_bpe::qwen2_split(chars) : decode::byte_bpe::gpt2_split(chars);
  for (const auto& span : spans) {
    std::string utf8;
    for (size_t i = span.begin; i < span.end; ++i) decode::byte_bpe::append_utf8(chars[i], utf8);
    std::string mapped;
    for (unsigned char b : utf8) {
      decode::byte_bpe::append_utf8(decode::byte_bpe::byte_to_char()[b], mapped);
    }
    pieces.push_back(mapped);
  }
  return pieces;
}

class TokenizerOracle : public ::testing::TestWithParam<std::string> {
 protected:
  const json* cases() {
    const json& all = oracle().cases.at("tokenizers");
    return all.contains(GetParam()) ? &all.at(GetParam()) : nullptr;
  }
};

#define SKIP_IF_ABSENT(c)                                                     \
  if ((c) == nullptr) {                                                       \
    GTEST_SKIP() << "tokenizer '" << GetParam()                               \
                 << "' not generated: " << oracle().cases.at("notes").dump(); \
  }

TEST_P(TokenizerOracle, EncodeMatchesHf) {
  const json* c = cases();
  SKIP_IF_ABSENT(c);
  const ByteLevelBpeTokenizer tok = load(c->at("files"));
  int checked = 0;
  for (const auto& e : c->at("encode")) {
    const std::string text = e.at("text").get<std::string>();
    const auto expected = e.at("ids").get<std::vector<int64_t>>();
    const std::vector<int64_t> ids = tok.encode(text);
    EXPECT_EQ(ids, expected) << "text " << show(text) << "\n ours " << show_ids(ids) << "\n   HF "
                             << show_ids(expected);
    // The cache must not change results: encode again.
    EXPECT_EQ(tok.encode(text), ids);
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST_P(TokenizerOracle, DecodeMatchesHf) {
  const json* c = cases();
  SKIP_IF_ABSENT(c);
  const ByteLevelBpeTokenizer tok = load(c->at("files"));
  int with_replacement = 0;
  for (const auto& d : c->at("decode")) {
    const auto ids = d.at("ids").get<std::vector<int64_t>>();
    const std::string skip = d.at("skip").get<std::string>();
    const std::string keep = d.at("keep").get<std::string>();
    EXPECT_EQ(tok.decode(ids, true), skip) << "ids " << show_ids(ids) << " ours "
                                           << show(tok.decode(ids, true)) << " HF " << show(skip);
    EXPECT_EQ(tok.decode(ids, false), keep) << "ids " << show_ids(ids) << " ours "
                                            << show(tok.decode(ids, false)) << " HF " << show(keep);
    if (keep.find("\xEF\xBF\xBD") != std::string::npos) ++with_replacement;
  }
  // The byte sequences must really exercise U+FFFD replacement.
  EXPECT_GT(with_replacement, 50);
}

TEST_P(TokenizerOracle, VocabularyFactsMatchHf) {
  const json* c = cases();
  SKIP_IF_ABSENT(c);
  const ByteLevelBpeTokenizer tok = load(c->at("files"));
  EXPECT_EQ(tok.vocab_size(), c->at("vocab_size").get<int64_t>());
  for (const auto& [token, id] : c->at("token_to_id").items()) {
    if (id.is_null()) {
      EXPECT_FALSE(tok.token_to_id(token).has_value()) << show(token);
    } else {
      ASSERT_TRUE(tok.token_to_id(token).has_value()) << show(token);
      EXPECT_EQ(*tok.token_to_id(token), id.get<int64_t>()) << show(token);
      EXPECT_EQ(tok.id_to_token(id.get<int64_t>()), token);
    }
  }
  // The vocab/merges loader marks every added token special (see its header).
  const bool files_form = c->at("files").contains("vocab_json");
  for (const auto& [id, special] : c->at("added_special").items()) {
    EXPECT_EQ(tok.is_special(std::stoll(id)), files_form || special.get<bool>()) << "id " << id;
  }
  EXPECT_FALSE(tok.is_special(tok.token_to_id("!").value()));
}

TEST_P(TokenizerOracle, PreTokenizerPiecesMatchHf) {
  const json* c = cases();
  SKIP_IF_ABSENT(c);
  const std::string split = c->at("split").get<std::string>();
  const bool nfc = c->at("nfc").get<bool>();
  for (const auto& e : c->at("encode")) {
    const std::string text = e.at("text").get<std::string>();
    const auto expected = e.at("pieces").get<std::vector<std::string>>();
    EXPECT_EQ(pieces_of(text, split, nfc), expected) << "text " << show(text);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenizerOracle,
                         ::testing::Values("real", "real_files", "small", "small_str", "qwen2"));

// Qwen2's pipeline: decomposed input reaches the normalized added token only
// through NFC, and the special tokens are cut out of the raw text.
TEST(QwenTokenizerOracle, NfcReachesNormalizedAddedToken) {
  const json& qwen2 = oracle().cases.at("tokenizers").at("qwen2");
  const ByteLevelBpeTokenizer tok = load(qwen2.at("files"));
  const auto composed = tok.token_to_id("\u00e9!");
  ASSERT_TRUE(composed.has_value());
  const std::vector<int64_t> ids = tok.encode("e\u0301!");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], *composed);
  // A normalized token written decomposed is normalized itself: both forms hit it.
  const auto written_decomposed = tok.token_to_id("a\u0301?");
  ASSERT_TRUE(written_decomposed.has_value());
  EXPECT_EQ(tok.encode("\u00e1?"), std::vector<int64_t>{*written_decomposed});
  EXPECT_EQ(tok.encode("a\u0301?"), std::vector<int64_t>{*written_decomposed});
  const std::vector<int64_t> prompt = tok.encode("<|audio_bos|><|AUDIO|><|audio_eos|>");
  ASSERT_EQ(prompt.size(), 3u);
  EXPECT_EQ(prompt[1], tok.token_to_id("<|AUDIO|>").value());
  EXPECT_TRUE(tok.is_special(prompt[1]));
}

// The real Whisper tokenizer's special tokens (what the decoder prompt uses).
TEST(WhisperTokenizerOracle, RealSpecialTokenIds) {
  const json& all = oracle().cases.at("tokenizers");
  if (!all.contains("real")) GTEST_SKIP() << oracle().cases.at("notes").dump();
  const ByteLevelBpeTokenizer tok = load(all.at("real").at("files"));
  const std::map<std::string, int64_t> expected = {{"<|endoftext|>", 50256},
                                                   {"<|startoftranscript|>", 50257},
                                                   {"<|en|>", 50258},
                                                   {"<|transcribe|>", 50358},
                                                   {"<|notimestamps|>", 50362}};
  const json& hf = all.at("real").at("token_to_id");
  for (const auto& [token, id] : expected) {
    EXPECT_EQ(hf.at(token).get<int64_t>(), id) << token << ": the oracle disagrees";
    EXPECT_EQ(tok.token_to_id(token), id) << token;
    EXPECT_TRUE(tok.is_special(id)) << token;
  }
  EXPECT_EQ(tok.vocab_size(), 50363);
  // Timestamp ids are beyond this tokenizer.json: a clear refusal.
  const std::vector<int64_t> timestamp = {50363};
  EXPECT_THROW(tok.decode(timestamp), Error);
}

TEST(WhisperTokenizerOracle, UnicodeClassOfEveryCodePoint) {
  const Tensor classes = oracle().file.get("unicode/classes");
  ASSERT_EQ(classes.numel(), 0x110000);
  const uint8_t* expected = classes.data<uint8_t>();
  int64_t mismatches = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (expected[c] == 255) continue;  // surrogates: never in UTF-8 text
    const auto got = static_cast<uint8_t>(decode::byte_bpe::classify(c));
    // CharClass order: letter 0, number 1, whitespace 2, other 3; the oracle: other 2, space 3.
    const uint8_t mapped = got == 2 ? 3 : (got == 3 ? 2 : got);
    if (mapped != expected[c] && mismatches++ < 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": ours " << int{mapped}
                    << ", expected " << int{expected[c]};
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(std::string(decode::byte_bpe::unicode_version()),
            oracle().cases.at("unicode_version").get<std::string>())
      << "the range table and the oracle's unicodedata differ in version";
}

}  // namespace
}  // namespace oasr
