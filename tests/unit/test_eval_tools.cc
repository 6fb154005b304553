// Unit tests for the `oasr eval` helpers: text normalizer, WER/CER counts,
// manifest reader, progress bar and the JSON result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/progress.h"
#include "eval/text_normalizer.h"
#include "eval/wer.h"
#include "io/manifest.h"
#include "support/test_support.h"

namespace oasr::eval {
namespace {

// ---------------------------------------------------------------- normalizer

TEST(TextNormalizer, CasePunctuationAndWhitespace) {
  EXPECT_EQ(normalize_english("  Hello,   WORLD!  "), "hello world");
  EXPECT_EQ(normalize_english("Don't stop; it's 'fine'."), "don't stop it's fine");
  EXPECT_EQ(normalize_english("well-known state-of-the-art"), "well known state of the art");
  EXPECT_EQ(normalize_english("rock\xE2\x80\x99n\xE2\x80\x99roll \xE2\x80\x9Cquoted\xE2\x80\x9D"),
            "rock'n'roll quoted");
  EXPECT_EQ(normalize_english("wait\xE2\x80\x94what\xE2\x80\xA6"), "wait what");
  EXPECT_EQ(normalize_english("?!..."), "");
  EXPECT_EQ(normalize_english(""), "");
}

TEST(TextNormalizer, Latin1LowercasedOtherUtf8Kept) {
  EXPECT_EQ(normalize_english("CAF\xC3\x89 \xC3\x80 LA CR\xC3\x88ME"),
            "caf\xC3\xA9 \xC3\xA0 la cr\xC3\xA8me");
  // × (U+00D7) is a symbol, not a capital: it separates words.
  EXPECT_EQ(normalize_english("3\xC3\x97"
                              "4"),
            "three four");
  // Greek capitals are outside the simple mapping and stay as written.
  EXPECT_EQ(normalize_english("\xCE\xA9mega \xE4\xBD\xA0\xE5\xA5\xBD"),
            "\xCE\xA9mega \xE4\xBD\xA0\xE5\xA5\xBD");
  // An invalid byte is kept inside its word rather than dropped.
  EXPECT_EQ(normalize_english("a\xFF"
                              "b C"),
            "a\xFF"
            "b c");
}

TEST(TextNormalizer, Cardinals) {
  EXPECT_EQ(cardinal_to_words(0), "zero");
  EXPECT_EQ(cardinal_to_words(13), "thirteen");
  EXPECT_EQ(cardinal_to_words(42), "forty two");
  EXPECT_EQ(cardinal_to_words(105), "one hundred five");
  EXPECT_EQ(cardinal_to_words(1000), "one thousand");
  EXPECT_EQ(cardinal_to_words(1'000'010), "one million ten");
  EXPECT_EQ(cardinal_to_words(987'654'321'012ULL),
            "nine hundred eighty seven billion six hundred fifty four million three hundred "
            "twenty one thousand twelve");
  EXPECT_EQ(cardinal_to_words(1'000'000'000'000ULL), "one trillion");
  EXPECT_THROW(cardinal_to_words(1'000'000'000'001ULL), Error);
}

TEST(TextNormalizer, NumbersInText) {
  EXPECT_EQ(normalize_english("I have 42 apples"), "i have forty two apples");
  EXPECT_EQ(normalize_english("1,234 people"), "one thousand two hundred thirty four people");
  EXPECT_EQ(normalize_english("1,2,3"), "one two three");  // not thousands groups
  EXPECT_EQ(normalize_english("pi is 3.14."), "pi is three point one four");
  EXPECT_EQ(normalize_english("agent 007"), "agent zero zero seven");
  EXPECT_EQ(normalize_english("12345678901234"),
            "one two three four five six seven eight nine zero one two three four");
  EXPECT_EQ(normalize_english("mp3"), "mp three");
  EXPECT_EQ(normalize_english("-5"), "five");
}

TEST(TextNormalizer, Years) {
  EXPECT_EQ(normalize_english("In 1999,"), "in nineteen ninety nine");
  EXPECT_EQ(normalize_english("1905"), "nineteen oh five");
  EXPECT_EQ(normalize_english("1900"), "nineteen hundred");
  EXPECT_EQ(normalize_english("2024"), "twenty twenty four");
  EXPECT_EQ(normalize_english("2005"), "two thousand five");
  EXPECT_EQ(normalize_english("1099"), "one thousand ninety nine");
  EXPECT_EQ(normalize_english("2,024"), "two thousand twenty four");  // comma: a count
}

TEST(TextNormalizer, OrdinalsPluralsPercentMoney) {
  EXPECT_EQ(normalize_english("1st 2nd 3rd 4th 5th 9th 12th"),
            "first second third fourth fifth ninth twelfth");
  EXPECT_EQ(normalize_english("the 22nd and 100th and 20th"),
            "the twenty second and one hundredth and twentieth");
  EXPECT_EQ(normalize_english("the 1990s and '80s"), "the nineteen nineties and eighties");
  EXPECT_EQ(normalize_english("1990's"), "nineteen nineties");
  EXPECT_EQ(normalize_english("50% off"), "fifty percent off");
  EXPECT_EQ(normalize_english("$5"), "five dollars");
  EXPECT_EQ(normalize_english("$1"), "one dollar");
  EXPECT_EQ(normalize_english("$2.50"), "two dollars fifty cents");
  EXPECT_EQ(normalize_english("$3.01"), "three dollars one cent");
  EXPECT_EQ(normalize_english("$4.00"), "four dollars");
  EXPECT_EQ(normalize_english("$1.5"), "one point five dollars");
  EXPECT_EQ(normalize_english("$1999"), "one thousand nine hundred ninety nine dollars");
  EXPECT_EQ(normalize_english("a $ sign"), "a sign");
  EXPECT_EQ(normalize_english("1stly"), "one stly");  // suffix must end the word
}

TEST(TextNormalizer, DigitsAndWordsScoreEqual) {
  EXPECT_EQ(normalize_english("He paid $20 on March 3rd, 1999."),
            normalize_english("he paid twenty dollars on march third nineteen ninety-nine"));
}

// ----------------------------------------------------------------- WER / CER

EditCounts word_counts(const std::string& reference, const std::string& hypothesis) {
  return align(split_words(reference), split_words(hypothesis));
}

void expect_counts(const EditCounts& counts, int64_t s, int64_t d, int64_t i, int64_t n) {
  EXPECT_EQ(counts.substitutions, s);
  EXPECT_EQ(counts.deletions, d);
  EXPECT_EQ(counts.insertions, i);
  EXPECT_EQ(counts.reference_length, n);
}

TEST(Wer, BasicEdits) {
  expect_counts(word_counts("a b c", "a b c"), 0, 0, 0, 3);
  expect_counts(word_counts("a b c", "a x c"), 1, 0, 0, 3);
  expect_counts(word_counts("a b c", "a c"), 0, 1, 0, 3);
  expect_counts(word_counts("a b c", "a b x c"), 0, 0, 1, 3);
  expect_counts(word_counts("a b c", ""), 0, 3, 0, 3);
  expect_counts(word_counts("", "a b"), 0, 0, 2, 0);
  expect_counts(word_counts("", ""), 0, 0, 0, 0);
  EXPECT_DOUBLE_EQ(word_counts("a b c d", "a x c").error_rate(), 0.5);
  EXPECT_DOUBLE_EQ(word_counts("", "a b").error_rate(), 2.0);  // divides by 1
}

TEST(Wer, TiesPreferSubstitutions) {
  // "a b" -> "b c": two substitutions, or delete a / hit b / insert c; both
  // cost 2 and the rule picks the substitutions.
  expect_counts(word_counts("a b", "b c"), 2, 0, 0, 2);
  // jiwer 4 reports 1/1/1 here; the max-substitution alignment has 3/0/0.
  expect_counts(word_counts("a b a b a b a", "a a b b a a a"), 3, 0, 0, 7);
}

TEST(Cer, CharactersWithoutSpacesUtf8Aware) {
  EXPECT_EQ(split_characters(" a b\xC3\xA9 "), (std::vector<std::string>{"a", "b", "\xC3\xA9"}));
  const EditCounts counts =
      align(split_characters("hello world"), split_characters("helo  wor ld"));
  expect_counts(counts, 0, 1, 0, 10);
  EXPECT_EQ(parse_error_rate_unit("cer"), ErrorRateUnit::kCharacter);
  EXPECT_THROW(parse_error_rate_unit("ter"), Error);
}

TEST(Wer, CorpusAggregationAndJson) {
  EvalResult result;
  result.per_utterance.emplace();
  result.add("u1", "a b c d", "a x c d");  // 1 sub / 4
  result.add("u2", "e f", "");             // 2 del / 2
  result.add("u3", "g", "g h");            // 1 ins / 1
  EXPECT_EQ(result.utterances, 3);
  expect_counts(result.totals, 1, 2, 1, 7);
  EXPECT_DOUBLE_EQ(result.totals.error_rate(), 4.0 / 7.0);  // not the mean of rates

  const nlohmann::json json = result;
  EXPECT_EQ(json["metric"], "wer");
  EXPECT_DOUBLE_EQ(json["wer"].get<double>(), 4.0 / 7.0);
  EXPECT_EQ(json["substitutions"], 1);
  EXPECT_EQ(json["deletions"], 2);
  EXPECT_EQ(json["insertions"], 1);
  EXPECT_EQ(json["reference_words"], 7);
  EXPECT_EQ(json["utterances"], 3);
  ASSERT_EQ(json["per_utterance"].size(), 3u);
  EXPECT_EQ(json["per_utterance"][1]["id"], "u2");
  EXPECT_EQ(json["per_utterance"][1]["deletions"], 2);
  EXPECT_DOUBLE_EQ(json["per_utterance"][1]["wer"].get<double>(), 1.0);

  EvalResult compact;
  compact.unit = ErrorRateUnit::kCharacter;
  compact.add("x", "ab", "b");
  const nlohmann::json small = compact;
  EXPECT_FALSE(small.contains("per_utterance"));
  EXPECT_EQ(small["reference_characters"], 2);
  EXPECT_DOUBLE_EQ(small["cer"].get<double>(), 0.5);
}

// ------------------------------------------------------------------ manifest

TEST(Manifest, ParsesAndResolvesAudio) {
  const std::string text =
      "{\"id\": \"u1\", \"audio\": \"wav/a.wav\", \"text\": \"Hello\", \"duration\": 1.5}\n"
      "\n   \n"
      "{\"id\": \"u2\", \"audio\": \"/abs/b.flac\", \"text\": \"\"}\r\n";
  const auto entries = io::parse_manifest(text, "m.jsonl", "/data/set");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].id, "u1");
  EXPECT_EQ(entries[0].audio, std::filesystem::path("/data/set/wav/a.wav"));
  EXPECT_EQ(entries[0].text, "Hello");
  EXPECT_EQ(entries[0].line, 1);
  EXPECT_EQ(entries[1].audio, std::filesystem::path("/abs/b.flac"));
  EXPECT_EQ(entries[1].text, "");
  EXPECT_EQ(entries[1].line, 4);

  io::ManifestOptions options;
  options.audio_root = "/other";
  EXPECT_EQ(io::parse_manifest(text, "m", "/data/set", options)[0].audio,
            std::filesystem::path("/other/wav/a.wav"));
}

TEST(Manifest, TextOptionalWhenNotRequired) {
  io::ManifestOptions options;
  options.require_text = false;
  const auto entries =
      io::parse_manifest("{\"id\": \"c\", \"audio\": \"c.wav\"}", "m", "/r", options);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_FALSE(entries[0].text.has_value());
  EXPECT_THROW(io::parse_manifest("{\"id\": \"c\", \"audio\": \"c.wav\"}", "m", "/r"), Error);
}

std::string manifest_error(const std::string& text) {
  try {
    io::parse_manifest(text, "bad.jsonl", "/r");
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

TEST(Manifest, ReportsEveryMalformedLine) {
  const std::string message = manifest_error(
      "{\"id\": \"a\", \"audio\": \"a.wav\", \"text\": \"x\"}\n"  // 1 fine
      "not json\n"                                                // 2
      "[1, 2]\n"                                                  // 3
      "{\"audio\": \"b.wav\", \"text\": \"x\"}\n"                 // 4 no id
      "{\"id\": 7, \"audio\": \"c.wav\", \"text\": \"x\"}\n"      // 5 id number
      "{\"id\": \"d\", \"audio\": \"d.wav\", \"text\": null}\n"   // 6 text null
      "{\"id\": \"a\", \"audio\": \"e.wav\", \"text\": \"x\"}\n"  // 7 duplicate
      "{\"id\": \"f\", \"text\": \"x\"}\n");                      // 8 no audio
  EXPECT_NE(message.find("bad.jsonl has 7 malformed lines"), std::string::npos) << message;
  EXPECT_NE(message.find("line 2: not valid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("line 3: expected a JSON object, found array"), std::string::npos)
      << message;
  EXPECT_NE(message.find("line 4: missing \"id\""), std::string::npos) << message;
  EXPECT_NE(message.find("line 5: \"id\" must be a string, found number"), std::string::npos)
      << message;
  EXPECT_NE(message.find("line 6: \"text\" must be a string, found null"), std::string::npos)
      << message;
  EXPECT_NE(message.find("line 7: duplicate id \"a\" (first on line 1)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("line 8: missing \"audio\""), std::string::npos) << message;
  EXPECT_EQ(message.find("line 1:"), std::string::npos) << message;
}

TEST(Manifest, CapsTheListedProblems) {
  std::string text;
  for (int i = 0; i < 25; ++i) text += "oops\n";
  const std::string message = manifest_error(text);
  EXPECT_NE(message.find("has 25 malformed lines"), std::string::npos) << message;
  EXPECT_NE(message.find("line 20:"), std::string::npos) << message;
  EXPECT_EQ(message.find("line 21:"), std::string::npos) << message;
  EXPECT_NE(message.find("... and 5 more"), std::string::npos) << message;
}

TEST(Manifest, EmptyAndMissingFiles) {
  EXPECT_THROW(io::parse_manifest("\n\n", "empty", "/r"), Error);
  try {
    io::read_manifest("/nonexistent/dir/m.jsonl");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kNotFound);
  }
}

TEST(Manifest, ReadFileDefaultsRootToItsFolder) {
  testing::TempDir dir;
  const auto path = dir.path() / "set" / "m.jsonl";
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << "{\"id\": \"u\", \"audio\": \"x/u.wav\", \"text\": \"t\"}\n";
  const auto entries = io::read_manifest(path);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].audio, dir.path() / "set" / "x" / "u.wav");
}

// -------------------------------------------------------------- progress bar

TEST(Progress, SilentWhenStderrIsNotATerminal) {
  ::testing::internal::CaptureStderr();  // stderr becomes a file: not a tty
  {
    ProgressBar bar(10, "eval");
    EXPECT_FALSE(bar.enabled());
    for (int i = 0; i < 10; ++i) bar.advance();
    bar.finish();
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Progress, DrawsRateEtaAndEndsWithNewline) {
  EXPECT_EQ(format_progress_line("eval", 25, 100, 10.0),
            "eval [######..................] 25/100  25% 2.5 it/s ETA 0:30");
  EXPECT_EQ(format_progress_line("eval", 0, 4, 0.0), "eval [........................] 0/4   0%");
  EXPECT_EQ(format_progress_line("x", 4, 4, 125.0),
            "x [########################] 4/4 100% 0.032 it/s 2:05");
  EXPECT_EQ(format_progress_line("write", 300, 600, 10.0, "MiB"),
            "write [############............] 300/600  50% 30 MiB/s ETA 0:10");

  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressBar bar(3, "job", file, /*enabled=*/true);
    bar.advance(3);
  }  // destructor finishes
  std::rewind(file);
  std::string written;
  for (int c; (c = std::fgetc(file)) != EOF;) written += static_cast<char>(c);
  std::fclose(file);
  EXPECT_NE(written.find("3/3 100%"), std::string::npos) << written;
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written.back(), '\n');
  EXPECT_EQ(std::count(written.begin(), written.end(), '\n'), 1);
}

}  // namespace
}  // namespace oasr::eval
