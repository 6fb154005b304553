// src/decode/whisper_search against gen_whisper_search.py: Hugging Face
// transformers' generate() (greedy, and beam search with BeamSearchScorer,
// length penalties, the three early_stopping modes, max_length) and its
// Whisper suppress processors, driving a table language model whose logits
// depend on the utterance, the position and the last token. The C++ search
// replays the same tables through a WhisperDecoderStep.
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
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/whisper_search.h"
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
            int64_t utterances)
      : table_(std::move(table)), prompt_len_(prompt_len), beams_(beams) {
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
    return out;
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
  return o;
}

void expect_matches_oracle(const json& c, int64_t u, const WhisperHypothesis& got) {
  const std::string where = c.at("name").get<std::string>() + " utterance " + std::to_string(u);
  const Tensor tokens = role(c, "tokens");
  const int64_t length = role(c, "lengths").data<int64_t>()[u];
  const std::vector<int64_t> expected(tokens.data<int64_t>() + u * tokens.size(1),
                                      tokens.data<int64_t>() + u * tokens.size(1) + length);
  EXPECT_EQ(got.tokens, expected) << where;
  EXPECT_EQ(got.reached_eos, role(c, "reached_eos").data<int64_t>()[u] != 0) << where;
  const double score = std::bit_cast<double>(role(c, "score_bits").data<int64_t>()[u]);
  EXPECT_NEAR(got.score, score, 1e-6 * std::max(1.0, std::abs(score))) << where;
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
