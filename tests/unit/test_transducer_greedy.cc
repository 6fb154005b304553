// decode/transducer_greedy.h against scripted joints whose hypotheses follow
// by hand from NeMo's label-looping rules: blank moves a row on (TDT: by its
// duration, at least one frame), a label keeps the row on its frame (TDT:
// moves it by the duration), max_symbols labels on one frame move it on, a
// row with no frames gives nothing, and only rows that emitted step their
// predictor. (The NeMo oracle, tests/oracle/test_fastconformer_transducer.cc,
// checks real models.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "decode/transducer_greedy.h"

namespace oasr {
namespace {

constexpr int64_t kBlank = 4;  // tokens 0..3, blank 4

// The joint's choice given the row, its frame and how many labels it has
// emitted (its predictor "state"): a token (or blank) and a duration index.
struct Choice {
  int64_t label;
  int64_t duration_index = 0;
};
using Script = std::function<Choice(int64_t row, int64_t frame, int64_t emitted)>;

class ScriptedSteps final : public decode::TransducerSteps {
 public:
  ScriptedSteps(Script script, int64_t durations)
      : script_(std::move(script)), durations_(durations) {}

  Tensor joint(std::span<const int64_t> rows, std::span<const int64_t> frames) override {
    const int64_t classes = kBlank + 1 + durations_;
    Tensor out = Tensor::zeros({static_cast<int64_t>(rows.size()), classes}, DType::kF32);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Choice c = script_(rows[i], frames[i], emitted_[rows[i]]);
      float* v = out.data<float>() + static_cast<int64_t>(i) * classes;
      v[c.label] = 1.0f;
      if (durations_ > 0) v[kBlank + 1 + c.duration_index] = 1.0f;
    }
    return out;
  }
  void predict(std::span<const int64_t> rows, std::span<const int64_t> labels) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_NE(labels[i], kBlank) << "the predictor was stepped with blank";
      ++emitted_[rows[i]];
      predicted_rows.push_back(rows[i]);
    }
  }
  std::vector<int64_t> predicted_rows;

 private:
  Script script_;
  int64_t durations_;
  std::map<int64_t, int64_t> emitted_;
};

TEST(TransducerGreedy, RnntFollowsLabelLoopingRules) {
  // Row 0: no frames. Row 1: a label on frame 0, blanks, a label on frame 2.
  // Row 2: never blank, so max_symbols (3) labels per frame.
  ScriptedSteps steps(
      [](int64_t row, int64_t frame, int64_t emitted) -> Choice {
        if (row == 1) {
          if (frame == 0 && emitted == 0) return {1};
          if (frame == 2 && emitted == 1) return {2};
          return {kBlank};
        }
        return {3};
      },
      0);
  decode::TransducerGreedyOptions options;
  options.blank_id = kBlank;
  options.max_symbols = 3;
  const std::vector<int64_t> frames{0, 3, 2};
  const auto hyps = decode::transducer_greedy_search(steps, frames, options);
  ASSERT_EQ(hyps.size(), 3u);
  EXPECT_TRUE(hyps[0].tokens.empty());
  EXPECT_EQ(hyps[1].tokens, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(hyps[1].frames, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(hyps[2].tokens, (std::vector<int64_t>{3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(hyps[2].frames, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(hyps[1].durations.empty());
  // Row 0 never stepped the predictor; 2 + 6 steps in all.
  EXPECT_EQ(std::count(steps.predicted_rows.begin(), steps.predicted_rows.end(), 0), 0);
  EXPECT_EQ(steps.predicted_rows.size(), 8u);
}

TEST(TransducerGreedy, TdtDurationsMoveTheRow) {
  // Durations {0, 2}. Frame 0: label 1 lasting 2 -> frame 2; blank with
  // duration 0 still moves one frame -> 3; label 2 lasting 0 twice, then
  // max_symbols (2) moves on -> 4; blank lasting 2 ends the row.
  ScriptedSteps steps(
      [](int64_t, int64_t frame, int64_t emitted) -> Choice {
        if (frame == 0) return {1, 1};
        if (frame == 2) return {kBlank, 0};
        if (frame == 3) return {2, 0};
        EXPECT_EQ(emitted, 3);
        return {kBlank, 1};
      },
      2);
  decode::TransducerGreedyOptions options;
  options.blank_id = kBlank;
  options.durations = {0, 2};
  options.max_symbols = 2;
  const std::vector<int64_t> frames{5};
  const auto hyps = decode::transducer_greedy_search(steps, frames, options);
  EXPECT_EQ(hyps[0].tokens, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(hyps[0].frames, (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ(hyps[0].durations, (std::vector<int64_t>{2, 0, 0}));
  // A label whose duration runs past the end still counts.
  ScriptedSteps last([](int64_t, int64_t, int64_t) -> Choice { return {0, 1}; }, 2);
  const auto tail = decode::transducer_greedy_search(last, frames, options);
  EXPECT_EQ(tail[0].frames, (std::vector<int64_t>{0, 2, 4}));
}

TEST(TransducerGreedy, ScoreIsTheTokensLogSoftmax) {
  // One label on a joint of 4 tokens + blank with logits (1, 0, 0, 0, 0):
  // log(e / (e + 4)).
  ScriptedSteps steps(
      [](int64_t, int64_t, int64_t emitted) -> Choice { return {emitted == 0 ? 0 : kBlank}; }, 0);
  decode::TransducerGreedyOptions options;
  options.blank_id = kBlank;
  const std::vector<int64_t> frames{1};
  const auto hyps = decode::transducer_greedy_search(steps, frames, options);
  ASSERT_EQ(hyps[0].tokens, (std::vector<int64_t>{0}));
  EXPECT_NEAR(hyps[0].score, 1.0 - std::log(std::exp(1.0) + 4.0), 1e-12);
}

}  // namespace
}  // namespace oasr
