// WER/CER counts against tests/oracle/gen_wer.py: totals from jiwer, the
// substitution/deletion/insertion split from an independent Python DP of the
// documented tie rule (most substitutions among minimum-cost alignments).
// Counts are integers, so the comparison is exact (no tolerance).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "eval/wer.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr::eval {
namespace {

TEST(WerOracle, MatchesJiwerTotalsAndReferenceSplit) {
  const auto file = io::SafeTensorsFile::open(testing::oracle_dir() / "cases.safetensors");
  const auto cases = nlohmann::json::parse(file.metadata().at("cases"));
  ASSERT_GT(cases.size(), 100u);
  int jiwer_split_differs = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const ErrorRateUnit unit = parse_error_rate_unit(c["unit"].get<std::string>());
    const Tensor expected_tensor = file.get(name + "/expected");
    ASSERT_EQ(expected_tensor.dtype(), DType::kI64);
    ASSERT_EQ(expected_tensor.numel(), 8);
    const int64_t* expected = expected_tensor.data<int64_t>();

    const EditCounts counts = align(tokenize(c["reference"].get<std::string>(), unit),
                                    tokenize(c["hypothesis"].get<std::string>(), unit));
    EXPECT_EQ(counts.substitutions, expected[0]);
    EXPECT_EQ(counts.deletions, expected[1]);
    EXPECT_EQ(counts.insertions, expected[2]);
    EXPECT_EQ(counts.reference_length, expected[3]);
    EXPECT_EQ(counts.errors(), expected[4]) << "jiwer total";
    jiwer_split_differs += counts.substitutions != expected[5];
  }
  // The adversarial "greedy_differs" case is built so jiwer's backtrace and
  // the max-substitution rule disagree; if none differ, the generator's
  // jiwer columns are not what this test thinks they are.
  EXPECT_GT(jiwer_split_differs, 0);
}

}  // namespace
}  // namespace oasr::eval
