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

std::string subtitle_time(double seconds, char millisecond_separator) {
  const auto total_ms = static_cast<long long>(std::llround(std::max(seconds, 0.0) * 1000.0));
  char text[32];
  std::snprintf(text, sizeof(text), "%02lld:%02lld:%02lld%c%03lld", total_ms / 3600000,
                total_ms / 60000 % 60, total_ms / 1000 % 60, millisecond_separator,
                total_ms % 1000);
  return text;
}

Rendered render_transcript(ResponseFormat format, const engine::Transcript& transcript,
                           double duration_seconds) {
  // The segment spans the aligned tokens where the model aligns them.
  const auto& times = transcript.token_times;
  const double start = times.empty() ? 0.0 : std::min(times.front().start, duration_seconds);
  const double end =
      times.empty() ? duration_seconds : std::min(times.back().end, duration_seconds);
  switch (format) {
    case ResponseFormat::kJson:
      return {"application/json", nlohmann::json{{"text", transcript.text}}.dump()};
    case ResponseFormat::kText:
      return {"text/plain; charset=utf-8", transcript.text + "\n"};
    case ResponseFormat::kVerboseJson: {
      nlohmann::ordered_json segment = {{"id", 0},
                                        {"seek", 0},
                                        {"start", start},
                                        {"end", end},
                                        {"text", transcript.text},
                                        {"tokens", transcript.tokens},
                                        {"temperature", 0.0}};
      nlohmann::ordered_json body = {{"task", "transcribe"},
                                     {"duration", duration_seconds},
                                     {"text", transcript.text},
                                     {"segments", nlohmann::ordered_json::array({segment})}};
      return {"application/json", body.dump()};
    }
    case ResponseFormat::kSrt:
      return {"text/plain; charset=utf-8", "1\n" + subtitle_time(start, ',') + " --> " +
                                               subtitle_time(end, ',') + "\n" + transcript.text +
                                               "\n\n"};
    case ResponseFormat::kVtt:
      return {"text/vtt; charset=utf-8", "WEBVTT\n\n" + subtitle_time(start, '.') + " --> " +
                                             subtitle_time(end, '.') + "\n" + transcript.text +
                                             "\n\n"};
  }
  OASR_THROW(kInternal, "unknown response format");
}

}  // namespace oasr::server
