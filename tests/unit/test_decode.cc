// CTC searches and attention rescoring (src/decode) on small inputs whose
// answers follow from the definitions: CTC's collapse rule, the total
// probability of all alignments of a label sequence (brute force over every
// alignment), and the rescoring formula written out by hand. The tie-breaking
// against WeNet itself is covered by the oracle test (tests/oracle).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/attention_rescoring.h"
#include "decode/ctc_search.h"

namespace oasr::decode {
namespace {

constexpr float kNegInfF = -std::numeric_limits<float>::infinity();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void expect_error(const std::function<void()>& body, ErrorCode code, const char* statement,
                  const std::string& fragment = {}) {
  try {
    body();
    ADD_FAILURE() << statement << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << statement << ": " << e.what();
    if (!fragment.empty()) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << statement << ": message '" << e.what() << "' lacks '" << fragment << "'";
    }
  }
}

#define EXPECT_OASR_ERROR(statement, error_code, fragment) \
  expect_error([&] { (void)(statement); }, ErrorCode::error_code, #statement, fragment)

// log-probs [T, V] from per-frame probabilities (rows need not be normalised
// for the searches, but these are).
Tensor log_probs_from(const std::vector<std::vector<double>>& probs) {
  const auto frames = static_cast<int64_t>(probs.size());
  const int64_t vocab = frames == 0 ? 3 : static_cast<int64_t>(probs[0].size());
  std::vector<float> values;
  for (const auto& row : probs) {
    for (const double p : row) values.push_back(static_cast<float>(std::log(p)));
  }
  return Tensor::from_vector(values, {frames, vocab});
}

// A deterministic pseudo-random distribution per frame (no ties).
Tensor random_log_probs(int64_t frames, int64_t vocab, uint32_t seed) {
  std::vector<std::vector<double>> probs(static_cast<size_t>(frames));
  uint32_t state = seed;
  for (auto& row : probs) {
    double total = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      state = state * 1664525u + 1013904223u;
      row.push_back(0.05 + (state >> 8) / double(1u << 24));
      total += row.back();
    }
    for (double& p : row) p /= total;
  }
  return log_probs_from(probs);
}

// Every alignment of T frames over V labels, collapsed; the probability of a
// label sequence is the sum over its alignments (computed in double).
std::map<std::vector<int64_t>, double> brute_force_sequence_probs(const Tensor& log_probs) {
  const int64_t frames = log_probs.size(0), vocab = log_probs.size(1);
  std::map<std::vector<int64_t>, double> probs;
  std::vector<int64_t> alignment(static_cast<size_t>(frames), 0);
  while (true) {
    double p = 1;
    for (int64_t t = 0; t < frames; ++t) {
      p *= std::exp(static_cast<double>(log_probs.data<float>()[t * vocab + alignment[t]]));
    }
    probs[remove_duplicates_and_blank(alignment)] += p;
    int64_t t = 0;
    while (t < frames && ++alignment[t] == vocab) alignment[t++] = 0;
    if (t == frames) break;
  }
  return probs;
}

// Without pruning, the search must list every label sequence that some
// alignment produces, scored log(its probability), best first. It may also
// list prefixes no alignment reaches (e.g. "a a" from two frames, which needs
// a blank between): those must score -inf.
void expect_exact_scores(const std::vector<CtcHypothesis>& nbest,
                         const std::map<std::vector<int64_t>, double>& exact) {
  size_t reachable = 0;
  for (size_t i = 0; i < nbest.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(nbest[i - 1].score, nbest[i].score) << "not sorted at " << i;
    }
    const auto it = exact.find(nbest[i].tokens);
    if (it == exact.end()) {
      EXPECT_EQ(nbest[i].score, kNegInf) << "hypothesis " << i << " is no CTC output";
      continue;
    }
    ++reachable;
    EXPECT_NEAR(nbest[i].score, std::log(it->second), 1e-12) << "hypothesis " << i;
  }
  EXPECT_EQ(reachable, exact.size()) << "some label sequences are missing";
}

// ---- building blocks ----------------------------------------------------------

TEST(DecodeLogAdd, AddsProbabilitiesInLogSpace) {
  EXPECT_NEAR(log_add(std::log(0.2), std::log(0.3)), std::log(0.5), 1e-15);
  EXPECT_EQ(log_add(std::log(0.2), std::log(0.3)), log_add(std::log(0.3), std::log(0.2)));
  EXPECT_EQ(log_add(-1.5, kNegInf), -1.5);
  EXPECT_EQ(log_add(kNegInf, -1.5), -1.5);
  EXPECT_EQ(log_add(kNegInf, kNegInf), kNegInf);
  EXPECT_NEAR(log_add(0.0, 0.0), std::log(2.0), 1e-15);
  // No overflow far from zero: the shift by the maximum keeps exp in range.
  EXPECT_NEAR(log_add(-1000.0, -1000.0), -1000.0 + std::log(2.0), 1e-12);
}

TEST(DecodeCollapse, DropsRepeatsThenBlanks) {
  const std::vector<int64_t> frames{0, 1, 1, 0, 1, 2, 2, 0, 0, 3};
  EXPECT_EQ(remove_duplicates_and_blank(frames), (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(remove_duplicates_and_blank(std::vector<int64_t>{}), std::vector<int64_t>{});
  EXPECT_EQ(remove_duplicates_and_blank(std::vector<int64_t>{0, 0, 0}), std::vector<int64_t>{});
  // Another blank id: 0 is then an ordinary label.
  EXPECT_EQ(remove_duplicates_and_blank(std::vector<int64_t>{0, 0, 5, 0, 5}, 5),
            (std::vector<int64_t>{0, 0}));
}

TEST(DecodeTopk, DistinctValuesComeOutLargestFirst) {
  const std::vector<float> row{0.5f, -1.0f, 3.0f, 2.0f, kNegInfF, 2.5f};
  EXPECT_EQ(torch_cpu_topk(row, 3), (std::vector<int64_t>{2, 5, 3}));
  EXPECT_EQ(torch_cpu_topk(row, 6), (std::vector<int64_t>{2, 5, 3, 0, 1, 4}));
  // The partial_sort path (64 * k <= n) picks the same maximum.
  std::vector<float> long_row(200, -5.0f);
  long_row[137] = -0.25f;
  long_row[12] = -0.5f;
  EXPECT_EQ(torch_cpu_topk(long_row, 2), (std::vector<int64_t>{137, 12}));
}

TEST(DecodeTopk, NanRanksFirstAsInTorch) {
  const std::vector<float> row{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  EXPECT_EQ(torch_cpu_topk(row, 2), (std::vector<int64_t>{1, 2}));
}

TEST(DecodeTopk, RefusesKOutsideTheRow) {
  const std::vector<float> row{1.0f, 2.0f};
  EXPECT_OASR_ERROR(torch_cpu_topk(row, 0), kInvalidArgument, "k = 0");
  EXPECT_OASR_ERROR(torch_cpu_topk(row, 3), kInvalidArgument, "k = 3");
}

// ---- greedy search --------------------------------------------------------------

TEST(DecodeGreedy, CollapsesTheFrameArgmaxes) {
  // Frame winners 1 1 0 1 2 2 -> "1 1 2".
  const Tensor lp = log_probs_from({{0.1, 0.8, 0.1},
                                    {0.2, 0.7, 0.1},
                                    {0.6, 0.3, 0.1},
                                    {0.1, 0.5, 0.4},
                                    {0.1, 0.1, 0.8},
                                    {0.3, 0.1, 0.6}});
  EXPECT_EQ(ctc_greedy_search(lp), (std::vector<int64_t>{1, 1, 2}));
}

TEST(DecodeGreedy, EmissionsCarryTheFrameEachRunStartsOn) {
  // Frame winners 2 2 0 1 1 0 0 1 -> 2 at frame 0, 1 at frame 3, 1 again at
  // frame 7 (a blank separates the repeat).
  const Tensor lp = log_probs_from({{0.1, 0.1, 0.8},
                                    {0.2, 0.1, 0.7},
                                    {0.6, 0.3, 0.1},
                                    {0.1, 0.5, 0.4},
                                    {0.1, 0.8, 0.1},
                                    {0.9, 0.05, 0.05},
                                    {0.7, 0.2, 0.1},
                                    {0.2, 0.7, 0.1}});
  const std::vector<CtcEmission> emitted = ctc_greedy_emissions(lp);
  ASSERT_EQ(emitted.size(), 3u);
  const std::vector<std::pair<int64_t, int64_t>> expected{{2, 0}, {1, 3}, {1, 7}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(emitted[i].token, expected[i].first) << i;
    EXPECT_EQ(emitted[i].frame, expected[i].second) << i;
  }
  EXPECT_TRUE(ctc_greedy_emissions(Tensor::empty({0, 3}, DType::kF32)).empty());
}

TEST(DecodeGreedy, EmptyInputAndAllBlankGiveNothing) {
  EXPECT_EQ(ctc_greedy_search(Tensor::empty({0, 4}, DType::kF32)), std::vector<int64_t>{});
  const Tensor blanks = log_probs_from({{0.9, 0.05, 0.05}, {0.5, 0.25, 0.25}});
  EXPECT_EQ(ctc_greedy_search(blanks), std::vector<int64_t>{});
}

TEST(DecodeGreedy, BatchHonoursLengths) {
  // Utterance 0 uses both frames (1 then 2), utterance 1 only its first
  // (2); the second frame of utterance 1 would add a 1 if it were read.
  const Tensor lp = log_probs_from({{0.1, 0.8, 0.1},
                                    {0.1, 0.1, 0.8},
                                    {0.1, 0.1, 0.8},
                                    {0.1, 0.8, 0.1},
                                    {0.1, 0.8, 0.1},
                                    {0.1, 0.8, 0.1}})
                        .view({3, 2, 3});
  const auto lengths = Tensor::from_vector<int64_t>({2, 1, 0}, {3});
  EXPECT_EQ(ctc_greedy_search(lp, lengths), (std::vector<std::vector<int64_t>>{{1, 2}, {2}, {}}));
}

TEST(DecodeGreedy, RefusesMalformedInput) {
  const Tensor lp = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_OASR_ERROR(ctc_greedy_search(lp.to(DType::kF16)), kInvalidArgument, "float32");
  EXPECT_OASR_ERROR(ctc_greedy_search(lp.view({1, 2, 3})), kInvalidArgument, "[T, V]");
  EXPECT_OASR_ERROR(ctc_greedy_search(Tensor::zeros({2, 0}, DType::kF32)), kInvalidArgument,
                    "vocabulary");
  const Tensor batch = lp.view({1, 2, 3});
  EXPECT_OASR_ERROR(ctc_greedy_search(batch, Tensor::from_vector<int64_t>({3}, {1})),
                    kInvalidArgument, "lengths[0] = 3");
  EXPECT_OASR_ERROR(ctc_greedy_search(batch, Tensor::from_vector<int64_t>({1, 1}, {2})),
                    kInvalidArgument, "lengths must be [1]");
  EXPECT_OASR_ERROR(ctc_greedy_search(batch, Tensor::from_vector<float>({1.0f}, {1})),
                    kInvalidArgument, "int32 or int64");
}

// ---- prefix beam search --------------------------------------------------------

TEST(DecodePrefixBeam, WithoutPruningScoresAreExactSequenceProbabilities) {
  // beam_size 100 > V: every label is tried each frame and no prefix is
  // pruned (at most 1 + 3 + 9 + 27 + 81 exist), so each score must be the
  // log of the total probability of the alignments of its label sequence.
  const Tensor lp = random_log_probs(4, 3, 7);
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 100;
  const std::vector<CtcHypothesis> nbest = ctc_prefix_beam_search(lp, options);
  ASSERT_LT(nbest.size(), 100u) << "the beam pruned something; the test needs a larger one";
  expect_exact_scores(nbest, brute_force_sequence_probs(lp));
  double total = kNegInf;
  for (const CtcHypothesis& hyp : nbest) total = log_add(total, hyp.score);
  // float32 inputs normalised to ~1e-7: the probabilities of all sequences
  // add up to one.
  EXPECT_NEAR(total, 0.0, 1e-6);
}

TEST(DecodePrefixBeam, PrunedBeamKeepsTheBestPrefixesOfShortInput) {
  // One frame: the hypotheses are the single labels and the empty prefix,
  // scored by their probabilities, best first, cut to the beam.
  const Tensor lp = log_probs_from({{0.1, 0.6, 0.05, 0.25}});
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 2;
  const auto nbest = ctc_prefix_beam_search(lp, options);
  ASSERT_EQ(nbest.size(), 2u);
  EXPECT_EQ(nbest[0].tokens, std::vector<int64_t>{1});
  EXPECT_NEAR(nbest[0].score, std::log(0.6), 1e-7);
  EXPECT_EQ(nbest[1].tokens, std::vector<int64_t>{3});
  EXPECT_NEAR(nbest[1].score, std::log(0.25), 1e-7);
}

TEST(DecodePrefixBeam, RepeatedLabelNeedsABlankBetween) {
  // Frames: "a", "a", blank, "a" with certainty -> "a a" (the blank separates).
  const Tensor lp = log_probs_from({{1e-9, 1.0 - 2e-9, 1e-9},
                                    {1e-9, 1.0 - 2e-9, 1e-9},
                                    {1.0 - 2e-9, 1e-9, 1e-9},
                                    {1e-9, 1.0 - 2e-9, 1e-9}});
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 3;
  const auto nbest = ctc_prefix_beam_search(lp, options);
  ASSERT_FALSE(nbest.empty());
  EXPECT_EQ(nbest[0].tokens, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(ctc_greedy_search(lp), (std::vector<int64_t>{1, 1}));
}

TEST(DecodePrefixBeam, NoFramesGiveTheEmptyHypothesis) {
  const auto nbest = ctc_prefix_beam_search(Tensor::empty({0, 5}, DType::kF32), {});
  ASSERT_EQ(nbest.size(), 1u);
  EXPECT_TRUE(nbest[0].tokens.empty());
  EXPECT_EQ(nbest[0].score, 0.0);
}

TEST(DecodePrefixBeam, AllBlankFramesGiveTheEmptyHypothesisFirst) {
  // Blank certain (log p = 0), every other label impossible (-inf).
  const Tensor lp =
      Tensor::from_vector<float>({0.0f, kNegInfF, kNegInfF, 0.0f, kNegInfF, kNegInfF}, {2, 3});
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 4;
  const auto nbest = ctc_prefix_beam_search(lp, options);
  ASSERT_FALSE(nbest.empty());
  EXPECT_TRUE(nbest[0].tokens.empty());
  EXPECT_EQ(nbest[0].score, 0.0);
  for (size_t i = 1; i < nbest.size(); ++i) EXPECT_EQ(nbest[i].score, kNegInf);
}

TEST(DecodePrefixBeam, BeamLargerThanVocabularyTriesEveryLabel) {
  // V = 2 (blank and "a"), beam 10: equal to the exact enumeration.
  const Tensor lp = random_log_probs(3, 2, 11);
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 10;
  const auto nbest = ctc_prefix_beam_search(lp, options);
  ASSERT_LT(nbest.size(), 10u);
  expect_exact_scores(nbest, brute_force_sequence_probs(lp));  // "", a, a a
}

TEST(DecodePrefixBeam, BatchMatchesSingleUtterances) {
  const Tensor a = random_log_probs(5, 4, 1), b = random_log_probs(5, 4, 2);
  Tensor batch = Tensor::empty({2, 5, 4}, DType::kF32);
  batch.select(0, 0).copy_(a);
  batch.select(0, 1).copy_(b);
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 3;
  const auto results =
      ctc_prefix_beam_search(batch, Tensor::from_vector<int32_t>({5, 3}, {2}), options);
  ASSERT_EQ(results.size(), 2u);
  const auto want_a = ctc_prefix_beam_search(a, options);
  const auto want_b = ctc_prefix_beam_search(b.slice(0, 0, 3), options);
  ASSERT_EQ(results[0].size(), want_a.size());
  ASSERT_EQ(results[1].size(), want_b.size());
  for (size_t i = 0; i < want_a.size(); ++i) {
    EXPECT_EQ(results[0][i].tokens, want_a[i].tokens);
    EXPECT_EQ(results[0][i].score, want_a[i].score);
  }
  for (size_t i = 0; i < want_b.size(); ++i) {
    EXPECT_EQ(results[1][i].tokens, want_b[i].tokens);
    EXPECT_EQ(results[1][i].score, want_b[i].score);
  }
}

TEST(DecodePrefixBeam, RefusesBrokenInput) {
  CtcPrefixBeamSearchOptions options;
  options.beam_size = 0;
  EXPECT_OASR_ERROR(ctc_prefix_beam_search(random_log_probs(2, 3, 1), options), kInvalidArgument,
                    "beam_size");
  options.beam_size = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_OASR_ERROR(
      ctc_prefix_beam_search(Tensor::from_vector<float>({-1.0f, nan, -2.0f}, {1, 3}), options),
      kInvalidArgument, "frame 0, token 1");
  EXPECT_OASR_ERROR(
      ctc_prefix_beam_search(
          Tensor::from_vector<float>(
              {-1.0f, -1.0f, -1.0f, -1.0f, std::numeric_limits<float>::infinity(), -1.0f}, {2, 3}),
          options),
      kInvalidArgument, "frame 1, token 1");
}

// ---- attention rescoring ---------------------------------------------------------

TEST(DecodeRescoring, DecoderInputsFollowWenetsLayout) {
  const std::vector<CtcHypothesis> nbest{{{1, 2, 3}, -1.0}, {{4}, -2.0}, {{}, -3.0}};
  const AttentionDecoderInputs inputs =
      make_attention_decoder_inputs(nbest, SpecialTokens::wenet_default(10));
  const auto values = [](const Tensor& t) {
    return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  };
  EXPECT_EQ(inputs.hyps.shape(), (Shape{3, 4}));
  EXPECT_EQ(values(inputs.hyps), (std::vector<int64_t>{9, 1, 2, 3, 9, 4, 9, 9, 9, 9, 9, 9}));
  EXPECT_EQ(values(inputs.hyps_lens), (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(values(inputs.reversed_hyps),
            (std::vector<int64_t>{9, 3, 2, 1, 9, 4, 9, 9, 9, 9, 9, 9}));
  EXPECT_OASR_ERROR(make_attention_decoder_inputs({}, SpecialTokens::wenet_default(10)),
                    kInvalidArgument, "empty");
}

TEST(DecodeRescoring, PaddingHelpers) {
  const Tensor ys = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6, -1, -1}, {2, 4});
  const SosEosTargets targets = add_sos_eos(ys, 10, 11, -1);
  const auto values = [](const Tensor& t) {
    return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  };
  EXPECT_EQ(targets.decoder_input.shape(), (Shape{2, 5}));
  EXPECT_EQ(values(targets.decoder_input),
            (std::vector<int64_t>{10, 1, 2, 3, 4, 10, 5, 6, 11, 11}));
  EXPECT_EQ(values(targets.decoder_target),
            (std::vector<int64_t>{1, 2, 3, 4, 11, 5, 6, 11, -1, -1}));
  const Tensor reversed = reverse_pad_list(ys, Tensor::from_vector<int64_t>({4, 2}, {2}), -1);
  EXPECT_EQ(values(reversed), (std::vector<int64_t>{4, 3, 2, 1, 6, 5, -1, -1}));
  EXPECT_OASR_ERROR(reverse_pad_list(ys, Tensor::from_vector<int64_t>({5, 2}, {2}), -1),
                    kInvalidArgument, "ys_lens[0] = 5");
}

// Decoder log-probs [N, L + 1, V] where position p of hypothesis i gives
// token v the value value(i, p, v).
Tensor decoder_output(int64_t hyps, int64_t positions, int64_t vocab,
                      const std::function<float(int64_t, int64_t, int64_t)>& value) {
  std::vector<float> values;
  for (int64_t i = 0; i < hyps; ++i) {
    for (int64_t p = 0; p < positions; ++p) {
      for (int64_t v = 0; v < vocab; ++v) values.push_back(value(i, p, v));
    }
  }
  return Tensor::from_vector(values, {hyps, positions, vocab});
}

TEST(DecodeRescoring, ScoresFollowTheFormula) {
  // V = 5, eos = 4; hypotheses "1 2" and "3".
  const std::vector<CtcHypothesis> nbest{{{1, 2}, -0.5}, {{3}, -4.0}};
  const auto value = [](int64_t i, int64_t p, int64_t v) {
    return -0.125f * static_cast<float>(1 + i + 2 * p + 3 * v);
  };
  const auto right_value = [](int64_t i, int64_t p, int64_t v) {
    return -0.0625f * static_cast<float>(2 + i + p * v);
  };
  AttentionDecoderOutputs outputs{decoder_output(2, 3, 5, value),
                                  decoder_output(2, 3, 5, right_value)};
  AttentionRescoringOptions options;
  options.ctc_weight = 0.5;
  options.reverse_weight = 0.25;
  const AttentionRescoringResult result = score_attention_rescoring(nbest, outputs, 4, options);

  // Written out: left sums token j at position j, then eos at position len;
  // right reads token j at position len - 1 - j.
  const float left0 = value(0, 0, 1) + value(0, 1, 2) + value(0, 2, 4);
  const float right0 = right_value(0, 1, 1) + right_value(0, 0, 2) + right_value(0, 2, 4);
  const float left1 = value(1, 0, 3) + value(1, 1, 4);
  const float right1 = right_value(1, 0, 3) + right_value(1, 1, 4);
  const float total0 = left0 * 0.75f + right0 * 0.25f + static_cast<float>(-0.5 * 0.5);
  const float total1 = left1 * 0.75f + right1 * 0.25f + static_cast<float>(-4.0 * 0.5);
  ASSERT_EQ(result.hypothesis_scores.size(), 2u);
  EXPECT_FLOAT_EQ(result.hypothesis_scores[0], total0);
  EXPECT_FLOAT_EQ(result.hypothesis_scores[1], total1);
  const size_t best = total1 > total0 ? 1 : 0;
  EXPECT_EQ(result.best_index, best);
  EXPECT_EQ(result.tokens, nbest[best].tokens);
  EXPECT_FLOAT_EQ(result.score, std::max(total0, total1));

  // reverse_weight 0 ignores the right decoder entirely (it may be absent).
  options.reverse_weight = 0;
  const auto left_only = score_attention_rescoring(nbest, {outputs.left, Tensor()}, 4, options);
  EXPECT_FLOAT_EQ(left_only.hypothesis_scores[0], left0 + static_cast<float>(-0.25));
  EXPECT_FLOAT_EQ(left_only.hypothesis_scores[1], left1 + static_cast<float>(-2.0));
}

TEST(DecodeRescoring, TiesGoToTheFirstHypothesis) {
  // Uniform decoder output and no CTC weight: equal-length hypotheses tie.
  const std::vector<CtcHypothesis> nbest{{{1, 2}, -1.0}, {{3}, -2.0}, {{2}, -3.0}};
  const AttentionDecoderOutputs outputs{
      decoder_output(3, 3, 5, [](int64_t, int64_t, int64_t) { return -1.0f; }), Tensor()};
  const auto result = score_attention_rescoring(nbest, outputs, 4, {});
  EXPECT_EQ(result.best_index, 1u);
  EXPECT_EQ(result.tokens, std::vector<int64_t>{3});
  EXPECT_EQ(result.score, -2.0);
}

TEST(DecodeRescoring, CallsTheDecoderOnceWithItsInputs) {
  const std::vector<CtcHypothesis> nbest{{{2}, -1.0}, {{1, 1}, -1.5}};
  const SpecialTokens special = SpecialTokens::wenet_default(4);
  int calls = 0;
  const auto decoder = [&](const AttentionDecoderInputs& inputs) {
    ++calls;
    EXPECT_EQ(inputs.hyps.shape(), (Shape{2, 3}));
    // Hypothesis 1 ("1 1") is favoured everywhere by its tokens.
    const Tensor left =
        decoder_output(2, 3, 4, [](int64_t, int64_t, int64_t v) { return v == 1 ? -0.1f : -3.0f; });
    return AttentionDecoderOutputs{left, Tensor()};
  };
  const auto result = attention_rescoring(nbest, decoder, special, {});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(result.best_index, 1u);
}

TEST(DecodeRescoring, RefusesMismatchedOutputs) {
  const std::vector<CtcHypothesis> nbest{{{1, 2}, -1.0}};
  const Tensor good = decoder_output(1, 3, 5, [](int64_t, int64_t, int64_t) { return -1.0f; });
  AttentionRescoringOptions reverse;
  reverse.reverse_weight = 0.3;
  EXPECT_OASR_ERROR(score_attention_rescoring(nbest, {good, Tensor()}, 4, reverse),
                    kInvalidArgument, "no right-to-left decoder output");
  EXPECT_OASR_ERROR(score_attention_rescoring(nbest, {good.slice(1, 0, 2), Tensor()}, 4, {}),
                    kInvalidArgument, "must be [1, 3, V]");
  EXPECT_OASR_ERROR(score_attention_rescoring(nbest, {good, Tensor()}, 5, {}), kInvalidArgument,
                    "eos id 5");
  EXPECT_OASR_ERROR(
      score_attention_rescoring({{{7}, -1.0}}, {good.slice(1, 0, 2), Tensor()}, 4, {}),
      kInvalidArgument, "token id 7");
  EXPECT_OASR_ERROR(score_attention_rescoring({}, {good, Tensor()}, 4, {}), kInvalidArgument,
                    "empty");
  AttentionRescoringOptions bad;
  bad.reverse_weight = 1.5;
  EXPECT_OASR_ERROR(score_attention_rescoring(nbest, {good, good}, 4, bad), kInvalidArgument,
                    "reverse_weight");
  bad.reverse_weight = 0;
  bad.ctc_weight = std::nan("");
  EXPECT_OASR_ERROR(score_attention_rescoring(nbest, {good, good}, 4, bad), kInvalidArgument,
                    "ctc_weight");
}

}  // namespace
}  // namespace oasr::decode
