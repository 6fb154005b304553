// Response formats; see response_formats.h.
#include "server/response_formats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace oasr::server {

ResponseFormat parse_response_format(const std::string& value) {
  if (value.empty() || value == "json") return ResponseFormat::kJson;
  if (value == "text") return ResponseFormat::kText;
  if (value == "verbose_json") return ResponseFormat::kVerboseJson;
  if (value == "srt") return ResponseFormat::kSrt;
  if (value == "vtt") return ResponseFormat::kVtt;
  OASR_THROW(kInvalidArgument, "field 'response_format': '", value,
             "' is not one of json, text, verbose_json, srt, vtt");
}

namespace {

std::string strip_spaces(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

}  // namespace

std::string subtitle_time(double seconds, char millisecond_separator) {
  const auto total_ms = static_cast<long long>(std::llround(std::max(seconds, 0.0) * 1000.0));
  char text[32];
  std::snprintf(text, sizeof(text), "%02lld:%02lld:%02lld%c%03lld", total_ms / 3600000,
                total_ms / 60000 % 60, total_ms / 1000 % 60, millisecond_separator,
                total_ms % 1000);
  return text;
}

namespace {

// The transcript's segments: the model's own, else one spanning the aligned
// tokens (or the whole audio). Times are clamped to the audio.
std::vector<engine::Segment> segments_of(const engine::Transcript& transcript,
                                         double duration_seconds) {
  std::vector<engine::Segment> out = transcript.segments;
  if (out.empty()) {
    const auto& times = transcript.token_times;
    out.push_back({times.empty() ? 0.0 : times.front().start,
                   times.empty() ? duration_seconds : times.back().end, transcript.text,
                   transcript.tokens});
  }
  for (engine::Segment& s : out) {
    s.start = std::min(s.start, duration_seconds);
    s.end = std::min(s.end, duration_seconds);
  }
  return out;
}

std::string subtitles(const std::vector<engine::Segment>& segments, bool srt) {
  std::string out = srt ? "" : "WEBVTT\n\n";
  const char separator = srt ? ',' : '.';
  for (size_t i = 0; i < segments.size(); ++i) {
    if (srt) out += std::to_string(i + 1) + "\n";
    out += subtitle_time(segments[i].start, separator) + " --> " +
           subtitle_time(segments[i].end, separator) + "\n" + strip_spaces(segments[i].text) +
           "\n\n";
  }
  return out;
}

}  // namespace

Rendered render_transcript(ResponseFormat format, const engine::Transcript& transcript,
                           double duration_seconds) {
  const std::vector<engine::Segment> segments = segments_of(transcript, duration_seconds);
  switch (format) {
    case ResponseFormat::kJson:
      return {"application/json", nlohmann::json{{"text", transcript.text}}.dump()};
    case ResponseFormat::kText:
      return {"text/plain; charset=utf-8", transcript.text + "\n"};
    case ResponseFormat::kVerboseJson: {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (size_t i = 0; i < segments.size(); ++i) {
        nlohmann::ordered_json segment = {{"id", i},
                                          {"seek", 0},
                                          {"start", segments[i].start},
                                          {"end", segments[i].end},
                                          {"text", segments[i].text},
                                          {"tokens", segments[i].tokens},
                                          {"temperature", 0.0}};
        list.push_back(std::move(segment));
      }
      nlohmann::ordered_json body = {{"task", "transcribe"},
                                     {"duration", duration_seconds},
                                     {"text", transcript.text},
                                     {"segments", list}};
      return {"application/json", body.dump()};
    }
    case ResponseFormat::kSrt:
      return {"text/plain; charset=utf-8", subtitles(segments, /*srt=*/true)};
    case ResponseFormat::kVtt:
      return {"text/vtt; charset=utf-8", subtitles(segments, /*srt=*/false)};
  }
  OASR_THROW(kInternal, "unknown response format");
}

}  // namespace oasr::server
