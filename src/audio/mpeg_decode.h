// MPEG audio (MP1/2/3) through libmpg123 itself, internal to audio/. The
// decoder is set up as libsndfile sets up its own MPEG decoder (float32
// output, gapless: LAME's encoder delay and padding removed, no automatic
// resampling, no "Frankenstein" stream changes), so the samples are the ones
// libsndfile would return, but with MPG123_QUIET: libsndfile gives no way to
// silence libmpg123, whose warnings ("Xing stream size off by more than
// 1%...") otherwise reach the user's stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "audio/riff_chunks.h"  // detail::ReadAt

namespace oasr::audio::detail {

// Whether the bytes start like MPEG audio: an ID3v2 tag, or a valid MPEG
// audio frame header at offset 0. Only a hint: a stream libmpg123 then
// cannot open is left to libsndfile.
bool looks_like_mpeg_audio(const ReadAt& read_at);

class MpegDecoder {
 public:
  // The decoder over `size` bytes read through `read_at` (which must outlive
  // it), or null when libmpg123 finds no MPEG audio stream there.
  static std::unique_ptr<MpegDecoder> open(const ReadAt& read_at, uint64_t size);
  ~MpegDecoder();
  MpegDecoder(const MpegDecoder&) = delete;
  MpegDecoder& operator=(const MpegDecoder&) = delete;

  int sample_rate() const { return sample_rate_; }
  int channels() const { return channels_; }
  // Frames per channel after the gapless trim: exact where the stream has a
  // Xing / Info / VBRI header, else libmpg123's estimate from the file size
  // (as libsndfile reports it); -1 when unknown.
  int64_t frames() const { return frames_; }
  // E.g. "MPEG-1/2 Audio, MPEG Layer III" (libsndfile's names).
  const std::string& format() const { return format_; }
  // Reads up to `max_frames` interleaved float frames into `out`; returns
  // the frames read (0 at the end), or -1 on a decoding error (error()).
  int64_t read(float* out, int64_t max_frames);
  std::string error() const { return error_; }

 private:
  struct Source;
  MpegDecoder() = default;

  void* handle_ = nullptr;  // mpg123_handle
  std::unique_ptr<Source> source_;
  int sample_rate_ = 0;
  int channels_ = 0;
  int64_t frames_ = -1;
  std::string format_;
  std::string error_;
};

}  // namespace oasr::audio::detail
