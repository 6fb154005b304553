// src/decode/whisper_search against gen_whisper_search.py: Hugging Face
// transformers' generate() (greedy, and beam search with BeamSearchScorer,
// length penalties, the three early_stopping modes, max_length) and its
// Whisper suppress processors (and its timestamp processor in the ts_ cases), driving a table
// language model whose logits depend on the utterance, the position and the last token. The C++
// search replays the same tables through a WhisperDecoderStep.
//
// Tolerances: token ids and whether a hypothesis ended at eos must be equal.
// Scores: HF returns beam sequences_scores in float32, and the greedy sums
// add float32 log-softmax values, each of which may differ from torch's in
// the last bit; both are compared with 1e-6 relative (a few float32 ulps),
// far below the score gaps that decide between hypotheses (a near tie that
// broke the other way would show up as different tokens).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/whisper_search.h"
#include "ops/top_candidates.h"
#include "support/test_support.h"

namespace oasr::decode {
namespace {

using nlohmann::json;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

Tensor role(const json& c, const std::string& name) {
  return oracle().file.get(c.at("name").get<std::string>() + "/" + name);
}

// Replays table[u, len - prompt_len, last_token, :] for every row; row r is
// beam r % beams of utterance first_utterance + r / beams.
class TableStep final : public WhisperDecoderStep {
 public:
  TableStep(Tensor table, int64_t prompt_len, int64_t beams, int64_t first_utterance,
            int64_t utterances, Device device = Device::cpu())
      : table_(std::move(table)), prompt_len_(prompt_len), beams_(beams), device_(device) {
    for (int64_t u = 0; u < utterances; ++u) {
      for (int64_t k = 0; k < beams; ++k) rows_.push_back(Row{first_utterance + u, 0, -1});
    }
  }

  Tensor step(const Tensor& tokens) override {
    ++calls_;
    EXPECT_EQ(tokens.size(0), static_cast<int64_t>(rows_.size()));
    const int64_t n = tokens.size(1);
    const int64_t max_new = table_.size(1);
    const int64_t vocab = table_.size(3);
    Tensor out = Tensor::empty({tokens.size(0), vocab}, DType::kF32);
    for (size_t r = 0; r < rows_.size(); ++r) {
      Row& row = rows_[r];
      row.length += n;
      row.last = tokens.data<int64_t>()[r * n + n - 1];
      const int64_t pos = row.length - prompt_len_;
      OASR_CHECK(pos >= 0 && pos < max_new && row.last >= 0 && row.last < vocab, kInternal,
                 "table step past the table: pos ", pos, " token ", row.last);
      const float* src =
          table_.data<float>() + ((row.utterance * max_new + pos) * vocab + row.last) * vocab;
      std::copy(src, src + vocab, out.data<float>() + r * vocab);
    }
    return out.to(device_);
  }

  void reorder(std::span<const int64_t> source_rows) override {
    ASSERT_EQ(source_rows.size(), rows_.size());
    std::vector<Row> next;
    for (const int64_t s : source_rows) {
      // Beams never move between utterances.
      EXPECT_EQ(s / beams_, static_cast<int64_t>(next.size()) / beams_);
      next.push_back(rows_.at(s));
    }
    rows_ = std::move(next);
  }

  int64_t calls() const { return calls_; }

 private:
  struct Row {
    int64_t utterance;
    int64_t length;
    int64_t last;
  };
  Tensor table_;
  int64_t prompt_len_;
  int64_t beams_;
  Device device_;
  std::vector<Row> rows_;
  int64_t calls_ = 0;
};

WhisperSearchOptions options_of(const json& c) {
  WhisperSearchOptions o;
  o.prompt = c.at("prompt").get<std::vector<int64_t>>();
  o.eos_token_id = c.at("eos_token_id");
  o.pad_token_id = c.at("pad_token_id");
  o.suppress_tokens = c.at("suppress_tokens").get<std::vector<int64_t>>();
  o.begin_suppress_tokens = c.at("begin_suppress_tokens").get<std::vector<int64_t>>();
  o.max_length = c.at("max_length");
  o.num_beams = c.at("num_beams");
  o.length_penalty = c.at("length_penalty");
  const std::string early = c.at("early_stopping");
  o.early_stopping = early == "true"    ? BeamEarlyStopping::kWhenFull
                     : early == "never" ? BeamEarlyStopping::kNever
                                        : BeamEarlyStopping::kHeuristic;
  if (c.contains("timestamps")) {
    const json& ts = c.at("timestamps");
    WhisperTimestampRules rules;
    rules.no_timestamps_token_id = ts.at("no_timestamps_token_id");
    rules.timestamp_begin = ts.at("timestamp_begin");
    if (!ts.at("max_initial_timestamp_index").is_null()) {
      rules.max_initial_timestamp_index = ts.at("max_initial_timestamp_index").get<int64_t>();
    }
    o.timestamps = rules;
  }
  return o;
}

void expect_matches_oracle(const json& c, int64_t u, const WhisperHypothesis& got,
                           double score_tolerance = 1e-6) {
  const std::string where = c.at("name").get<std::string>() + " utterance " + std::to_string(u);
  const Tensor tokens = role(c, "tokens");
  const int64_t length = role(c, "lengths").data<int64_t>()[u];
  const std::vector<int64_t> expected(tokens.data<int64_t>() + u * tokens.size(1),
                                      tokens.data<int64_t>() + u * tokens.size(1) + length);
  EXPECT_EQ(got.tokens, expected) << where;
  EXPECT_EQ(got.reached_eos, role(c, "reached_eos").data<int64_t>()[u] != 0) << where;
  const double score = std::bit_cast<double>(role(c, "score_bits").data<int64_t>()[u]);
  EXPECT_NEAR(got.score, score, score_tolerance * std::max(1.0, std::abs(score))) << where;
}

TEST(WhisperSearch, BatchMatchesHuggingFaceGenerate) {
  ASSERT_FALSE(oracle().cases.empty());
  for (const json& c : oracle().cases) {
    const WhisperSearchOptions options = options_of(c);
    const Tensor table = role(c, "table");
    const int64_t utterances = table.size(0);
    TableStep step(table, static_cast<int64_t>(options.prompt.size()), options.num_beams, 0,
                   utterances);
    const auto hyps = whisper_search(step, utterances, options);
    ASSERT_EQ(static_cast<int64_t>(hyps.size()), utterances);
    for (int64_t u = 0; u < utterances; ++u) expect_matches_oracle(c, u, hyps[u]);
    // The batch stops with its longest member, never past max_length.
    EXPECT_LE(step.calls(), options.max_length - static_cast<int64_t>(options.prompt.size()));
  }
}

TEST(WhisperSearch, EachUtteranceAloneMatchesToo) {
  for (const json& c : oracle().cases) {
    const WhisperSearchOptions options = options_of(c);
    const Tensor table = role(c, "table");
    for (int64_t u = 0; u < table.size(0); ++u) {
      TableStep step(table, static_cast<int64_t>(options.prompt.size()), options.num_beams, u, 1);
      const auto hyps = whisper_search(step, 1, options);
      ASSERT_EQ(hyps.size(), 1u);
      expect_matches_oracle(c, u, hyps[0]);
    }
  }
}

// The same cases with the table's logits on a CUDA device: the search ranks
// them there (ops/top_candidates.h) and must reach HF's hypotheses. Scores:
// the device sums log_softmax in float32, 1e-5 relative. The timestamp cases
// keep the host path (the whole rows cross) and are covered too.
TEST(WhisperSearch, DeviceReducedSearchMatchesHuggingFace) {
  OASR_SKIP_WITHOUT_CUDA();
  for (const json& c : oracle().cases) {
    const WhisperSearchOptions options = options_of(c);
    const Tensor table = role(c, "table");
    const int64_t utterances = table.size(0);
    TableStep step(table, static_cast<int64_t>(options.prompt.size()), options.num_beams, 0,
                   utterances, Device::cuda(0));
    const auto hyps = whisper_search(step, utterances, options);
    ASSERT_EQ(static_cast<int64_t>(hyps.size()), utterances);
    for (int64_t u = 0; u < utterances; ++u) expect_matches_oracle(c, u, hyps[u], 1e-5);
  }
}

Tensor random_logits(int64_t rows, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(static_cast<size_t>(rows * vocab));
  for (float& v : values) v = normal(rng);
  return Tensor::from_vector(values, {rows, vocab});
}

// The op's definition on a hand-made row: suppression, the tie rule, the
// log-probability of the unsuppressed row, offsets.
TEST(TopCandidates, CpuBodyFollowsTheDefinition) {
  const Tensor logits = Tensor::from_vector(std::vector<float>{1, 3, 3, 2, 0, 3}, {1, 6});
  const Tensor suppressed = Tensor::from_vector(std::vector<uint8_t>{0, 0, 0, 0, 0, 1}, {6});
  const ops::TopCandidates by_logit =
      ops::top_candidates(logits, suppressed, Tensor(), 4, ops::CandidateRank::kByLogit);
  EXPECT_EQ(
      std::vector<int64_t>(by_logit.tokens.data<int64_t>(), by_logit.tokens.data<int64_t>() + 4),
      (std::vector<int64_t>{1, 2, 3, 0}));
  double total = 0.0;
  for (const float v : {1, 3, 3, 2, 0, 3}) total += std::exp(v - 3.0);
  const double log_p1 = -std::log(total);  // token 1: x = max
  EXPECT_NEAR(by_logit.log_probs.data<float>()[0], log_p1, 1e-6);
  EXPECT_FLOAT_EQ(by_logit.values.data<float>()[3], 1.0f);
  const Tensor offsets = Tensor::from_vector(std::vector<float>{-2.5f}, {1});
  const ops::TopCandidates by_log_prob =
      ops::top_candidates(logits, suppressed, offsets, 6, ops::CandidateRank::kByLogProb);
  EXPECT_NEAR(by_log_prob.values.data<float>()[0], log_p1 - 2.5, 1e-6);
  EXPECT_EQ(by_log_prob.tokens.data<int64_t>()[5], 5);  // suppressed: last, at -inf
  EXPECT_EQ(by_log_prob.values.data<float>()[5], -INFINITY);
}

// The CUDA body against the CPU body on Whisper-sized rows in every dtype:
// the same tokens in the same order, values and log-probabilities within
// float32 rounding of the sums.
TEST(TopCandidates, CudaBodyEqualsTheCpuBody) {
  OASR_SKIP_WITHOUT_CUDA();
  const int64_t rows = 13;
  const int64_t vocab = 51864;
  std::vector<uint8_t> mask(static_cast<size_t>(vocab), 0);
  for (int64_t id = 0; id < vocab; id += 517) mask[static_cast<size_t>(id)] = 1;
  const Tensor suppressed = Tensor::from_vector(mask, {vocab});
  std::vector<float> offset_values;
  for (int64_t r = 0; r < rows; ++r) offset_values.push_back(-0.75f * static_cast<float>(r));
  const Tensor offsets = Tensor::from_vector(offset_values, {rows});
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    // The reference reads the values the device holds.
    const Tensor on_device = random_logits(rows, vocab, 7).to(dtype).to(Device::cuda(0));
    const Tensor reference = on_device.to(Device::cpu()).to(DType::kF32);
    for (const auto rank : {ops::CandidateRank::kByLogit, ops::CandidateRank::kByLogProb}) {
      for (const int64_t k : {1, 10, 64}) {
        const bool offset = rank == ops::CandidateRank::kByLogProb;
        const ops::TopCandidates want =
            ops::top_candidates(reference, suppressed, offset ? offsets : Tensor(), k, rank);
        const ops::TopCandidates got =
            ops::top_candidates(on_device, suppressed.to(Device::cuda(0)),
                                offset ? offsets.to(Device::cuda(0)) : Tensor(), k, rank);
        const std::string where = std::string(dtype_name(dtype)) + " k " + std::to_string(k) +
                                  (offset ? " by log-prob" : " by logit");
        for (int64_t i = 0; i < rows * k; ++i) {
          ASSERT_EQ(got.tokens.data<int64_t>()[i], want.tokens.data<int64_t>()[i]) << where;
          EXPECT_NEAR(got.values.data<float>()[i], want.values.data<float>()[i], 2e-5) << where;
          EXPECT_NEAR(got.log_probs.data<float>()[i], want.log_probs.data<float>()[i], 2e-5)
              << where;
        }
      }
    }
  }
}

TEST(WhisperSearch, TimestampCasesAreThere) {
  int timestamp_cases = 0;
  for (const json& c : oracle().cases) timestamp_cases += c.contains("timestamps") ? 1 : 0;
  EXPECT_GE(timestamp_cases, 5);
}

// HF's WhisperTokenizer._compute_offsets on hand-made sequences (begin 100):
// pairs close segments, a trailing lone timestamp closes the last one, text
// after the last timestamp is dropped, a single timestamp gives none.
TEST(WhisperSearch, TimestampSegmentsFollowComputeOffsets) {
  const auto spans = [](std::vector<int64_t> tokens) {
    std::vector<std::vector<int64_t>> out;
    for (const TimestampSegment& s : timestamp_segments(tokens, 100)) {
      out.push_back({static_cast<int64_t>(s.first), static_cast<int64_t>(s.last), s.start_index,
                     s.end_index});
    }
    return out;
  };
  using V = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(spans({100, 5, 6, 110, 110, 7, 125}), (V{{0, 4, 0, 10}, {4, 7, 10, 25}}));
  EXPECT_EQ(spans({100, 5, 6, 110, 112, 7, 125, 8, 9}), (V{{0, 4, 0, 10}, {4, 7, 12, 25}}));
  EXPECT_EQ(spans({100, 5, 6}), V{});
  EXPECT_EQ(spans({5, 6}), V{});
  EXPECT_EQ(spans({100, 5, 6, 120}), (V{{0, 4, 0, 20}}));
  // A timestamp lower than the running maximum starts a later window's times.
  EXPECT_EQ(spans({100, 5, 130, 102, 6, 110}), (V{{0, 3, 0, 30}, {3, 6, 32, 40}}));
}

TEST(WhisperSearch, TorchArgmaxTakesTheFirstMaximumAndNaN) {
  EXPECT_EQ(torch_argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(torch_argmax(std::vector<float>{1, NAN, 3, NAN}), 1);
  const float inf = INFINITY;
  EXPECT_EQ(torch_argmax(std::vector<float>{-inf, -inf, -inf}), 0);
}

TEST(WhisperSearch, RefusesBadOptionsByName) {
  WhisperSearchOptions o;
  o.prompt = {5, 6};
  o.eos_token_id = 1;
  o.pad_token_id = 1;
  o.max_length = 2;
  const auto message = [](const WhisperSearchOptions& bad) {
    try {
      bad.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(o).find("max_length"), std::string::npos) << message(o);
  o.max_length = 10;
  EXPECT_EQ(message(o), "accepted");
  o.num_beams = 0;
  EXPECT_NE(message(o).find("num_beams"), std::string::npos);
  o.num_beams = 1;
  o.prompt.clear();
  EXPECT_NE(message(o).find("prompt"), std::string::npos);
}

}  // namespace
}  // namespace oasr::decode
