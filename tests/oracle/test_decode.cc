// src/decode against gen_decode.py, a Python re-implementation of WeNet's
// searches with WeNet's own data structures (Python floats, insertion-ordered
// dict, stable sorted(), torch.topk candidates, float32 tensor sums for the
// decoder scores), on random CTC log-probs with deliberate ties.
//
// Tolerances: token ids, n-best order, best index and topk indices must be
// equal. CTC prefix scores are doubles built from the same float32 inputs by
// the same sequence of IEEE operations and the same libm exp/log that Python
// calls, so they should agree to the bit; the test allows 1e-9 relative to
// leave room for a libm that differs in the last bit, far below any gap that
// could reorder hypotheses that are not exactly tied (an exact tie is
// reproduced exactly or the ids would differ). Rescoring totals are float32
// values from the same float32 operations in the same order: compared
// bitwise.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/attention_rescoring.h"
#include "decode/ctc_alignment.h"
#include "decode/ctc_search.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr::decode {
namespace {

using nlohmann::json;

constexpr double kScoreRelTolerance = 1e-9;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

std::vector<json> cases_of(const std::string& kind) {
  std::vector<json> selected;
  for (const json& c : oracle().cases) {
    if (c.at("kind") == kind) selected.push_back(c);
  }
  return selected;
}

const json& case_named(const std::string& name) {
  for (const json& c : oracle().cases) {
    if (c.at("name") == name) return c;
  }
  throw std::runtime_error("no oracle case " + name);
}

Tensor role(const json& c, const std::string& name) {
  return oracle().file.get(c.at("name").get<std::string>() + "/" + name);
}

std::vector<int64_t> int64_values(const Tensor& t) {
  const Tensor dense = t.contiguous();
  return std::vector<int64_t>(dense.data<int64_t>(), dense.data<int64_t>() + dense.numel());
}

std::vector<double> doubles_from_bits(const Tensor& bits) {
  std::vector<double> out;
  for (const int64_t b : int64_values(bits)) out.push_back(std::bit_cast<double>(b));
  return out;
}

// Rows of a [N, W] id tensor padded with -1, cut to their lengths.
std::vector<std::vector<int64_t>> token_rows(const Tensor& padded, const Tensor& lengths) {
  const std::vector<int64_t> flat = int64_values(padded);
  const std::vector<int64_t> lens = int64_values(lengths);
  const int64_t width = padded.size(1);
  std::vector<std::vector<int64_t>> rows;
  for (size_t i = 0; i < lens.size(); ++i) {
    rows.emplace_back(flat.begin() + static_cast<int64_t>(i) * width,
                      flat.begin() + static_cast<int64_t>(i) * width + lens[i]);
  }
  return rows;
}

bool scores_match(double actual, double expected) {
  if (actual == expected) return true;  // includes -inf == -inf
  return std::fabs(actual - expected) <= kScoreRelTolerance * std::fabs(expected);
}

std::vector<CtcHypothesis> expected_nbest(const json& c) {
  const auto rows = token_rows(role(c, "nbest_tokens"), role(c, "nbest_lengths"));
  const auto scores = doubles_from_bits(role(c, "nbest_scores_bits"));
  std::vector<CtcHypothesis> nbest;
  for (size_t i = 0; i < rows.size(); ++i) nbest.push_back(CtcHypothesis{rows[i], scores[i]});
  return nbest;
}

::testing::AssertionResult ids_equal(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << actual.str() << " != expected " << expected.str();
  }
  if (int64_values(actual) != int64_values(expected)) {
    return ::testing::AssertionFailure() << "ids differ";
  }
  return ::testing::AssertionSuccess();
}

TEST(DecodeOracle, TopkMatchesTorchIncludingTies) {
  const std::vector<json> cases = cases_of("topk");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Tensor row = role(c, "row").contiguous();
    const std::vector<int64_t> got =
        torch_cpu_topk(std::span<const float>(row.data<float>(), static_cast<size_t>(row.numel())),
                       c.at("k").get<int64_t>());
    EXPECT_EQ(got, int64_values(role(c, "indices")));
  }
}

TEST(DecodeOracle, PrefixBeamSearchMatchesWenet) {
  const std::vector<json> cases = cases_of("ctc");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Tensor log_probs = role(c, "log_probs");
    CtcPrefixBeamSearchOptions options;
    options.beam_size = c.at("beam").get<int64_t>();
    const std::vector<CtcHypothesis> got = ctc_prefix_beam_search(log_probs, options);
    const std::vector<CtcHypothesis> want = expected_nbest(c);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "hypothesis " << i;
      EXPECT_TRUE(scores_match(got[i].score, want[i].score))
          << "hypothesis " << i << ": " << got[i].score << " vs " << want[i].score;
    }

    // The batched entry point over the same utterance padded with two
    // garbage frames (which the length must exclude) gives the same list.
    const int64_t frames = log_probs.size(0), vocab = log_probs.size(1);
    Tensor padded = Tensor::full({1, frames + 2, vocab}, 0.0f);
    padded.select(0, 0).slice(0, 0, frames).copy_(log_probs);
    const auto batched = ctc_prefix_beam_search(
        padded, Tensor::from_vector<int32_t>({static_cast<int32_t>(frames)}, {1}), options);
    ASSERT_EQ(batched.size(), 1u);
    ASSERT_EQ(batched[0].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(batched[0][i].tokens, got[i].tokens);
      EXPECT_EQ(batched[0][i].score, got[i].score);
    }
  }
}

TEST(DecodeOracle, GreedySearchMatchesWenet) {
  for (const json& c : cases_of("ctc")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto want = token_rows(role(c, "greedy_tokens"), role(c, "greedy_length"));
    EXPECT_EQ(ctc_greedy_search(role(c, "log_probs")), want.front());
  }
  const std::vector<json> batches = cases_of("greedy_batch");
  ASSERT_FALSE(batches.empty());
  for (const json& c : batches) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto want = token_rows(role(c, "tokens"), role(c, "token_lengths"));
    EXPECT_EQ(ctc_greedy_search(role(c, "log_probs"), role(c, "lengths")), want);
  }
}

// The forced alignment of each CTC case's best hypotheses: the frames of
// every token equal the oracle's Viterbi path (whose optimum the generator
// checks against every labelling on the small cases).
TEST(DecodeOracle, ForcedAlignmentMatchesTheViterbiPath) {
  const std::vector<json> cases = cases_of("align");
  ASSERT_GT(cases.size(), 20u);
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<int64_t> tokens = int64_values(role(c, "tokens"));
    const std::vector<int64_t> spans = int64_values(role(c, "spans"));
    const auto got = ctc_forced_align(role(c, "log_probs"), tokens);
    ASSERT_EQ(got.size() * 2, spans.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].token, tokens[k]);
      EXPECT_EQ(got[k].start_frame, spans[2 * k]) << "token " << k;
      EXPECT_EQ(got[k].end_frame, spans[2 * k + 1]) << "token " << k;
    }
  }
  // Refusals: a blank or out-of-range token, too few frames for a repeat.
  const Tensor three = Tensor::full({3, 4}, -1.0f);
  const std::vector<int64_t> blank = {0}, big = {4}, repeat = {2, 2, 2};
  EXPECT_THROW(ctc_forced_align(three, blank), Error);
  EXPECT_THROW(ctc_forced_align(three, big), Error);
  EXPECT_THROW(ctc_forced_align(three, repeat), Error);  // needs 5 frames
  EXPECT_TRUE(ctc_forced_align(three, {}).empty());
}

TEST(DecodeOracle, PaddingHelpersMatchWenet) {
  const std::vector<json> cases = cases_of("padding");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const SosEosTargets got =
        add_sos_eos(role(c, "ys_pad"), c.at("sos"), c.at("eos"), c.at("ignore_id"));
    EXPECT_TRUE(ids_equal(got.decoder_input, role(c, "ys_in")));
    EXPECT_TRUE(ids_equal(got.decoder_target, role(c, "ys_out")));
    EXPECT_TRUE(ids_equal(reverse_pad_list(role(c, "ys_pad"), role(c, "ys_lens"), -1),
                          role(c, "reversed")));
  }
}

TEST(DecodeOracle, AttentionRescoringMatchesWenet) {
  const std::vector<json> cases = cases_of("rescore");
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const json& ctc_case = case_named(c.at("ctc_case"));
    const std::vector<CtcHypothesis> nbest = expected_nbest(ctc_case);
    const int64_t eos = c.at("eos");
    AttentionRescoringOptions options;
    options.ctc_weight = c.at("ctc_weight");
    options.reverse_weight = c.at("reverse_weight");

    // The decoder stands in for a model: it checks the inputs it is handed
    // against WeNet's and answers with the oracle's log-probs.
    int calls = 0;
    const AttentionDecoderFn decoder = [&](const AttentionDecoderInputs& inputs) {
      ++calls;
      EXPECT_TRUE(ids_equal(inputs.hyps, role(c, "hyps_in")));
      EXPECT_TRUE(ids_equal(inputs.hyps_lens, role(c, "hyps_lens")));
      EXPECT_TRUE(ids_equal(inputs.reversed_hyps, role(c, "r_hyps")));
      return AttentionDecoderOutputs{role(c, "left"), role(c, "right")};
    };
    const SpecialTokens special{0, eos, eos, -1};
    const AttentionRescoringResult got = attention_rescoring(nbest, decoder, special, options);
    EXPECT_EQ(calls, 1);

    const size_t best = c.at("best_index").get<size_t>();
    EXPECT_EQ(got.best_index, best);
    EXPECT_EQ(got.tokens, nbest[best].tokens);
    const double best_score = doubles_from_bits(role(c, "best_score_bits")).front();
    EXPECT_EQ(std::bit_cast<uint64_t>(got.score), std::bit_cast<uint64_t>(best_score))
        << got.score << " vs " << best_score;
    const Tensor totals = role(c, "totals").contiguous();
    ASSERT_EQ(got.hypothesis_scores.size(), static_cast<size_t>(totals.numel()));
    for (size_t i = 0; i < got.hypothesis_scores.size(); ++i) {
      const auto actual = static_cast<float>(got.hypothesis_scores[i]);
      const float expected = totals.data<float>()[i];
      EXPECT_EQ(std::bit_cast<uint32_t>(actual), std::bit_cast<uint32_t>(expected))
          << "hypothesis " << i << ": " << actual << " vs " << expected;
    }
  }
}

}  // namespace
}  // namespace oasr::decode
