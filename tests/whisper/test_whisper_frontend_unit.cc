// Unit tests of the Whisper front end and tokenizer that need no oracle:
// definitions (GPT-2's byte map, the Unicode standard's U+FFFD substitution
// of maximal subparts, the GPT-2 pattern on hand-worked examples, BPE merge
// order on a hand-built vocabulary) and every refusal, each with its error
// code and a message naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "audio/whisper_mel.h"
#include "core/error.h"
#include "decode/byte_bpe_tokenizer.h"
#include "decode/byte_bpe_unicode.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace bb = decode::byte_bpe;
using audio::WhisperLogMel;
using decode::ByteLevelBpeTokenizer;
using ::testing::HasSubstr;

void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected " << error_code_name(code) << " with '" << fragment
                  << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// ---- WhisperLogMel -----------------------------------------------------------

TEST(WhisperMelUnit, SilenceIsTheFloorEverywhere) {
  // All energies clamp to 1e-10: log10 = -10 = the maximum, so the max-8
  // floor does not act and every feature is (-10 + 4) / 4.
  const WhisperLogMel mel(80);
  for (const std::vector<float>& samples :
       {std::vector<float>{}, std::vector<float>(16000, 0.0f)}) {
    const Tensor out = mel.compute(samples);
    ASSERT_EQ(out.shape(), (Shape{80, 3000}));
    for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data<float>()[i], -1.5f) << i;
  }
}

TEST(WhisperMelUnit, DynamicRangeIsEightBelowThePeak) {
  std::vector<float> tone(16000);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = 0.5f * std::sin(0.2f * static_cast<float>(i));
  const Tensor out = WhisperLogMel(128).compute(tone);
  const float* p = out.data<float>();
  float lo = p[0];
  float hi = p[0];
  for (int64_t i = 0; i < out.numel(); ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  // (max(L, M - 8) + 4) / 4 spans exactly 8 / 4 = 2 when the padding is silent.
  EXPECT_FLOAT_EQ(hi - lo, 2.0f);
}

TEST(WhisperMelUnit, Refusals) {
  const WhisperLogMel mel(80);
  const std::vector<float> too_long(WhisperLogMel::kChunkSamples + 1, 0.0f);
  expect_error([&] { mel.compute(too_long); }, ErrorCode::kInvalidArgument, "split longer audio");
  std::vector<float> nan_samples(100, 0.0f);
  nan_samples[42] = std::numeric_limits<float>::quiet_NaN();
  expect_error([&] { mel.compute(nan_samples); }, ErrorCode::kInvalidArgument, "sample 42");
  expect_error([] { WhisperLogMel(0); }, ErrorCode::kInvalidArgument, "n_mels");
  // Exactly 30 s is accepted.
  EXPECT_EQ(mel.compute(std::vector<float>(WhisperLogMel::kChunkSamples, 0.1f)).numel(),
            80 * WhisperLogMel::kFrames);
}

// ---- UTF-8 and the byte map ----------------------------------------------------

TEST(ByteBpeUnicode, LossyUtf8FollowsTheStandardsSubstitutionOfMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  // The Unicode Standard's own example (chapter 3, "U+FFFD Substitution of
  // Maximal Subparts"): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  EXPECT_EQ(bb::utf8_lossy("a\xF1\x80\x80\xE1\x80\xC2"
                           "b\x80"
                           "c\x80\xBF"
                           "d"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
  EXPECT_EQ(bb::utf8_lossy("plain \xE6\x97\xA5\xE2\x82\xAC"), "plain \xE6\x97\xA5\xE2\x82\xAC");
  EXPECT_EQ(bb::utf8_lossy("\xE6\x97"), r);                      // a character cut short
  EXPECT_EQ(bb::utf8_lossy("\xF0\x80\x80\x80"), r + r + r + r);  // overlong
  EXPECT_EQ(bb::utf8_lossy("\xED\xA0\x80"), r + r + r);          // a surrogate
  EXPECT_EQ(bb::utf8_lossy("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(bb::utf8_lossy("\xC0\xAF\xFF"), r + r + r);
  EXPECT_EQ(bb::utf8_lossy(std::string("\0x", 2)), std::string("\0x", 2));
}

TEST(ByteBpeUnicode, StrictDecodingRefusesIllFormedText) {
  EXPECT_EQ(bb::decode_utf8_strict("a\xC3\xA9\xF0\x9F\x99\x82", "t"), U"a\u00E9\U0001F642");
  expect_error([] { bb::decode_utf8_strict("ok\xE6\x97", "what"); }, ErrorCode::kInvalidArgument,
               "byte 2");
}

TEST(ByteBpeUnicode, ByteMapIsGpt2s) {
  const auto& map = bb::byte_to_char();
  int identity = 0;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = map[static_cast<size_t>(b)];
    if (c == static_cast<char32_t>(b)) ++identity;
    EXPECT_EQ(bb::byte_of_char(c), b);
  }
  EXPECT_EQ(identity, 188);         // '!'..'~', '¡'..'¬', '®'..'ÿ'
  EXPECT_EQ(map[' '], U'\u0120');   // "Ġ"
  EXPECT_EQ(map['\n'], U'\u010A');  // "Ċ"
  EXPECT_EQ(map[0xAD], U'\u0143');  // the last unprintable byte
  EXPECT_EQ(bb::byte_of_char(U'\u0144'), -1);
  EXPECT_EQ(bb::byte_of_char(U'\u65E5'), -1);
}

std::vector<std::string> split(const std::string& text) {
  const std::u32string chars = bb::decode_utf8_strict(text, "t");
  std::vector<std::string> out;
  for (const auto& s : bb::gpt2_split(chars)) {
    std::string piece;
    for (size_t i = s.begin; i < s.end; ++i) bb::append_utf8(chars[i], piece);
    out.push_back(piece);
  }
  return out;
}

TEST(ByteBpeUnicode, Gpt2PatternOnWorkedExamples) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world"), (V{"Hello", " world"}));
  // A space before a word joins it; the rest of a whitespace run stands alone.
  EXPECT_EQ(split("I'm  ok\n"), (V{"I", "'m", " ", " ok", "\n"}));
  EXPECT_EQ(split("a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_EQ(split("x1.5 ?!"), (V{"x", "1", ".", "5", " ?!"}));
  // Contractions are case-sensitive and need no word boundary.
  EXPECT_EQ(split("'ll'LL'sx"), (V{"'ll", "'", "LL", "'s", "x"}));
  EXPECT_EQ(split("caf\xC3\xA9 42\xE5\x8F\xB7"), (V{"caf\xC3\xA9", " 42", "\xE5\x8F\xB7"}));
  EXPECT_EQ(split("  "), (V{"  "}));
  EXPECT_EQ(split(""), V{});
}

// ---- ByteLevelBpeTokenizer -----------------------------------------------------

// A minimal tokenizer.json; `model_extra` / `root_extra` add or override fields.
std::string tokenizer_json(const std::string& vocab, const std::string& merges,
                           const std::string& model_extra = "",
                           const std::string& root_extra = "") {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 100, "content": "<|endoftext|>", "special": true, "lstrip": false,
       "rstrip": false, "normalized": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    )" + root_extra +
         R"( "model": {"type": "BPE", "dropout": null, "unk_token": null, )" + model_extra +
         R"( "vocab": )" + vocab + R"(, "merges": )" + merges + "}}";
}

const char* kAbcVocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "Ġ": 6})";

ByteLevelBpeTokenizer load_json(const testing::TempDir& dir, const std::string& text) {
  const auto path = dir.path() / "tokenizer.json";
  write(path, text);
  return ByteLevelBpeTokenizer::from_tokenizer_json(path);
}

TEST(ByteLevelBpe, MergesApplyLowestRankFirstLeftmostAmongEquals) {
  testing::TempDir dir;
  using V = std::vector<int64_t>;
  // "b c" outranks "a b": abc -> a bc -> abc.
  const auto bc_first = load_json(dir, tokenizer_json(kAbcVocab, R"(["b c", "a b", "a bc"])"));
  EXPECT_EQ(bc_first.encode("abc"), V{5});
  EXPECT_EQ(bc_first.encode(""), V{});
  // "a b" first and no "ab c": ab c.
  const auto ab_first = load_json(dir, tokenizer_json(kAbcVocab, R"([["a", "b"], ["b", "c"]])"));
  EXPECT_EQ(ab_first.encode("abc"), (V{3, 2}));
  // Equal ranks: the leftmost pair merges first (bbb -> bb b).
  const auto bb_merge =
      load_json(dir, tokenizer_json(R"({"b": 0, "bb": 1, "Ġ": 2})", R"(["b b"])"));
  EXPECT_EQ(bb_merge.encode("bbb"), (V{1, 0}));
  EXPECT_EQ(bb_merge.encode("bbbb"), (V{1, 1}));
  // Added tokens are cut out first; decode joins bytes and skips specials.
  EXPECT_EQ(bc_first.encode("ab<|endoftext|>c"), (V{3, 100, 2}));
  const V ids = {3, 100, 6, 2};
  EXPECT_EQ(bc_first.decode(ids, true), "ab c");
  EXPECT_EQ(bc_first.decode(ids, false), "ab<|endoftext|> c");
  EXPECT_TRUE(bc_first.is_special(100));
  EXPECT_FALSE(bc_first.is_special(3));
  EXPECT_EQ(bc_first.vocab_size(), 101);
  EXPECT_EQ(bc_first.id_to_token(6), "Ġ");
  EXPECT_FALSE(bc_first.token_to_id("zz").has_value());
}

TEST(ByteLevelBpe, PrefixSpaceGoesBeforeEveryNonEmptyPiece) {
  testing::TempDir dir;
  const auto tok = load_json(dir, R"({"added_tokens": [], "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "Ġ": 1, "Ġa": 2}, "merges": ["Ġ a"]}})");
  using V = std::vector<int64_t>;
  EXPECT_EQ(tok.encode(""), V{});  // as tokenizers: nothing, not a lone "Ġ"
  EXPECT_EQ(tok.encode("a"), V{2});
  EXPECT_EQ(tok.encode(" a"), V{2});
  EXPECT_EQ(tok.encode("a a"), (V{2, 2}));
  const V ids = {2, 2};
  EXPECT_EQ(tok.decode(ids), " a a");  // decode strips nothing
}

TEST(ByteLevelBpe, RefusesWhatItCannotServe) {
  testing::TempDir dir;
  const auto path = dir.path() / "tokenizer.json";
  auto refuse = [&](const std::string& text, ErrorCode code, const std::string& fragment) {
    write(path, text);
    expect_error([&] { ByteLevelBpeTokenizer::from_tokenizer_json(path); }, code, fragment);
  };
  expect_error([&] { ByteLevelBpeTokenizer::from_tokenizer_json(dir.path() / "none.json"); },
               ErrorCode::kNotFound, "none.json");
  refuse("{ \"model\": ", ErrorCode::kCorruptFile, "not valid JSON");
  refuse("[1, 2]", ErrorCode::kCorruptFile, "top level");
  std::string word_piece = tokenizer_json(kAbcVocab, "[]");
  word_piece.replace(word_piece.find("\"BPE\""), 5, "\"WordPiece\"");
  refuse(word_piece, ErrorCode::kUnsupported, "model type 'WordPiece'");
  refuse(tokenizer_json(kAbcVocab, R"(["a x"])"), ErrorCode::kCorruptFile, "'x'");
  refuse(tokenizer_json(kAbcVocab, R"(["a b c"])"), ErrorCode::kCorruptFile, "merges[0]");
  refuse(tokenizer_json(kAbcVocab, R"([["a"]])"), ErrorCode::kCorruptFile, "merges[0]");
  refuse(tokenizer_json(R"({"a": 0, "b": 0})", "[]"), ErrorCode::kCorruptFile, "id 0");
  refuse(tokenizer_json(R"({"a": -3})", "[]"), ErrorCode::kCorruptFile, "an integer in [0, 2^32)");
  refuse(tokenizer_json(kAbcVocab, "[]", R"("byte_fallback": true,)"), ErrorCode::kUnsupported,
         "byte_fallback");
  std::string dropout = tokenizer_json(kAbcVocab, "[]");
  dropout.replace(dropout.find("\"dropout\": null"), 15, "\"dropout\": 0.1");
  refuse(dropout, ErrorCode::kUnsupported, "dropout");
  std::string normalizer = tokenizer_json(kAbcVocab, "[]");
  normalizer.replace(normalizer.find("\"normalizer\": null"), 18,
                     R"("normalizer": {"type": "NFKC"})");
  refuse(normalizer, ErrorCode::kUnsupported, "normalizer 'NFKC'");
  // A Sequence pre-tokenizer is read only as Qwen2's: another Split pattern,
  // another behavior, or a ByteLevel with its own regex is refused by name.
  const std::string byte_level =
      R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";
  auto with_sequence = [&](const std::string& pattern, const std::string& behavior,
                           const std::string& use_regex) {
    std::string text = tokenizer_json(kAbcVocab, "[]");
    text.replace(text.find(byte_level), byte_level.size(),
                 R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                     {"type": "Split", "pattern": {"Regex": )" +
                     pattern + R"(}, "behavior": ")" + behavior + R"(", "invert": false},
                     {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                      "use_regex": )" +
                     use_regex + "}]}");
    return text;
  };
  const std::string qwen2_pattern =
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")";
  EXPECT_NO_THROW(load_json(dir, with_sequence(qwen2_pattern, "Isolated", "false")));
  refuse(with_sequence(R"("\\w+")", "Isolated", "false"), ErrorCode::kUnsupported,
         "is not Qwen2's");
  refuse(with_sequence(qwen2_pattern, "Removed", "false"), ErrorCode::kUnsupported,
         "behavior Isolated");
  refuse(with_sequence(qwen2_pattern, "Isolated", "true"), ErrorCode::kUnsupported,
         "use_regex false");
  std::string metaspace = tokenizer_json(kAbcVocab, "[]");
  metaspace.replace(metaspace.find("\"type\": \"ByteLevel\", \"add"), 19, R"("type": "Metaspace")");
  refuse(metaspace, ErrorCode::kUnsupported, "Metaspace");
  std::string no_decoder = tokenizer_json(kAbcVocab, "[]");
  const std::string decoder_field = R"("decoder": {"type": "ByteLevel"},)";
  no_decoder.replace(no_decoder.find(decoder_field), decoder_field.size(), "");
  refuse(no_decoder, ErrorCode::kUnsupported, "decoder");
  std::string single_word = tokenizer_json(kAbcVocab, "[]");
  single_word.replace(single_word.find("\"single_word\": false"), 20, "\"single_word\": true");
  refuse(single_word, ErrorCode::kUnsupported, "single_word");

  const auto tok = load_json(dir, tokenizer_json(kAbcVocab, "[]"));
  const std::vector<int64_t> unknown = {0, 57};
  expect_error([&] { tok.decode(unknown); }, ErrorCode::kInvalidArgument, "token id 57");
  const std::vector<int64_t> negative = {-1};
  expect_error([&] { tok.decode(negative); }, ErrorCode::kInvalidArgument, "token id -1");
  expect_error([&] { tok.id_to_token(101); }, ErrorCode::kInvalidArgument, "101");
  expect_error([&] { tok.encode("ab\xFF"); }, ErrorCode::kInvalidArgument, "not valid UTF-8");
}

TEST(ByteLevelBpe, VocabMergesFiles) {
  testing::TempDir dir;
  const auto vocab = dir.path() / "vocab.json";
  const auto merges = dir.path() / "merges.txt";
  const auto added = dir.path() / "added_tokens.json";
  write(vocab, R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "<|endoftext|>": 6})");
  write(merges, "#version: 0.2\nb c\na b\na bc\n");
  write(added, R"({"<|en|>": 7})");
  const auto tok = ByteLevelBpeTokenizer::from_vocab_merges(vocab, merges, added);
  EXPECT_EQ(tok.merge_count(), 3u);
  EXPECT_EQ(tok.encode("abc<|en|>"), (std::vector<int64_t>{5, 7}));
  EXPECT_TRUE(tok.is_special(6));  // <|endoftext|> from vocab.json
  EXPECT_TRUE(tok.is_special(7));
  EXPECT_EQ(tok.vocab_size(), 8);
  // No added_tokens.json at all.
  EXPECT_EQ(ByteLevelBpeTokenizer::from_vocab_merges(vocab, merges, {}).vocab_size(), 7);

  expect_error([&] { ByteLevelBpeTokenizer::from_vocab_merges(vocab, dir.path() / "no.txt", {}); },
               ErrorCode::kNotFound, "no.txt");
  expect_error([&] { ByteLevelBpeTokenizer::from_vocab_merges(vocab, merges, dir.path() / "x"); },
               ErrorCode::kNotFound, "added_tokens.json");
  write(merges, "#version: 0.2\nb c\nabc\n");
  expect_error([&] { ByteLevelBpeTokenizer::from_vocab_merges(vocab, merges, {}); },
               ErrorCode::kCorruptFile, "line 3");
  write(merges, "b c\n");
  write(vocab, "[1, 2]");
  expect_error([&] { ByteLevelBpeTokenizer::from_vocab_merges(vocab, merges, {}); },
               ErrorCode::kCorruptFile, "JSON object");
}

}  // namespace
}  // namespace oasr
