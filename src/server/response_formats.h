// The transcription API's response_format values, as OpenAI defines them:
// json {"text"}, text, verbose_json (task, language, duration, text,
// segments), srt and vtt. The model's own segments where it delimits them
// (Transcript::segments: Whisper's timestamps); else one segment per
// utterance, from its first aligned token's start to its last one's end
// (Transcript::token_times), or the whole audio where the model gives no
// times.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "asr/recognizer.h"

namespace oasr::server {

enum class ResponseFormat { kJson, kText, kVerboseJson, kSrt, kVtt };

// Refused (kInvalidArgument) naming the value and the ones taken.
ResponseFormat parse_response_format(const std::string& value);

struct Rendered {
  std::string content_type;
  std::string body;
};

Rendered render_transcript(ResponseFormat format, const engine::Transcript& transcript,
                           double duration_seconds);

// "HH:MM:SS,mmm" (srt) or "HH:MM:SS.mmm" (vtt).
std::string subtitle_time(double seconds, char millisecond_separator);

}  // namespace oasr::server
