#include "audio/audio_file.h"

#include <fcntl.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "audio/mpeg_decode.h"
#include "audio/resample.h"
#include "audio/riff_chunks.h"
#include "core/error.h"
#include "io/posix_file.h"

namespace oasr::audio {

namespace {

// Interleaved samples decoded per libsndfile call: large enough to amortise
// the call, small enough that the scratch buffer stays in cache.
constexpr sf_count_t kChunkSamples = 65536;

struct SndfileCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};
using SndfileHandle = std::unique_ptr<SNDFILE, SndfileCloser>;

// libsndfile reading from a caller's buffer (SF_VIRTUAL_IO): a cursor over
// bytes that outlive the SNDFILE.
struct MemoryCursor {
  std::string_view bytes;
  sf_count_t position = 0;
};

sf_count_t memory_length(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryCursor*>(user)->bytes.size());
}

sf_count_t memory_seek(sf_count_t offset, int whence, void* user) {
  auto* cursor = static_cast<MemoryCursor*>(user);
  const auto size = static_cast<sf_count_t>(cursor->bytes.size());
  sf_count_t base = 0;
  if (whence == SEEK_CUR) base = cursor->position;
  if (whence == SEEK_END) base = size;
  const sf_count_t target = base + offset;
  if (target < 0 || target > size) return -1;
  cursor->position = target;
  return target;
}

sf_count_t memory_read(void* destination, sf_count_t count, void* user) {
  auto* cursor = static_cast<MemoryCursor*>(user);
  const auto size = static_cast<sf_count_t>(cursor->bytes.size());
  const sf_count_t n =
      std::clamp<sf_count_t>(size - cursor->position, 0, std::max<sf_count_t>(count, 0));
  std::memcpy(destination, cursor->bytes.data() + cursor->position, static_cast<size_t>(n));
  cursor->position += n;
  return n;
}

sf_count_t memory_write(const void*, sf_count_t, void*) {
  return 0;
}  // read-only

sf_count_t memory_tell(void* user) {
  return static_cast<MemoryCursor*>(user)->position;
}

std::string format_name(int format, int command) {
  SF_FORMAT_INFO info{};
  info.format = format;
  if (sf_command(nullptr, command, &info, sizeof(info)) != 0 || info.name == nullptr) {
    std::ostringstream hex;
    hex << "format 0x" << std::hex << format;
    return hex.str();
  }
  return info.name;
}

std::string describe_format(int format) {
  return format_name(format & SF_FORMAT_TYPEMASK, SFC_GET_FORMAT_INFO) + ", " +
         format_name(format & SF_FORMAT_SUBMASK, SFC_GET_FORMAT_INFO);
}

// Where decoded frames come from: reads up to `frames` interleaved float
// frames into `out`, returns how many (0 at the end, negative on an error,
// which `error` then describes).
struct FrameSource {
  std::function<int64_t(float* out, int64_t frames)> read;
  std::function<std::string()> error;
};

// What a container's header says of the stream.
struct StreamHeader {
  int sample_rate = 0;
  int channels = 0;
  int64_t frames = -1;        // frames per channel; -1 unknown
  bool exact_length = false;  // the header states the exact length (truncation rule)
  std::string format;         // e.g. "WAV (Microsoft), Signed 16 bit PCM"
};

// Reads every frame, mixing to mono by averaging the channels. Refuses input
// longer than max_frames while reading, so a header that understates the
// length (or a stream without one) cannot make us decode unbounded audio.
// The header's frame count sizes the buffer only up to the encoded size: an
// uncompressed frame takes at least a byte, and a header that overstates
// the length (a tiny FLAC claiming hours) must not allocate for it.
std::vector<float> read_mono(const FrameSource& source, const StreamHeader& header,
                             int64_t max_frames, uint64_t encoded_bytes, const std::string& label,
                             double max_seconds) {
  const int channels = header.channels;
  std::vector<float> mono;
  if (header.frames > 0) {
    const auto cap = static_cast<int64_t>(std::min<uint64_t>(encoded_bytes, INT64_MAX));
    mono.reserve(static_cast<size_t>(std::min({header.frames, max_frames, cap})));
  }
  const int64_t chunk_frames = std::max<int64_t>(1, kChunkSamples / channels);
  std::vector<float> interleaved(static_cast<size_t>(chunk_frames * channels));
  const float inverse_channels = 1.0f / static_cast<float>(channels);
  while (true) {
    const int64_t got = source.read(interleaved.data(), chunk_frames);
    OASR_CHECK(got >= 0, kCorruptFile, label, ": decoding failed after ", mono.size(),
               " frames: ", source.error());
    if (got == 0) break;
    OASR_CHECK(static_cast<int64_t>(mono.size()) + got <= max_frames, kInvalidArgument, label,
               ": audio is longer than the ", max_seconds,
               " s limit; split it into shorter pieces or raise "
               "AudioLoadOptions::max_duration_seconds");
    for (int64_t frame = 0; frame < got; ++frame) {
      const float* values = interleaved.data() + frame * channels;
      float value = values[0];
      if (channels > 1) {
        // Sum in channel order, then scale: (L + R) * 0.5 for stereo.
        for (int c = 1; c < channels; ++c) value += values[c];
        value = channels == 2 ? value * 0.5f : value * inverse_channels;
      }
      OASR_CHECK(std::isfinite(value), kCorruptFile, label, ": sample ",
                 static_cast<int64_t>(mono.size()), " is not a finite number (", value,
                 "); the file's float data is damaged");
      OASR_CHECK(std::fabs(value) <= kMaxFloatMagnitude, kInvalidArgument, label, ": sample ",
                 static_cast<int64_t>(mono.size()), " is ", value,
                 "; float audio is expected in [-1, 1] and this file's samples are not "
                 "normalised (beyond +-",
                 kMaxFloatMagnitude, "): scale them into [-1, 1] (int16 values: divide by 32768)");
      mono.push_back(value);
    }
  }
  return mono;
}

// A WAV whose data chunk declares more bytes than the file holds was cut
// short (an interrupted copy, download or recording). libsndfile reads what
// is there and notes the difference in its log as
// "data : DECLARED (should be PRESENT)"; a declared size of 0 or near
// 0xFFFFFFFF is a streaming writer's placeholder, not a truncation.
void refuse_truncated(SNDFILE* file, const SF_INFO& info, const std::string& label) {
  const int major = info.format & SF_FORMAT_TYPEMASK;
  if (major != SF_FORMAT_WAV && major != SF_FORMAT_WAVEX) return;
  char log[8192] = {};
  sf_command(file, SFC_GET_LOG_INFO, log, sizeof(log));
  std::istringstream lines{std::string(log)};
  for (std::string line; std::getline(lines, line);) {
    unsigned long long declared = 0, present = 0;
    if (std::sscanf(line.c_str(), "data : %llu (should be %llu)", &declared, &present) != 2) {
      continue;
    }
    if (declared == 0 || declared >= 0xFFFFFF00ull || declared <= present) continue;
    const double rate = static_cast<double>(info.samplerate);
    const double present_seconds = static_cast<double>(info.frames) / rate;
    const double declared_seconds =
        present == 0 ? 0.0 : present_seconds * static_cast<double>(declared) / present;
    OASR_THROW(kCorruptFile, label, ": the file is truncated: its header declares ", declared,
               " bytes of audio (", declared_seconds, " s) but it holds ", present, " (",
               present_seconds,
               " s); it was cut short (an interrupted copy, download or recording): re-create "
               "it, or rewrite its header to the data present (sox in.wav out.wav)");
  }
}

// Why libsndfile could not open `label`, in oasr's words: its own texts
// ("SF_INFO struct incomplete", "No 'data' chunk marker") follow only as
// the decoder's detail.
[[noreturn]] void refuse_unopened(const std::string& label) {
  const int code = sf_error(nullptr);
  if (code == SF_ERR_UNRECOGNISED_FORMAT) {
    OASR_THROW(kCorruptFile, label,
               ": not a readable audio file: no audio format oasr reads was recognised "
               "(supported are WAV, FLAC, OGG, MP3 and the other formats libsndfile reads)");
  }
  const std::string extension = std::filesystem::path(label).extension().string();
  std::string container = extension.size() > 1 ? "" : "audio";
  for (size_t i = 1; i < extension.size(); ++i) {
    container += static_cast<char>(std::toupper(static_cast<unsigned char>(extension[i])));
  }
  OASR_THROW(kCorruptFile, label, ": not a readable audio file: its ", container,
             " structure is damaged or cut short (decoder detail: ", sf_strerror(nullptr),
             "); re-create the file, or convert it to WAV or FLAC");
}

// Whether an MPEG audio file carries a Xing / Info / VBRI header (written by
// LAME and most encoders), whose frame count is exact; without one,
// libsndfile's length is an estimate from the file size. The header sits in
// the first frame, after an optional ID3v2 tag.
bool mpeg_declares_length(const detail::ReadAt& read_at) {
  uint64_t offset = 0;
  unsigned char id3[10] = {};
  if (read_at(0, id3, sizeof(id3)) == sizeof(id3) && std::memcmp(id3, "ID3", 3) == 0) {
    const uint64_t size = (uint64_t{id3[6]} & 0x7f) << 21 | (uint64_t{id3[7]} & 0x7f) << 14 |
                          (uint64_t{id3[8]} & 0x7f) << 7 | (uint64_t{id3[9]} & 0x7f);
    offset = 10 + size + ((id3[5] & 0x10) != 0 ? 10 : 0);  // a footer flag adds 10 bytes
  }
  std::string first(4096, '\0');
  first.resize(read_at(offset, first.data(), first.size()));
  return first.find("Xing") != std::string::npos || first.find("Info") != std::string::npos ||
         first.find("VBRI") != std::string::npos;
}

// One truncation rule for the containers whose header states the exact
// length (WAV's data size is checked from the header above): FLAC's
// STREAMINFO and an MP3's Xing / Info / VBRI header. Fewer frames decoded
// than declared means the file was cut short. Other containers' lengths are
// not trusted here (an Ogg cut short fails to open instead).
void refuse_short_decode(const StreamHeader& header, size_t decoded, const std::string& label) {
  if (!header.exact_length || header.frames <= 0) return;
  if (static_cast<int64_t>(decoded) >= header.frames) return;
  const double rate = static_cast<double>(header.sample_rate);
  OASR_THROW(kCorruptFile, label, ": the file is truncated: its header declares ", header.frames,
             " frames (", static_cast<double>(header.frames) / rate, " s) but only ", decoded, " (",
             static_cast<double>(decoded) / rate,
             " s) decode; it was cut short (an interrupted copy, download or recording): "
             "re-create it");
}

// The steps every container shares once its header is read: the header's
// values checked, the length limit, the frames mixed to mono, the
// truncation rule, resampling.
DecodedAudio finish_decode(const StreamHeader& header, const FrameSource& source,
                           uint64_t encoded_bytes, const std::string& label,
                           const AudioLoadOptions& options) {
  OASR_CHECK(header.channels > 0, kCorruptFile, label, ": the header declares ", header.channels,
             " channels; the file is damaged");
  OASR_CHECK(header.sample_rate > 0, kCorruptFile, label, ": the header declares a sample rate of ",
             header.sample_rate, " Hz; the file is damaged");
  const int target = options.target_sample_rate;
  if (options.require_sample_rate && target != 0 && header.sample_rate != target) {
    OASR_THROW(kInvalidArgument, label, ": sampled at ", header.sample_rate, " Hz but ", target,
               " Hz is required (require_sample_rate is set, so it is not resampled); convert "
               "the file to ",
               target, " Hz first");
  }
  const double max_frames_real = std::floor(options.max_duration_seconds * header.sample_rate);
  const auto max_frames = static_cast<int64_t>(std::min(max_frames_real, 9.0e18));
  // Refuse from the header when it already tells.
  if (header.frames > max_frames) {
    OASR_THROW(kInvalidArgument, label, ": audio is ",
               static_cast<double>(header.frames) / header.sample_rate, " s long, over the ",
               options.max_duration_seconds,
               " s limit; split it into shorter pieces or raise "
               "AudioLoadOptions::max_duration_seconds");
  }
  DecodedAudio audio;
  audio.source_sample_rate = header.sample_rate;
  audio.source_channels = header.channels;
  audio.source_format = header.format;
  audio.samples =
      read_mono(source, header, max_frames, encoded_bytes, label, options.max_duration_seconds);
  refuse_short_decode(header, audio.samples.size(), label);
  OASR_CHECK(!audio.samples.empty(), kInvalidArgument, label,
             ": empty audio (the file holds no samples); nothing to recognise");
  audio.sample_rate = header.sample_rate;
  if (target != 0 && target != header.sample_rate) {
    audio.samples = resample(audio.samples, header.sample_rate, target);
    audio.sample_rate = target;
  }
  return audio;
}

DecodedAudio decode(SNDFILE* raw_file, const SF_INFO& info, uint64_t encoded_bytes,
                    const detail::ReadAt& read_at, const std::string& label,
                    const AudioLoadOptions& options) {
  SndfileHandle file(raw_file);
  refuse_truncated(file.get(), info, label);
  const int major = info.format & SF_FORMAT_TYPEMASK;
  StreamHeader header;
  header.sample_rate = info.samplerate;
  header.channels = info.channels;
  header.frames = info.frames == SF_COUNT_MAX ? -1 : info.frames;  // SF_COUNT_MAX: unknown
  header.exact_length =
      major == SF_FORMAT_FLAC || (major == SF_FORMAT_MPEG && mpeg_declares_length(read_at));
  header.format = describe_format(info.format);
  const FrameSource source{[&](float* out, int64_t frames) -> int64_t {
                             const sf_count_t got = sf_readf_float(file.get(), out, frames);
                             if (got > 0) return got;
                             return sf_error(file.get()) == SF_ERR_NO_ERROR ? 0 : -1;
                           },
                           [&] { return std::string(sf_strerror(file.get())); }};
  return finish_decode(header, source, encoded_bytes, label, options);
}

// MPEG audio through libmpg123 directly (audio/mpeg_decode.h: the same
// samples as libsndfile's decoder, without libmpg123's stderr warnings);
// nullopt when libmpg123 finds no stream, so libsndfile gets the file.
std::optional<DecodedAudio> decode_mpeg(const detail::ReadAt& read_at, uint64_t encoded_bytes,
                                        const std::string& label, const AudioLoadOptions& options) {
  if (!detail::looks_like_mpeg_audio(read_at)) return std::nullopt;
  const std::unique_ptr<detail::MpegDecoder> decoder =
      detail::MpegDecoder::open(read_at, encoded_bytes);
  if (decoder == nullptr) return std::nullopt;
  StreamHeader header;
  header.sample_rate = decoder->sample_rate();
  header.channels = decoder->channels();
  header.frames = decoder->frames();
  header.exact_length = mpeg_declares_length(read_at);
  header.format = decoder->format();
  const FrameSource source{[&](float* out, int64_t frames) { return decoder->read(out, frames); },
                           [&] { return decoder->error(); }};
  return finish_decode(header, source, encoded_bytes, label, options);
}

}  // namespace

void AudioLoadOptions::validate() const {
  OASR_CHECK(target_sample_rate >= 0, kInvalidArgument,
             "AudioLoadOptions: target_sample_rate must be >= 0 (0 keeps the file's rate), got ",
             target_sample_rate);
  OASR_CHECK(!(require_sample_rate && target_sample_rate == 0), kInvalidArgument,
             "AudioLoadOptions: require_sample_rate needs a target_sample_rate to require");
  OASR_CHECK(max_duration_seconds > 0 && std::isfinite(max_duration_seconds), kInvalidArgument,
             "AudioLoadOptions: max_duration_seconds must be a positive number of seconds, got ",
             max_duration_seconds);
}

std::string AudioLoadOptions::dump() const {
  std::ostringstream out;
  out << "target_sample_rate=" << target_sample_rate
      << " require_sample_rate=" << (require_sample_rate ? "true" : "false")
      << " max_duration_seconds=" << max_duration_seconds;
  return out.str();
}

DecodedAudio load_audio(const std::filesystem::path& path, const AudioLoadOptions& options) {
  options.validate();
  const std::string label = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    OASR_THROW(kNotFound, label, ": no such audio file; check the path");
  }
  OASR_CHECK(status.type() != std::filesystem::file_type::directory, kIo, label,
             ": is a directory, not an audio file");
  // Open the descriptor ourselves so an OS refusal (permissions) reads as
  // such rather than as libsndfile's format complaint.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  OASR_CHECK(fd >= 0, kIo, label, ": cannot open the audio file: ", std::strerror(errno));
  // libsndfile does not close a descriptor it was not told to own; closing
  // it here on every path avoids guessing what it does on a failed open.
  const io::FdCloser fd_closer(fd);
  struct stat st {};
  OASR_CHECK(::fstat(fd, &st) == 0, kIo, label,
             ": cannot stat the audio file: ", std::strerror(errno));
  const detail::ReadAt read_at = [fd](uint64_t offset, void* out, size_t count) {
    const ssize_t got = ::pread(fd, out, count, static_cast<off_t>(offset));
    return got > 0 ? static_cast<size_t>(got) : size_t{0};
  };
  detail::refuse_overrunning_riff_chunks(read_at, static_cast<uint64_t>(st.st_size), label);
  if (auto mpeg = decode_mpeg(read_at, static_cast<uint64_t>(st.st_size), label, options)) {
    return std::move(*mpeg);
  }
  SF_INFO info{};
  SNDFILE* file = sf_open_fd(fd, SFM_READ, &info, /*close_desc=*/SF_FALSE);
  if (file == nullptr) refuse_unopened(label);
  return decode(file, info, static_cast<uint64_t>(st.st_size), read_at, label, options);
}

void check_samples(std::span<const float> samples, const std::string& label) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const float value = samples[i];
    OASR_CHECK(std::isfinite(value), kInvalidArgument, label, ": sample ", i,
               " is not a finite number (", value, ")");
    OASR_CHECK(std::fabs(value) <= kMaxFloatMagnitude, kInvalidArgument, label, ": sample ", i,
               " is ", value,
               "; float audio is expected in [-1, 1] and these samples are not "
               "normalised (beyond +-",
               kMaxFloatMagnitude, "): scale them into [-1, 1] (int16 values: divide by 32768)");
  }
}

DecodedAudio load_audio(const std::filesystem::path& path, int target_sample_rate) {
  AudioLoadOptions options;
  options.target_sample_rate = target_sample_rate;
  return load_audio(path, options);
}

DecodedAudio load_audio_from_memory(std::string_view encoded_bytes, const std::string& name,
                                    const AudioLoadOptions& options) {
  options.validate();
  OASR_CHECK(!encoded_bytes.empty(), kInvalidArgument, name,
             ": empty audio (0 bytes); send the bytes of an audio file");
  const detail::ReadAt read_at = [encoded_bytes](uint64_t offset, void* out, size_t count) {
    if (offset >= encoded_bytes.size()) return size_t{0};
    const size_t n = std::min<uint64_t>(count, encoded_bytes.size() - offset);
    std::memcpy(out, encoded_bytes.data() + offset, n);
    return n;
  };
  detail::refuse_overrunning_riff_chunks(read_at, encoded_bytes.size(), name);
  if (auto mpeg = decode_mpeg(read_at, encoded_bytes.size(), name, options)) {
    return std::move(*mpeg);
  }
  MemoryCursor cursor{encoded_bytes, 0};
  SF_VIRTUAL_IO io{memory_length, memory_seek, memory_read, memory_write, memory_tell};
  SF_INFO info{};
  SNDFILE* file = sf_open_virtual(&io, SFM_READ, &info, &cursor);
  if (file == nullptr) refuse_unopened(name);
  return decode(file, info, encoded_bytes.size(), read_at, name, options);
}

std::vector<std::string> supported_audio_formats() {
  int count = 0;
  sf_command(nullptr, SFC_GET_FORMAT_MAJOR_COUNT, &count, sizeof(count));
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    SF_FORMAT_INFO info{};
    info.format = i;
    if (sf_command(nullptr, SFC_GET_FORMAT_MAJOR, &info, sizeof(info)) == 0 && info.name) {
      names.emplace_back(info.name);
    }
  }
  return names;
}

}  // namespace oasr::audio
