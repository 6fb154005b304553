// Audio decoding: a file or an in-memory byte buffer (a request body) in any
// container/codec the linked libsndfile reads (WAV, FLAC, OGG Vorbis/Opus, MP3
// with libsndfile >= 1.1, ...) to mono float32 samples, optionally resampled
// to the model's rate (audio/resample.h).
//
// Sample values: integer PCM is normalised by libsndfile to [-1, 1) (16-bit
// PCM decodes to exactly x / 32768); float files are passed through as stored,
// unclipped, as torchaudio.load does. Channels are mixed to mono by averaging.
//
// Errors (oasr::Error), each naming the file: missing (kNotFound), a
// directory or unreadable (kIo), not decodable audio (kCorruptFile, with
// libsndfile's message), no samples / too long / wrong rate under
// require_sample_rate (kInvalidArgument), a header with zero channels or a
// zero rate or a non-finite sample (kCorruptFile).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace oasr::audio {

struct AudioLoadOptions {
  // Rate of the returned samples in Hz; 0 keeps the file's own rate.
  int target_sample_rate = 0;
  // With a target rate: refuse a file stored at another rate instead of
  // resampling it (calibration wants exactly the audio it was given).
  bool require_sample_rate = false;
  // Longest input accepted, in seconds of stored audio. Two hours is far
  // beyond any utterance an ASR model decodes in one piece while keeping the
  // decoded buffer bounded (2 h at 48 kHz mono is 1.3 GB of float32).
  double max_duration_seconds = 2.0 * 3600.0;

  void validate() const;     // throws kInvalidArgument naming the bad field
  std::string dump() const;  // one line, "target_sample_rate=16000 ..."
};

struct DecodedAudio {
  std::vector<float> samples;  // mono
  int sample_rate = 0;         // rate of `samples`
  int source_sample_rate = 0;  // rate stored in the file
  int source_channels = 0;
  std::string source_format;  // libsndfile's names, e.g. "WAV (Microsoft), Signed 16 bit PCM"

  double duration_seconds() const {
    return sample_rate > 0 ? static_cast<double>(samples.size()) / sample_rate : 0.0;
  }
};

// Float audio is meant to lie in [-1, 1]; a little over is clipping, but a
// sample beyond this is data that was never normalised (int16 values
// stored as float, or garbage), which the models turn into NaN.
inline constexpr float kMaxFloatMagnitude = 64.0f;

// Refuses samples handed over in memory (a numpy array, a stream's PCM)
// that a file would be refused for: a non-finite value (kInvalidArgument)
// or one beyond kMaxFloatMagnitude, naming `label`, the index and the value.
void check_samples(std::span<const float> samples, const std::string& label);

DecodedAudio load_audio(const std::filesystem::path& path, const AudioLoadOptions& options = {});
// Shorthand: resample to `target_sample_rate` (0 keeps the file's rate).
DecodedAudio load_audio(const std::filesystem::path& path, int target_sample_rate);

// Decodes an encoded file held in memory (bytes of a WAV/FLAC/... file, not
// raw samples). `name` labels the input in error messages ("request body").
DecodedAudio load_audio_from_memory(std::string_view encoded_bytes, const std::string& name,
                                    const AudioLoadOptions& options = {});

// The container formats this build's libsndfile reads, by its names
// ("WAV (Microsoft)", "FLAC (Free Lossless Audio Codec)", "MPEG-1/2 Audio", ...).
std::vector<std::string> supported_audio_formats();

}  // namespace oasr::audio
