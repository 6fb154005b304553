// Units table and detokenization (src/decode/units): WeNet's char tokenizer
// joins tokens as they are; its BPE tokenizer turns "▁" into spaces and
// strips the ends like Python's str.strip().
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/units.h"
#include "support/test_support.h"

namespace oasr::decode {
namespace {

void expect_error(const std::function<void()>& body, ErrorCode code, const char* statement,
                  const std::string& fragment) {
  try {
    body();
    ADD_FAILURE() << statement << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << statement << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << statement << ": message '" << e.what() << "' lacks '" << fragment << "'";
  }
}

#define EXPECT_OASR_ERROR(statement, error_code, fragment) \
  expect_error([&] { (void)(statement); }, ErrorCode::error_code, #statement, fragment)

UnitTable bpe_units() {
  return UnitTable::from_entries({{"<blank>", 0},
                                  {"<unk>", 1},
                                  {"\u2581HE", 2},
                                  {"LLO", 3},
                                  {"\u2581WOR", 4},
                                  {"LD", 5},
                                  {"\u2581", 6},
                                  {"<sos/eos>", 7}});
}

TEST(DecodeUnits, CharTokensAreJoinedAsTheyAre) {
  const UnitTable units =
      UnitTable::from_entries({{"<blank>", 0}, {"你", 1}, {"好", 2}, {"\u2581", 3}, {"<unk>", 4}});
  const std::vector<int64_t> ids{1, 2, 3, 4, 1};
  EXPECT_EQ(detokenize(units, ids), "你好\u2581<unk>你");
  DetokenizeOptions spaced;
  spaced.connect_symbol = " ";
  EXPECT_EQ(detokenize(units, ids, spaced), "你 好 \u2581 <unk> 你");
  EXPECT_EQ(detokenize(units, std::vector<int64_t>{}), "");
}

TEST(DecodeUnits, BpeWordBoundariesBecomeSpacesAndEndsAreStripped) {
  DetokenizeOptions bpe;
  bpe.kind = TokenizerKind::kBpe;
  EXPECT_EQ(detokenize(bpe_units(), std::vector<int64_t>{2, 3, 4, 5}, bpe), "HELLO WORLD");
  // A lone boundary at either end vanishes with the strip; inside it stays.
  EXPECT_EQ(detokenize(bpe_units(), std::vector<int64_t>{6, 2, 6, 6, 3, 6}, bpe), "HE  LLO");
  EXPECT_EQ(detokenize(bpe_units(), std::vector<int64_t>{1, 2}, bpe), "<unk> HE");
  EXPECT_EQ(detokenize(bpe_units(), std::vector<int64_t>{6}, bpe), "");
}

TEST(DecodeUnits, UnknownIdsAreRefused) {
  EXPECT_OASR_ERROR(detokenize(bpe_units(), std::vector<int64_t>{2, 99}), kInvalidArgument,
                    "id 99");
  EXPECT_OASR_ERROR(bpe_units().token(-1), kInvalidArgument, "id -1");
}

TEST(DecodeUnits, LookupBothWays) {
  const UnitTable units = bpe_units();
  EXPECT_EQ(units.size(), 8u);
  EXPECT_EQ(units.token(5), "LD");
  EXPECT_EQ(units.id("<sos/eos>"), 7);
  EXPECT_EQ(units.id("missing"), -1);
  EXPECT_TRUE(units.contains(0));
  EXPECT_FALSE(units.contains(8));
}

TEST(DecodeUnits, StripMatchesPythonWhitespace) {
  // U+3000 (ideographic space), U+00A0, tabs and newlines are Python
  // whitespace; U+2581 and U+200B (zero-width space) are not.
  EXPECT_EQ(strip_python_whitespace("\u3000 a b\t\u00a0\n"), "a b");
  EXPECT_EQ(strip_python_whitespace("\u2581x\u200b"), "\u2581x\u200b");
  EXPECT_EQ(strip_python_whitespace(" \u2028 "), "");
  EXPECT_EQ(strip_python_whitespace(""), "");
}

TEST(DecodeUnits, LoadsAUnitsFile) {
  testing::TempDir dir;
  const auto path = dir.path() / "units.txt";
  std::ofstream(path) << "<blank> 0\n<unk> 1\n\xe4\xbd\xa0\t2\n\n\u2581A   3\r\n<sos/eos> 4\n";
  const UnitTable units = UnitTable::load(path);
  EXPECT_EQ(units.size(), 5u);
  EXPECT_EQ(units.token(2), "你");
  EXPECT_EQ(units.token(3), "\u2581A");
  EXPECT_EQ(units.token(4), "<sos/eos>");
}

TEST(DecodeUnits, RefusesMalformedUnitsFiles) {
  testing::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto path = dir.path() / name;
    std::ofstream(path) << text;
    return path;
  };
  EXPECT_OASR_ERROR(UnitTable::load(write("three.txt", "<blank> 0\na b 1\n")), kCorruptFile,
                    "line 2");
  EXPECT_OASR_ERROR(UnitTable::load(write("noid.txt", "<blank> x\n")), kCorruptFile, "'x'");
  EXPECT_OASR_ERROR(UnitTable::load(write("negative.txt", "<blank> -1\n")), kCorruptFile, "'-1'");
  EXPECT_OASR_ERROR(UnitTable::load(write("dup_token.txt", "a 0\na 1\n")), kCorruptFile,
                    "appears twice");
  EXPECT_OASR_ERROR(UnitTable::load(write("dup_id.txt", "a 0\nb 0\n")), kCorruptFile,
                    "id 0 is given to both");
  EXPECT_OASR_ERROR(UnitTable::load(write("utf8.txt", "\xff 0\n")), kCorruptFile, "UTF-8");
  EXPECT_OASR_ERROR(UnitTable::load(dir.path() / "missing.txt"), kNotFound, "missing.txt");
}

}  // namespace
}  // namespace oasr::decode
