// `oasr transcribe` and `oasr eval` as a user runs them, on the random-weight
// WeNet-layout directory the u2pp_engine oracle generator writes (the engine
// beneath is checked token for token against the oracle in
// tests/oracle/test_u2pp_engine.cc; this checks the command-line surface).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"

namespace oasr::testing {
namespace {

std::filesystem::path model_dir() {
  return oracle_dir() / "model";
}
std::string audio(const char* name) {
  return (model_dir() / "audio" / name).string();
}

std::map<std::string, std::string> transcribe_texts(const std::vector<std::string>& files) {
  std::vector<std::string> args = {"transcribe"};
  args.insert(args.end(), files.begin(), files.end());
  for (const char* a : {"--ckpt-dir", "", "--decode-method", "ctc_prefix_beam_search"}) {
    args.push_back(a);
  }
  args[files.size() + 2] = model_dir().string();
  const CliResult r = run_oasr(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> texts;
  for (const std::string& line : split_lines(r.out)) {
    const size_t tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << line;
    texts[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return texts;
}

TEST(CliTranscribe, OneTabSeparatedLinePerFileAndJsonWithTokens) {
  const std::vector<std::string> files = {audio("u01_chirps.wav"), audio("u02_harmonic.wav")};
  const auto texts = transcribe_texts(files);
  ASSERT_EQ(texts.size(), 2u);
  for (const auto& f : files) EXPECT_FALSE(texts.at(f).empty()) << f;

  const CliResult r =
      run_oasr({"transcribe", files[0], "--ckpt-dir", model_dir().string(), "--decode-method",
                "ctc_prefix_beam_search", "--output-format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto line = nlohmann::json::parse(r.out);
  EXPECT_EQ(line.at("file"), files[0]);
  EXPECT_EQ(line.at("text"), texts.at(files[0]));
  EXPECT_FALSE(line.at("tokens").empty());
}

TEST(CliTranscribe, BadInputsAreOneLineErrors) {
  const std::string dir = model_dir().string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"transcribe", "/nonexistent.wav", "--ckpt-dir", dir},
           {"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", "/nonexistent-dir"},
           {"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", dir, "--decode-method", "nope"},
           {"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", dir, "--output-format", "xml"},
           {"transcribe", audio("u01_chirps.wav"), "--ckpt-dir", dir, "--chunk-size", "-5"}}) {
    const CliResult r = run_oasr(args);
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.exit_code, 1) << args[1] << " " << args.back() << "\n" << r.err;
    EXPECT_EQ(split_lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("oasr: error: ", 0), 0u) << r.err;
  }
}

TEST(CliEval, ScoresAManifestAgainstItsReferences) {
  const TempDir tmp;
  const std::vector<std::string> files = {audio("u01_chirps.wav"), audio("u02_harmonic.wav")};
  const auto texts = transcribe_texts(files);
  // The first reference is the transcript itself (0 errors); the second is
  // unrelated text, so every one of its 4 characters is an error.
  const std::string manifest = (tmp.path() / "m.jsonl").string();
  {
    std::ofstream out(manifest);
    out << nlohmann::json{{"id", "a"}, {"audio", files[0]}, {"text", texts.at(files[0])}}.dump()
        << "\n"
        << nlohmann::json{{"id", "b"}, {"audio", files[1]}, {"text", "zzzz"}}.dump() << "\n";
  }
  const CliResult r = run_oasr({"eval", "--manifest", manifest, "--ckpt-dir", model_dir().string(),
                                "--decode-method", "ctc_prefix_beam_search", "--metric", "cer",
                                "--output-format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto result = nlohmann::json::parse(r.out);
  EXPECT_EQ(result.at("utterances"), 2);
  EXPECT_EQ(result.at("per_utterance")[1].at("reference"), "zzzz") << r.out;
  EXPECT_GE(result.at("errors").get<int64_t>(), 4) << r.out;  // zzzz is 4 characters
  EXPECT_GT(result.at("cer").get<double>(), 0.0);
  EXPECT_EQ(result.at("per_utterance")[0].at("errors"), 0) << r.out;
  // The decoding speed: audio seconds over the decode calls' wall time.
  const double audio_seconds = result.at("audio_seconds").get<double>();
  const double decode_seconds = result.at("decode_seconds").get<double>();
  EXPECT_GT(audio_seconds, 0.5) << r.out;  // two test clips of about a second or more
  EXPECT_GT(decode_seconds, 0.0) << r.out;
  EXPECT_NEAR(result.at("rtfx").get<double>(), audio_seconds / decode_seconds, 1e-9) << r.out;

  // A malformed manifest is refused naming the line.
  const std::string bad = (tmp.path() / "bad.jsonl").string();
  {
    std::ofstream out(bad);
    out << nlohmann::json{{"id", "a"}, {"audio", files[0]}, {"text", "x"}}.dump() << "\n"
        << "{not json\n";
  }
  const CliResult refused =
      run_oasr({"eval", "--manifest", bad, "--ckpt-dir", model_dir().string()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("line 2"), std::string::npos) << refused.err;
}

// Batch invariance on the CPU, end to end: ten real prompts of 1.7-22 s
// decoded in batches of 8 (so each is padded to its batch's longest) give
// each prompt the tokens and the score (every bit of the double) it has
// alone, in float32 and with online int8_w8a8.
TEST(CliTranscribeBatch, RealPromptsGiveTheirAloneResultsInABatch) {
  const std::string sounds = "/usr/share/asterisk/sounds/en/";
  std::vector<std::string> files;
  for (const char* name :
       {"agent-loginok", "vm-goodbye", "auth-thankyou", "vm-password", "conf-onlyperson",
        "vm-intro", "agent-pass", "privacy-thankyou", "demo-echotest", "vm-options"}) {
    files.push_back(sounds + name + ".wav");
  }
  if (!std::ifstream(files.back()).good()) {
    GTEST_SKIP() << files.back() << " is missing (asterisk-core-sounds-en-wav, scripts/setup.sh)";
  }
  const std::string model = std::string(OASR_SOURCE_DIR) + "/models/oasr-u2pp-char-8k";
  for (const std::vector<std::string>& scheme :
       std::vector<std::vector<std::string>>{{}, {"--quantization", "int8_w8a8"}}) {
    std::vector<std::string> args = {"transcribe", "--ckpt-dir",       model, "--output-format",
                                     "json",       "--max-batch-size", "8"};
    args.insert(args.end(), scheme.begin(), scheme.end());
    std::vector<std::string> together_args = args;
    together_args.insert(together_args.end(), files.begin(), files.end());
    const CliResult together = run_oasr(together_args);
    ASSERT_EQ(together.exit_code, 0) << together.err;
    const std::vector<std::string> lines = split_lines(together.out);
    ASSERT_EQ(lines.size(), files.size()) << together.out;
    for (size_t i = 0; i < files.size(); ++i) {
      std::vector<std::string> alone_args = args;
      alone_args.push_back(files[i]);
      const CliResult alone = run_oasr(alone_args);
      ASSERT_EQ(alone.exit_code, 0) << alone.err;
      const auto a = nlohmann::json::parse(alone.out);
      const auto b = nlohmann::json::parse(lines[i]);
      EXPECT_EQ(b.at("tokens"), a.at("tokens")) << files[i] << (scheme.empty() ? "" : " int8");
      EXPECT_EQ(b.at("score").get<double>(), a.at("score").get<double>())
          << files[i] << (scheme.empty() ? "" : " int8");
    }
  }
}

}  // namespace
}  // namespace oasr::testing
