// Helpers for the audio unit tests: writing audio files with libsndfile's
// writer (the reader under test is oasr's, the writer is libsndfile's own
// encoder), synthetic tones, and error-code expectations.
#pragma once

#include <gtest/gtest.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"

namespace oasr::testing {

// Writes interleaved samples (frames * channels) in `format`
// (SF_FORMAT_WAV | SF_FORMAT_PCM_16, ...). Integer PCM formats are written
// from 16-bit integers k = x * 32768 (so x must be a multiple of 2^-15, see
// int16_exact): libsndfile scales floats by 32767 on the way in but divides
// by 32768 on the way out, which would not round-trip. Fails the test when
// libsndfile cannot write the file; returns false then.
inline bool write_audio_file(const std::filesystem::path& path, int format, int channels,
                             int sample_rate, const std::vector<float>& interleaved) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  if (file == nullptr) {
    ADD_FAILURE() << "libsndfile cannot write " << path << ": " << sf_strerror(nullptr);
    return false;
  }
  const sf_count_t frames = static_cast<sf_count_t>(interleaved.size()) / channels;
  const int subtype = format & SF_FORMAT_SUBMASK;
  const bool integer_pcm = subtype == SF_FORMAT_PCM_16 || subtype == SF_FORMAT_PCM_24 ||
                           subtype == SF_FORMAT_PCM_32 || subtype == SF_FORMAT_PCM_S8;
  sf_count_t written = 0;
  if (integer_pcm) {
    std::vector<short> pcm(interleaved.size());
    for (size_t i = 0; i < pcm.size(); ++i) {
      const float k = interleaved[i] * 32768.0f;
      EXPECT_EQ(k, std::nearbyint(k)) << "sample " << i << " is not a 16-bit PCM value";
      pcm[i] = static_cast<short>(k);
    }
    written = sf_writef_short(file, pcm.data(), frames);
  } else {
    written = sf_writef_float(file, interleaved.data(), frames);
  }
  sf_close(file);
  EXPECT_EQ(written, frames) << "short write to " << path;
  return written == frames;
}

// Whether this libsndfile can write `format` (e.g. MP3 needs LAME).
inline bool can_write_format(int format, int channels, int sample_rate) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = format;
  return sf_format_check(&info) == SF_TRUE;
}

// sum_i amplitude_i * sin(2 pi f_i n / rate + phase_i), n = 0 .. count-1, in double.
struct Tone {
  double frequency;
  double amplitude;
  double phase = 0.0;
};
inline std::vector<double> tones(const std::vector<Tone>& parts, int rate, int64_t count,
                                 double time_offset = 0.0) {
  std::vector<double> out(static_cast<size_t>(count), 0.0);
  for (int64_t n = 0; n < count; ++n) {
    const double t = time_offset + static_cast<double>(n) / rate;
    for (const Tone& p : parts) {
      out[static_cast<size_t>(n)] +=
          p.amplitude * std::sin(2.0 * std::numbers::pi * p.frequency * t + p.phase);
    }
  }
  return out;
}

// Values quantised to 16-bit PCM and back: k / 32768 exactly, so a PCM_16
// file written from them decodes to the same floats.
inline std::vector<float> int16_exact(const std::vector<double>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double k = std::clamp(std::nearbyint(x[i] * 32768.0), -32768.0, 32767.0);
    out[i] = static_cast<float>(k / 32768.0);
  }
  return out;
}

// Expects `fn` to throw oasr::Error with `code` and a message containing
// every string in `needles`.
inline void expect_error(const std::function<void()>& fn, ErrorCode code,
                         const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected oasr::Error(" << error_code_name(code) << "), nothing thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << "message: " << e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "message lacks '" << needle << "': " << e.what();
    }
  }
}

}  // namespace oasr::testing
