// decode/whisper_long_form against its references (gen_whisper_long_form.py):
// the segment split and seek advance of transformers' long-form loop
// (_retrieve_segment) on hand-made and random token sequences, openai-whisper's
// compression ratio (Python's zlib), and the fallback verdicts as
// openai-whisper's transcribe() states them; the search's sampler
// (decode/whisper_search.h) against softmax(logits / temperature).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "decode/whisper_long_form.h"
#include "decode/whisper_search.h"
#include "support/test_support.h"

namespace oasr::decode {
namespace {

using nlohmann::json;

const json& cases() {
  return testing::oracle_cases().cases;
}

TEST(WhisperLongForm, SegmentsAndSeekMatchHf) {
  const int64_t timestamp_begin = cases().at("timestamp_begin");
  int64_t compared = 0, doubled_ends = 0, moved_past_window = 0;
  for (const json& c : cases().at("segments")) {
    const auto tokens = c.at("tokens").get<std::vector<int64_t>>();
    const int64_t frames = c.at("window_frames");
    const WindowSeek got = seek_window_segments(tokens, timestamp_begin, frames);
    const json& want = c.at("segments");
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(got.advance_frames, c.at("advance").get<int64_t>());
    ASSERT_EQ(got.segments.size(), want.size());
    for (size_t s = 0; s < want.size(); ++s) {
      EXPECT_EQ(got.segments[s].first, want[s].at("first").get<size_t>());
      EXPECT_EQ(got.segments[s].last, want[s].at("last").get<size_t>());
      EXPECT_NEAR(got.segments[s].start, want[s].at("start").get<double>(), 1e-6);
      const double hf_end = want[s].at("end").get<double>();
      const bool no_pair = want.size() == 1 && got.advance_frames == frames;
      if (no_pair && std::fabs(hf_end - 2.0 * static_cast<double>(frames) / 100.0) < 1e-4 &&
          std::fabs(got.segments[s].end - hf_end) > 1e-6) {
        // HF's end without a pair or a closing timestamp is frames x 0.02 s;
        // ours the window's duration (declared).
        EXPECT_NEAR(got.segments[s].end, static_cast<double>(frames) / 100.0, 1e-9);
        ++doubled_ends;
      } else {
        EXPECT_NEAR(got.segments[s].end, hf_end, 1e-5);
      }
    }
    if (got.advance_frames > frames) ++moved_past_window;
    ++compared;
  }
  std::cout << compared << " token sequences: segments and seek equal HF's; " << doubled_ends
            << " ends are the window's where HF doubles them; " << moved_past_window
            << " advance past a short window (a timestamp beyond its audio), as HF\n";
  EXPECT_GT(doubled_ends, 0);
  EXPECT_GE(compared, 600);
}

TEST(WhisperLongForm, CompressionRatioMatchesZlib) {
  for (const json& c : cases().at("ratios")) {
    const std::string text = c.at("text");
    EXPECT_NEAR(whisper_compression_ratio(text), c.at("ratio").get<double>(), 1e-12) << text;
  }
}

TEST(WhisperLongForm, FallbackDefaultsAreOpenaiWhispers) {
  const WhisperFallback off = WhisperFallback::resolve({0.0}, {}, {}, {});
  EXPECT_FALSE(off.judges());
  const WhisperFallback on = WhisperFallback::resolve({0.0, 0.2, 0.4}, {}, {}, {});
  EXPECT_EQ(on.compression_ratio_threshold, 2.4);
  EXPECT_EQ(on.logprob_threshold, -1.0);
  EXPECT_EQ(on.no_speech_threshold, 0.6);
  const WhisperFallback given = WhisperFallback::resolve({0.0, 0.5}, 3.0, -2.0, 0.9);
  EXPECT_EQ(given.compression_ratio_threshold, 3.0);
  EXPECT_EQ(given.logprob_threshold, -2.0);
  EXPECT_EQ(given.no_speech_threshold, 0.9);
}

// openai-whisper transcribe(): needs_fallback on a compression ratio above
// its threshold or an average log-probability below its threshold, unless
// the window is silence (no-speech probability above its threshold and the
// log-probability below); skip when the no-speech probability is above its
// threshold unless the log-probability is above its threshold.
TEST(WhisperLongForm, VerdictsFollowOpenaiWhisper) {
  const WhisperFallback rules = WhisperFallback::resolve({0.0, 0.2}, {}, {}, {});
  struct Case {
    double ratio, logprob, no_speech;
    bool rejected, skip;
  };
  const Case table[] = {
      {1.2, -0.3, 0.01, false, false},  // fine
      {2.5, -0.3, 0.01, true, false},   // repetitive
      {1.2, -1.5, 0.01, true, false},   // unlikely
      {1.2, -1.5, 0.90, false, true},   // silence: kept, skipped
      {2.5, -1.5, 0.90, false, true},   // silence overrides repetition too
      {2.5, -0.3, 0.90, true, false},   // confident speech despite no-speech
      {1.2, -0.3, 0.90, false, false},  // confident: not skipped
      {1.2, -1.0, 0.90, false, true},   // logprob == threshold: not above, so skipped
  };
  for (const Case& c : table) {
    const FallbackVerdict v = judge_decode(rules, c.ratio, c.logprob, c.no_speech);
    EXPECT_EQ(v.rejected, c.rejected) << c.ratio << " " << c.logprob << " " << c.no_speech;
    EXPECT_EQ(v.skip, c.skip) << c.ratio << " " << c.logprob << " " << c.no_speech;
  }
  // Without thresholds nothing is judged.
  const FallbackVerdict none = judge_decode(WhisperFallback{}, 9.0, -9.0, 1.0);
  EXPECT_FALSE(none.rejected);
  EXPECT_FALSE(none.skip);
}

// A decoder whose every row, at every step, scores the tokens with the same
// logits: the search's sampler is then measured against softmax(logits / T).
class FixedLogitsStep final : public WhisperDecoderStep {
 public:
  explicit FixedLogitsStep(std::vector<float> logits) : logits_(std::move(logits)) {}
  Tensor step(const Tensor& tokens) override {
    const int64_t rows = tokens.size(0);
    std::vector<float> out;
    for (int64_t r = 0; r < rows; ++r) out.insert(out.end(), logits_.begin(), logits_.end());
    return Tensor::from_vector(out, {rows, static_cast<int64_t>(logits_.size())});
  }
  void reorder(std::span<const int64_t>) override {}

 private:
  std::vector<float> logits_;
};

WhisperSearchOptions sampling_options(double temperature, int64_t utterances, uint64_t first_seed) {
  WhisperSearchOptions o;
  o.prompt = {6};
  o.eos_token_id = 7;
  o.pad_token_id = 7;
  o.max_length = 4;  // the prompt and three sampled tokens
  o.temperature = temperature;
  o.filtered_log_probs = true;
  for (int64_t u = 0; u < utterances; ++u) o.sample_seeds.push_back(first_seed + u);
  return o;
}

// Token frequencies over 3 x 4000 draws against softmax(logits / T) (within
// 4.5 standard deviations each), filtered_log_prob against log_softmax(logits)
// of the drawn tokens, T = 0 taking the argmax, and each utterance's draws
// depending on its seed only (alone == in the batch).
TEST(WhisperSampling, DrawsFromSoftmaxOverTemperature) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f, 0.7f, -60.0f};
  const int64_t utterances = 4000;
  for (const double temperature : {0.6, 1.0, 1.7}) {
    FixedLogitsStep step(logits);
    const auto options = sampling_options(temperature, utterances, 1234);
    const std::vector<WhisperHypothesis> hyps = whisper_search(step, utterances, options);
    std::vector<double> counts(logits.size(), 0.0);
    double draws = 0.0;
    double log_z = 0.0;  // log-sum-exp at temperature 1
    for (const float l : logits) log_z += std::exp(static_cast<double>(l));
    log_z = std::log(log_z);
    for (const WhisperHypothesis& h : hyps) {
      ASSERT_EQ(h.tokens.size(), 3u);
      double expected_log_prob = 0.0;
      for (const int64_t t : h.tokens) {
        counts[static_cast<size_t>(t)] += 1.0;
        draws += 1.0;
        expected_log_prob += static_cast<double>(logits[static_cast<size_t>(t)]) - log_z;
      }
      EXPECT_NEAR(h.filtered_log_prob, expected_log_prob, 1e-5);  // from float32 log_softmax
    }
    double z = 0.0;
    for (const float l : logits) z += std::exp(static_cast<double>(l) / temperature);
    for (size_t v = 0; v < logits.size(); ++v) {
      const double p = std::exp(static_cast<double>(logits[v]) / temperature) / z;
      const double sigma = std::sqrt(draws * p * (1.0 - p));
      EXPECT_NEAR(counts[v], draws * p, 4.5 * sigma + 1.0)
          << "token " << v << " at temperature " << temperature;
    }
    // Utterance 17 alone, with its own seed, draws what it drew in the batch.
    FixedLogitsStep alone_step(logits);
    const auto alone = whisper_search(alone_step, 1, sampling_options(temperature, 1, 1234 + 17));
    EXPECT_EQ(alone[0].tokens, hyps[17].tokens);
  }
  FixedLogitsStep greedy_step(logits);
  const auto greedy = whisper_search(greedy_step, 2, sampling_options(0.0, 2, 1));
  EXPECT_EQ(greedy[0].tokens, (std::vector<int64_t>{3, 3, 3}));  // the argmax
}

// A suppressed token holding 47 % and then 70 % of the probability: never
// drawn, and the filtered log-probabilities are log_softmax over the others
// (both ways of summing the kept mass: 1 - removed and the kept directly).
TEST(WhisperSampling, SuppressedTokensLeaveTheDistribution) {
  for (const float suppressed_logit : {2.0f, 3.0f}) {
    std::vector<float> logits = {1.0f, 0.5f, -0.3f, suppressed_logit, 0.0f, -1.0f, 0.7f, -60.0f};
    FixedLogitsStep step(logits);
    auto options = sampling_options(1.0, 2000, 99);
    options.suppress_tokens = {3};
    const std::vector<WhisperHypothesis> hyps = whisper_search(step, 2000, options);
    double log_z = 0.0;  // over the kept tokens
    for (size_t v = 0; v < logits.size(); ++v) {
      if (v != 3) log_z += std::exp(static_cast<double>(logits[v]));
    }
    log_z = std::log(log_z);
    for (const WhisperHypothesis& h : hyps) {
      double expected = 0.0;
      for (const int64_t t : h.tokens) {
        ASSERT_NE(t, 3);
        expected += static_cast<double>(logits[static_cast<size_t>(t)]) - log_z;
      }
      EXPECT_NEAR(h.filtered_log_prob, expected, 1e-5) << suppressed_logit;
    }
  }
}

TEST(WhisperSampling, RefusesBeamsAndMissingSeeds) {
  FixedLogitsStep step({0.0f, 1.0f, 0.5f, 0.2f, 0.0f, 0.0f, 0.0f, 0.0f});
  auto options = sampling_options(0.5, 2, 1);
  options.sample_seeds.pop_back();
  EXPECT_THROW(whisper_search(step, 2, options), Error);
  options = sampling_options(0.5, 1, 1);
  options.num_beams = 2;
  EXPECT_THROW(options.validate(), Error);
}

TEST(WhisperLongForm, RefusesAnEmptyWindow) {
  const std::vector<int64_t> tokens = {1, 2};
  EXPECT_THROW(seek_window_segments(tokens, 50363, 0), Error);
}

}  // namespace
}  // namespace oasr::decode
