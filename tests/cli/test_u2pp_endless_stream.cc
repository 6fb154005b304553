// [W3-S] A U2++ stream longer than the model's positional table (200 s for
// the bundled model) decodes with endpointing (--endpoint) at bounded memory,
// and each segment is exactly the chunked decoding of its own audio: the
// stream cycles the held-out real_test utterances with 1.5 s of silence
// between them, is fed in uneven pieces, and every segment the session
// reports is then transcribed on its own with endpointing off (the offline
// path's forward_chunk_by_chunk from a fresh state) and must give the same
// tokens. OASR_STREAM_SECONDS (default 900: 15 minutes, about 1 minute on two
// cores) sets the stream's length; the note's one-hour figures come from
// OASR_STREAM_SECONDS=3600. Memory: a session that kept its encoder frames
// and CTC posteriors (about 1.1 KiB per 40 ms frame for the bundled model)
// would grow by about 26 MiB over 15 minutes; the bound is 12 MiB.
#include <gtest/gtest.h>
#include <malloc.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "audio/audio_file.h"
#include "audio/silence.h"
#include "engine/asr_engine.h"

namespace oasr::testing {
namespace {

constexpr const char* kModel = OASR_SOURCE_DIR "/models/oasr-u2pp-char-8k";

std::filesystem::path eval_sets() {
  const char* dir = std::getenv("OASR_EVAL_SETS");
  return dir != nullptr ? std::filesystem::path(dir) : std::filesystem::path();
}

// Resident memory of this process in MiB (/proc/self/status VmRSS), after
// glibc has returned its free pages (malloc_trim), so the figure follows
// what is live rather than the allocator's high-water mark.
double resident_mib() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1.0;
}

engine::EngineConfig config(bool endpoint) {
  engine::EngineConfig c;
  c.ckpt_dir = kModel;
  c.decode.set("chunk_size", int64_t{16});
  if (endpoint) c.decode.set("endpoint", true);
  return c;
}

// real_test's utterances in manifest order, cycled, each followed by 1.5 s
// of silence, until the stream holds `seconds`.
std::vector<float> make_stream(const engine::ASREngine& engine, double seconds) {
  std::ifstream manifest(eval_sets() / "real_test.jsonl");
  std::vector<std::vector<float>> utterances;
  for (std::string line; std::getline(manifest, line);) {
    const auto row = nlohmann::json::parse(line);
    utterances.push_back(
        audio::load_audio(row.at("audio").get<std::string>(), engine.sample_rate()).samples);
  }
  EXPECT_FALSE(utterances.empty());
  const auto rate = static_cast<size_t>(engine.sample_rate());
  const auto wanted = static_cast<size_t>(seconds * static_cast<double>(rate));
  std::vector<float> stream;
  stream.reserve(wanted + rate * 12);
  for (size_t i = 0; stream.size() < wanted && !utterances.empty(); ++i) {
    const std::vector<float>& u = utterances[i % utterances.size()];
    stream.insert(stream.end(), u.begin(), u.end());
    stream.insert(stream.end(), rate * 3 / 2, 0.0f);
  }
  return stream;
}

TEST(U2ppEndlessStream, SegmentsAtEndpointsEqualTheirPiecesAndMemoryStaysFlat) {
  if (!std::filesystem::exists(eval_sets() / "real_test.jsonl")) {
    GTEST_SKIP() << "no eval sets at OASR_EVAL_SETS (tools/data/make_eval_sets.sh builds them)";
  }
  const char* seconds_env = std::getenv("OASR_STREAM_SECONDS");
  const double seconds = seconds_env != nullptr ? std::stod(seconds_env) : 900.0;
  const engine::ASREngine streaming(config(true));
  const engine::ASREngine pieces(config(false));
  // Longer than the model takes at once: only segmenting can serve it.
  ASSERT_GT(seconds, pieces.audio_limit().seconds);
  EXPECT_TRUE(std::isinf(streaming.audio_limit().seconds));
  const std::vector<float> stream = make_stream(streaming, seconds);
  const double rate = streaming.sample_rate();

  const auto session = streaming.start_session();
  std::vector<engine::Segment> reported;
  const size_t piece_sizes[] = {3217, 800, 12011, 1};
  double rss_after_first_minute = -1.0;
  std::string rss_by_minute;
  size_t at = 0;
  for (size_t piece = 0; at < stream.size(); ++piece) {
    const size_t n = std::min(piece_sizes[piece % std::size(piece_sizes)], stream.size() - at);
    const engine::Transcript partial =
        session->accept_waveform(std::span<const float>(stream.data() + at, n));
    at += n;
    reported.insert(reported.end(), partial.segments.begin(), partial.segments.end());
    const auto minute = static_cast<size_t>(60.0 * rate);
    if (at / minute != (at - n) / minute) {
      if (rss_after_first_minute < 0) rss_after_first_minute = resident_mib();
      rss_by_minute += " " + std::to_string(static_cast<int>(resident_mib()));
    }
  }
  const engine::Transcript whole = session->finish();
  const double rss_at_end = resident_mib();
  std::cout << "stream " << static_cast<double>(stream.size()) / rate << " s, "
            << whole.segments.size() << " segments; RSS after 60 s " << rss_after_first_minute
            << " MiB, at the end " << rss_at_end << " MiB; by minute:" << rss_by_minute << "\n";

  // Memory: the session holds one segment's state, whatever has streamed.
  EXPECT_LT(rss_at_end - rss_after_first_minute, 12.0)
      << "RSS grew from " << rss_after_first_minute << " to " << rss_at_end << " MiB";

  ASSERT_GT(whole.segments.size(), 2u);
  // accept_waveform() reported every segment but the last one as it ended.
  ASSERT_EQ(reported.size() + 1, whole.segments.size());
  std::string joined;
  std::vector<int64_t> all_tokens;
  double previous_start = -1.0;
  size_t silent_segments = 0;
  for (size_t i = 0; i < whole.segments.size(); ++i) {
    const engine::Segment& s = whole.segments[i];
    if (i < reported.size()) {
      EXPECT_EQ(reported[i].tokens, s.tokens) << "segment " << i;
      EXPECT_EQ(reported[i].start, s.start) << "segment " << i;
    }
    EXPECT_GT(s.start, previous_start);
    EXPECT_GT(s.end, s.start);
    // Rule 3 (20 s), checked after each chunk of 0.64 s.
    EXPECT_LE(s.end - s.start, 20.0 + 0.64 + 0.025) << "segment " << i;
    previous_start = s.start;
    all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
    if (!s.text.empty()) joined += (joined.empty() ? "" : " ") + s.text;

    // The segment is the chunked decoding of its own audio.
    const auto first = static_cast<size_t>(std::llround(s.start * rate));
    const auto last = std::min(stream.size(), static_cast<size_t>(std::llround(s.end * rate)));
    const std::vector<float> audio(stream.begin() + static_cast<std::ptrdiff_t>(first),
                                   stream.begin() + static_cast<std::ptrdiff_t>(last));
    const engine::Transcript alone =
        pieces.transcribe(std::vector<std::vector<float>>{audio}).front();
    if (audio::is_silent(audio)) {
      // transcribe() gives silence by the signal an empty transcript
      // (audio/silence.h); a stream's segments are not gated, so only the
      // rule is checked here (the stream's last segment is its trailing
      // digital silence).
      EXPECT_TRUE(alone.tokens.empty()) << "segment " << i;
      ++silent_segments;
      continue;
    }
    EXPECT_EQ(alone.tokens, s.tokens) << "segment " << i << " [" << s.start << ", " << s.end
                                      << ") s: '" << s.text << "' alone: '" << alone.text << "'";
    EXPECT_EQ(alone.text, s.text) << "segment " << i;
  }
  // Nearly every segment holds speech and was compared.
  EXPECT_LE(silent_segments, 2u);
  EXPECT_EQ(whole.tokens, all_tokens);
  EXPECT_EQ(whole.text, joined);
  EXPECT_FALSE(whole.text.empty());
}

// The same stream through transcribe() with endpointing is the session's
// result (transcribe() runs a session over the utterance).
TEST(U2ppEndlessStream, TranscribeWithEndpointIsTheSession) {
  if (!std::filesystem::exists(eval_sets() / "real_test.jsonl")) {
    GTEST_SKIP() << "no eval sets at OASR_EVAL_SETS (tools/data/make_eval_sets.sh builds them)";
  }
  const engine::ASREngine streaming(config(true));
  const std::vector<float> stream = make_stream(streaming, 45.0);
  const auto session = streaming.start_session();
  session->accept_waveform(stream);
  const engine::Transcript by_session = session->finish();
  const engine::Transcript by_transcribe =
      streaming.transcribe(std::vector<std::vector<float>>{stream}).front();
  EXPECT_EQ(by_transcribe.tokens, by_session.tokens);
  EXPECT_EQ(by_transcribe.text, by_session.text);
  ASSERT_EQ(by_transcribe.segments.size(), by_session.segments.size());
  EXPECT_GT(by_session.segments.size(), 1u);
}

}  // namespace
}  // namespace oasr::testing
