// `oasr transcribe --device cuda` against `--device cpu` on the u2pp_engine
// oracle fixture (random weights, utterances generated with decision
// margins, so the CPU float32 path matches WeNet token for token): float32
// and float16 on the GPU must give the CPU's transcripts for every decode
// method, offline and chunked (the streaming computation with caches);
// bfloat16 must run and give a transcript for every file. Skips where no GPU
// is visible.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cli/cli_test_util.h"
#include "core/device.h"

namespace oasr::testing {
namespace {

const char* const kUtterances[] = {"u01_chirps",  "u02_harmonic", "u03_noise_bursts",
                                   "u04_mixture", "u05_long",     "u06_short"};

// file -> text, from one transcribe run over all utterances.
std::map<std::string, std::string> transcribe(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"transcribe"};
  for (const char* utt : kUtterances) {
    args.push_back((oracle_dir() / "model" / "audio" / (std::string(utt) + ".wav")).string());
  }
  args.push_back("--ckpt-dir");
  args.push_back((oracle_dir() / "model").string());
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_oasr(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::string> texts;
  for (const std::string& line : split_lines(r.out)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) texts[line.substr(0, tab)] = line.substr(tab + 1);
  }
  EXPECT_EQ(texts.size(), std::size(kUtterances)) << r.out;
  return texts;
}

class CudaTranscribe : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  }
};

TEST_P(CudaTranscribe, MatchesTheCpu) {
  const std::string method = std::get<0>(GetParam());
  const std::string chunk = std::get<1>(GetParam());
  const std::vector<std::string> common = {"--decode-method",  method, "--chunk-size", chunk,
                                           "--max-batch-size", "4"};
  auto with = [&](std::vector<std::string> device) {
    device.insert(device.end(), common.begin(), common.end());
    return transcribe(device);
  };
  const auto cpu = with({"--device", "cpu"});
  EXPECT_EQ(with({"--device", "cuda", "--dtype", "float32"}), cpu) << "float32";
  EXPECT_EQ(with({"--device", "cuda", "--dtype", "float16"}), cpu) << "float16";
  const auto bf16 = with({"--device", "cuda", "--dtype", "bfloat16"});
  for (const auto& [file, text] : cpu) {
    ASSERT_EQ(bf16.count(file), 1u) << file;
    if (!text.empty()) {
      EXPECT_FALSE(bf16.at(file).empty()) << file;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MethodsAndModes, CudaTranscribe,
                         ::testing::Combine(::testing::Values(std::string("ctc_greedy_search"),
                                                              std::string("ctc_prefix_beam_search"),
                                                              std::string("attention_rescoring")),
                                            ::testing::Values(std::string("-1"),
                                                              std::string("16"))),
                         [](const auto& info) {
                           const std::string chunk = std::get<1>(info.param);
                           return std::get<0>(info.param) +
                                  (chunk == "-1" ? "_offline" : "_chunk" + chunk);
                         });

}  // namespace
}  // namespace oasr::testing
