// Bad input at the CLI edge, as a hostile user types it, on the bundled model
// ([W2-Q] regression cases). The decode flags: every value given is validated
// -- 0, -1, nan and huge values included -- and a flag the chosen decode
// method does not read is refused by name instead of ignored. oasr eval: a
// manifest without one reference word, or a directory given as the manifest.
// Each refusal is one stderr line naming the flag or file and what to do,
// exit status 1, before any audio is decoded.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "support/test_support.h"

namespace oasr::testing {
namespace {

const std::string kModel = std::string(OASR_SOURCE_DIR) + "/models/oasr-u2pp-char-8k";

void expect_refused(const std::vector<std::string>& args, const std::vector<std::string>& needles) {
  std::string joined;
  for (const std::string& a : args) joined += a + " ";
  const CliResult r = run_oasr(args);
  EXPECT_FALSE(r.signaled) << joined;
  EXPECT_EQ(r.exit_code, 1) << joined << "\n" << r.err;
  EXPECT_EQ(split_lines(r.err).size(), 1u) << joined << "\n" << r.err;
  for (const std::string& needle : needles) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << joined << "\n" << r.err;
  }
}

// transcribe with `flags`; the audio path is never read.
void expect_refusal(std::vector<std::string> flags, const std::vector<std::string>& needles,
                    const std::string& model = kModel) {
  std::vector<std::string> args = {"transcribe", "--ckpt-dir", model, "/nonexistent/a.wav"};
  args.insert(args.end(), flags.begin(), flags.end());
  expect_refused(args, needles);
}

TEST(CliDecodeFlags, ValuesThatUsedToMeanNotGivenAreValidated) {
  expect_refusal({"--beam-size", "0"}, {"--beam-size", "[1, 128]", "got 0"});
  expect_refusal({"--chunk-size", "0"}, {"--chunk-size", "-1 or an integer >= 1", "got 0"});
  expect_refusal({"--left-chunks", "-2"}, {"--left-chunks", "got -2"});
  expect_refusal({"--reverse-weight", "-1"}, {"--reverse-weight", "[0, 1]"});
  expect_refusal({"--ctc-weight", "-1"}, {"--ctc-weight", ">= 0"});
}

TEST(CliDecodeFlags, NonFiniteAndHugeValuesAreRefused) {
  expect_refusal({"--ctc-weight", "nan"}, {"--ctc-weight", "finite", "nan"});
  expect_refusal({"--reverse-weight", "nan"}, {"--reverse-weight", "[0, 1]"});
  expect_refusal({"--decode-method", "ctc_prefix_beam_search", "--beam-size", "100000"},
                 {"--beam-size", "[1, 128]", "100000"});
}

// [W3-S] The endpoint rules: refused offline, without endpointing, past the
// positional table, and as NaN.
TEST(CliDecodeFlags, EndpointFlagsAreRefusedWhereTheyCannotApply) {
  expect_refusal({"--endpoint"},
                 {"endpoint (--endpoint) ends segments between chunks", "--chunk-size N"});
  expect_refusal({"--endpoint-silence", "2"},
                 {"endpoint_silence (--endpoint-silence)", "endpointing is off"});
  expect_refusal({"--chunk-size", "16", "--endpoint", "--max-segment-seconds", "300"},
                 {"max_segment_seconds (--max-segment-seconds) 300 s and one chunk of 0.64 s",
                  "200.075 s", "use at most 199"});
  expect_refusal({"--chunk-size", "16", "--endpoint", "--endpoint-silence", "nan"},
                 {"--endpoint-silence", "[0.04, 60]", "nan"});
}

TEST(CliDecodeFlags, AFlagTheMethodDoesNotReadIsRefusedByName) {
  expect_refusal({"--decode-method", "ctc_greedy_search", "--ctc-weight", "0.5"},
                 {"--ctc-weight", "ctc_greedy_search does not rescore", "attention_rescoring"});
  expect_refusal({"--decode-method", "ctc_prefix_beam_search", "--reverse-weight", "0.3"},
                 {"--reverse-weight", "ctc_prefix_beam_search does not rescore"});
  expect_refusal({"--decode-method", "ctc_greedy_search", "--beam-size", "4"},
                 {"ctc_greedy_search keeps one hypothesis", "--beam-size 4"});
  expect_refusal({"--length-penalty", "0.5"}, {"--length-penalty", "Whisper", "drop it"});
  // Whisper's decode options are resolved before its weights are read, so a
  // directory with only its config.json is enough to be refused.
  const TempDir whisper;
  std::ofstream(whisper.path() / "config.json") << R"({"model_type": "whisper"})";
  expect_refusal({"--length-penalty", "0.5"}, {"--length-penalty", "greedy_search has none"},
                 whisper.path().string());
  expect_refusal({"--decode-method", "beam_search", "--length-penalty", "nan"},
                 {"--length-penalty", "finite", "nan"}, whisper.path().string());
  expect_refusal({"--decode-method", "beam_search", "--beam-size", "1000"},
                 {"--beam-size", "[1, 128]"}, whisper.path().string());
}

// `seconds` of a 440 Hz tone of `amplitude` on a `dc` offset (int16 steps),
// 8 kHz 16-bit mono PCM WAV.
void write_tone_wav(const std::string& path, double seconds = 1.0, double amplitude = 8000.0,
                    double dc = 0.0) {
  constexpr uint32_t kRate = 8000;
  std::vector<int16_t> samples(static_cast<size_t>(kRate * seconds));
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<int16_t>(dc + amplitude * std::sin(2.0 * M_PI * 440.0 * i / kRate));
  }
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 2);
  std::ofstream out(path, std::ios::binary);
  const auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  const auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  out.write("RIFF", 4);
  u32(36 + data_bytes);
  out.write("WAVEfmt ", 8);
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(kRate);
  u32(kRate * 2);
  u16(2);
  u16(16);
  out.write("data", 4);
  u32(data_bytes);
  out.write(reinterpret_cast<const char*>(samples.data()), data_bytes);
}

TEST(CliDecodeFlags, TheDefaultsAndValidValuesStillServe) {
  const TempDir dir;
  const std::string wav = (dir.path() / "tone.wav").string();
  write_tone_wav(wav);
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{},
                                             {"--beam-size", "3", "--ctc-weight", "0.3"},
                                             {"--chunk-size", "-1", "--left-chunks", "-1"},
                                             {"--decode-method", "ctc_greedy_search"}}) {
    std::vector<std::string> args = {"transcribe", "--ckpt-dir", kModel, wav};
    args.insert(args.end(), flags.begin(), flags.end());
    const CliResult r = run_oasr(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(wav, 0), 0u) << r.out;
  }
}

// [W3-S] Digital silence and a DC offset hold no speech: an empty transcript
// (U2++ said "A", Whisper " you"), while a quiet tone at -75 dBFS is still
// decoded, alone or between the silent files, with the same text.
TEST(CliTranscribeInput, SilenceAndDcAreAnEmptyTranscript) {
  const TempDir dir;
  const std::string silence = (dir.path() / "silence.wav").string();
  const std::string dc = (dir.path() / "dc.wav").string();
  const std::string quiet = (dir.path() / "quiet.wav").string();
  write_tone_wav(silence, 3.0, 0.0);
  write_tone_wav(dc, 3.0, 0.0, 8000.0);
  write_tone_wav(quiet, 3.0, 8.0);  // RMS 8 / sqrt(2) of 32768: -75.3 dBFS
  const CliResult alone = run_oasr({"transcribe", "--ckpt-dir", kModel, quiet});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const CliResult r = run_oasr({"transcribe", "--ckpt-dir", kModel, silence, quiet, dc});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, silence + "\t\n" + alone.out + dc + "\t\n");
}

// [W3-S] Long endpointed U2++ work shows its progress (seconds of audio) on a
// terminal, and nothing of it off one. `script` (util-linux) gives the
// command a pseudo-terminal.
TEST(CliTranscribeInput, LongEndpointedAudioShowsProgressOnATerminal) {
  if (run_command("command -v script >/dev/null").exit_code != 0) {
    GTEST_SKIP() << "util-linux 'script' is not installed";
  }
  const TempDir dir;
  const std::string minute = (dir.path() / "minute.wav").string();
  write_tone_wav(minute, 61.5);
  const std::vector<std::string> args = {"transcribe",   "--ckpt-dir", kModel,      minute,
                                         "--chunk-size", "16",         "--endpoint"};
  const CliResult piped = run_oasr(args);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("u2pp ["), std::string::npos) << piped.err;
  std::string command = shell_quote(OASR_CLI_BINARY);
  for (const std::string& a : args) command += " " + shell_quote(a);
  const CommandResult r =
      run_command("script -qec " + shell_quote(command) + " /dev/null </dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\ru2pp ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("62/62 100%"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" s/s"), std::string::npos) << r.output;
}

// One bad file among good ones: each bad one named on stderr, the good
// ones transcribed (the same text as alone), exit status 1.
TEST(CliTranscribeInput, ABadFileIsNamedAndTheOthersAreStillTranscribed) {
  const TempDir dir;
  const std::string good = (dir.path() / "tone.wav").string();
  const std::string brief = (dir.path() / "brief.wav").string();  // 10 ms
  const std::string missing = (dir.path() / "missing.wav").string();
  write_tone_wav(good);
  write_tone_wav(brief, 0.01);
  const CliResult alone = run_oasr({"transcribe", "--ckpt-dir", kModel, good});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;

  const CliResult r = run_oasr({"transcribe", "--ckpt-dir", kModel, brief, good, missing});
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, alone.out);
  const std::vector<std::string> errors = split_lines(r.err);
  ASSERT_EQ(errors.size(), 3u) << r.err;
  EXPECT_NE(errors[0].find(brief), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("shorter than one 25 ms analysis window"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find(missing), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("2 of 3 file(s) could not be transcribed"), std::string::npos)
      << errors[2];

  // JSON output keeps one line per file, the failures as {"file", "error"}.
  const CliResult j =
      run_oasr({"transcribe", "--ckpt-dir", kModel, "--output-format", "json", brief, good});
  EXPECT_EQ(j.exit_code, 1);
  const std::vector<std::string> lines = split_lines(j.out);
  ASSERT_EQ(lines.size(), 2u) << j.out;
  EXPECT_NE(lines[0].find("\"error\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"text\""), std::string::npos) << lines[1];
}

// A file the model cannot take (longer than U2++'s 5000-row positional
// table: refused up front since [W3-S], it used to fail inside its batch) is
// named; its batch neighbours are still transcribed.
TEST(CliTranscribeInput, AFailureInsideTheBatchIsNamedAndTheBatchIsKept) {
  const TempDir dir;
  const std::string good = (dir.path() / "tone.wav").string();
  const std::string long_file = (dir.path() / "long.wav").string();  // 5025 rows after subsampling
  write_tone_wav(good);
  write_tone_wav(long_file, 201.0);
  const CliResult alone = run_oasr({"transcribe", "--ckpt-dir", kModel, good});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;

  const CliResult r = run_oasr(
      {"transcribe", "--ckpt-dir", kModel, "--max-batch-size", "4", good, long_file, good});
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, alone.out + alone.out);
  const std::vector<std::string> errors = split_lines(r.err);
  ASSERT_EQ(errors.size(), 2u) << r.err;
  EXPECT_EQ(
      errors[0].rfind("oasr: error: " + long_file +
                          ": 201 s of audio is over the 200.075 s this U2++ model takes at once",
                      0),
      0u)
      << errors[0];
  EXPECT_NE(errors[0].find("split it into pieces of at most 200.075 s"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("1 of 3 file(s) could not be transcribed"), std::string::npos)
      << errors[1];

  // eval names it by manifest line and id, scores the rest, and exits 1.
  const std::string manifest = (dir.path() / "m.jsonl").string();
  std::ofstream(manifest) << R"({"id": "a", "audio": ")" << good << R"(", "text": "a"})"
                          << "\n"
                          << R"({"id": "b", "audio": ")" << long_file << R"(", "text": "b"})"
                          << "\n";
  const CliResult e = run_oasr({"eval", "--ckpt-dir", kModel, "--manifest", manifest});
  EXPECT_EQ(e.exit_code, 1) << e.err;
  EXPECT_NE(e.out.find("utterances 1"), std::string::npos) << e.out;
  const std::vector<std::string> eval_errors = split_lines(e.err);
  ASSERT_EQ(eval_errors.size(), 2u) << e.err;
  EXPECT_EQ(eval_errors[0].rfind("oasr: error: " + manifest + " line 2 (id b): " + long_file +
                                     ": 201 s of audio is over the 200.075 s",
                                 0),
            0u)
      << eval_errors[0];
  EXPECT_NE(eval_errors[1].find("1 of 2 utterance(s) could not be decoded"), std::string::npos)
      << eval_errors[1];
  const CliResult ej =
      run_oasr({"eval", "--ckpt-dir", kModel, "--manifest", manifest, "--output-format", "json"});
  EXPECT_EQ(ej.exit_code, 1);
  const auto report = nlohmann::json::parse(ej.out);
  ASSERT_EQ(report.at("failed").size(), 1u) << ej.out;
  EXPECT_EQ(report["failed"][0].at("id"), "b");
  EXPECT_EQ(report["failed"][0].at("line"), 2);
  EXPECT_EQ(report.at("utterances"), 1);
}

// A repeatable flag takes one value per occurrence: the audio files after
// --quantization-option stay positional (they used to be eaten as options).
TEST(CliTranscribeInput, AQuantizationOptionTakesOneValue) {
  const TempDir dir;
  const std::string wav = (dir.path() / "tone.wav").string();
  write_tone_wav(wav);
  const CliResult r = run_oasr({"transcribe", "--ckpt-dir", kModel, "--quantization", "int8_w8a8",
                                "--quantization-option", "ignore=ctc.*", "--quantization-option",
                                "module_types=linear", wav});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(wav + "\t", 0), 0u) << r.out;
}

TEST(CliEvalInput, AManifestWithoutOneReferenceWordIsRefused) {
  const TempDir dir;
  const std::string wav = (dir.path() / "tone.wav").string();
  write_tone_wav(wav);
  const std::string manifest = (dir.path() / "empty_refs.jsonl").string();
  std::ofstream(manifest) << R"({"id": "a", "audio": ")" << wav << R"(", "text": ""})"
                          << "\n"
                          << R"({"id": "b", "audio": ")" << wav << R"(", "text": " . "})"
                          << "\n";
  expect_refused({"eval", "--ckpt-dir", kModel, "--manifest", manifest},
                 {manifest, "0 reference words", "word error rate is undefined"});
  // One reference word is enough: the rate is errors / 1.
  std::ofstream(manifest) << R"({"id": "a", "audio": ")" << wav << R"(", "text": "minutes"})"
                          << "\n"
                          << R"({"id": "b", "audio": ")" << wav << R"(", "text": ""})"
                          << "\n";
  const CliResult r = run_oasr({"eval", "--ckpt-dir", kModel, "--manifest", manifest});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("reference words"), std::string::npos) << r.out;
}

TEST(CliEvalInput, ADirectoryAsTheManifestIsNamedAsOne) {
  const TempDir dir;
  expect_refused({"eval", "--ckpt-dir", kModel, "--manifest", dir.path().string()},
                 {dir.path().string(), "is a directory", "JSON-lines file"});
}

// A file named "-speech.wav" is read as a flag; the parse error names the
// file and the two ways to pass it.
TEST(CliBadInput, AFileNamedLikeAFlagIsNamedWithTheFix) {
  const TempDir dir;
  std::ofstream(dir.path() / "-speech.wav") << "not audio";
  const CommandResult r =
      run_command("cd " + shell_quote(dir.path().string()) + " && " + shell_quote(OASR_CLI_BINARY) +
                  " transcribe -speech.wav --ckpt-dir " + shell_quote(kModel) + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(split_lines(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("'-speech.wav' was read as a flag: to name that file write "
                          "./-speech.wav or put it after --"),
            std::string::npos)
      << r.output;
}

// The bundled model copied into `dir` with model.encoder.KEY set to `value`
// in its oasr_config.json.
std::filesystem::path copy_model_with_encoder_key(const TempDir& dir, const std::string& key,
                                                  int64_t value) {
  const std::filesystem::path copy = dir.path() / "u2pp";
  std::filesystem::copy(kModel, copy, std::filesystem::copy_options::recursive);
  nlohmann::json config;
  std::ifstream(copy / "oasr_config.json") >> config;
  config["model"]["encoder"][key] = value;
  std::ofstream(copy / "oasr_config.json") << config.dump();
  return copy;
}

// [W3-S] An absurd block count in the config is refused from the tensors,
// before any block is built (it ran 60 s and took 3.7 GB at 600000).
TEST(CliBadInput, AConfigBlockCountTheTensorsDoNotHoldIsRefusedAtOnce) {
  const TempDir dir;
  const std::filesystem::path copy = copy_model_with_encoder_key(dir, "num_blocks", 600000);
  expect_refused({"transcribe", "--ckpt-dir", copy.string(), "/nonexistent/a.wav"},
                 {"oasr_config.json: model.encoder.num_blocks is 600000 but the checkpoint holds "
                  "6 blocks (encoder.encoders.0 .. encoder.encoders.5)"});
}

// [W3-S] Weights that do not fit the config are refused naming the
// directory, the checkpoint keys and the likely cause, not an internal class
// ("checkpoint does not match U2pp").
TEST(CliBadInput, WeightsThatDoNotFitTheConfigNameTheDirectoryAndTheKeys) {
  const TempDir dir;
  const std::filesystem::path copy =
      copy_model_with_encoder_key(dir, "linear_units", 1024);  // the tensors hold 512
  const CommandResult r = run_command(shell_quote(OASR_CLI_BINARY) + " transcribe --ckpt-dir " +
                                      shell_quote(copy.string()) + " /nonexistent/a.wav 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const std::string& part :
       {copy.string() + ": the checkpoint does not fit the model",
        std::string("encoder.encoders.0.feed_forward.w_1.weight: shape [512, 256], expected "
                    "[1024, 256]"),
        std::string("the weights do not fit the U2++ Conformer model that the directory's "
                    "config describes")}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\nin:\n" << r.output;
  }
  EXPECT_EQ(r.output.find("U2pp"), std::string::npos) << r.output;
}

// [W3-S] A malformed switch is the start-up's error, not the first audio
// file's: no audio path in front of it.
TEST(CliBadInput, AMalformedSwitchIsRefusedAtStartUpWithoutAnAudioPath) {
  for (const std::string variable :
       {"OASR_CUDA_GRAPHS", "OASR_FUSED_ATTENTION", "OASR_QUANT_FUSION", "OASR_QUANT_GEMV"}) {
    const CommandResult r =
        run_command(variable + "=maybe " + shell_quote(OASR_CLI_BINARY) +
                    " transcribe --ckpt-dir " + shell_quote(kModel) + " /nonexistent/a.wav 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "oasr: error: environment variable " + variable +
                            "='maybe' is not a boolean; use 1/0, true/false, yes/no or on/off\n");
  }
}

// [W3-S] Audio longer than U2++'s positional table reaches is refused up
// front with the model's limit and why, before any decoding.
TEST(CliBadInput, AudioOverTheModelsLimitIsRefusedWithTheLimit) {
  const TempDir dir;
  const std::filesystem::path wav = dir.path() / "long.wav";
  {
    std::ofstream out(wav, std::ios::binary);
    const auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    const auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
    const uint32_t bytes = 8000 * 2 * 205;  // 205 s of silence at 8 kHz
    out.write("RIFF", 4);
    u32(36 + bytes);
    out.write("WAVEfmt ", 8);
    u32(16), u16(1), u16(1), u32(8000), u32(16000), u16(2), u16(16);
    out.write("data", 4);
    u32(bytes);
    const std::string zeros(bytes, '\0');
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  expect_refused(
      {"transcribe", "--ckpt-dir", kModel, wav.string()},
      {wav.string() + ": 205 s of audio is over the 200.075 s this U2++ model takes at once "
                      "(its positional table holds 5000 encoder frames of 4 x 10 ms",
       "split it into pieces of at most 200.075 s"});
}

}  // namespace
}  // namespace oasr::testing
