// Audio decoding (audio/audio_file.h): files written by libsndfile's own
// encoders in every format the issue names, decoded from a path and from
// memory; channel mixing; resampling on load; and every refusal.
#include <gtest/gtest.h>
#include <sndfile.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "audio/audio_file.h"
#include "audio/resample.h"
#include "support/test_support.h"
#include "unit/test_audio_util.h"

namespace oasr {
namespace {

using audio::AudioLoadOptions;
using audio::DecodedAudio;
using audio::load_audio;
using audio::load_audio_from_memory;
using testing::expect_error;
using testing::int16_exact;
using testing::TempDir;
using testing::tones;
using testing::write_audio_file;

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Signal-to-noise ratio in dB of `decoded` against `reference` (same length).
double snr_db(const std::vector<float>& decoded, const std::vector<float>& reference) {
  double signal = 0, noise = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    signal += static_cast<double>(reference[i]) * reference[i];
    noise += std::pow(static_cast<double>(decoded[i]) - reference[i], 2);
  }
  return 10.0 * std::log10(signal / std::max(noise, 1e-30));
}

const std::vector<float>& speechband_tones_16k() {
  static const std::vector<float> x =
      int16_exact(tones({{440, 0.3}, {1000, 0.2, 0.5}, {2500, 0.1, 1.0}}, 16000, 16000));
  return x;
}

TEST(AudioFile, LibsndfileReadsTheIssueFormats) {
  const std::vector<std::string> names = audio::supported_audio_formats();
  auto has = [&](const std::string& prefix) {
    return std::any_of(names.begin(), names.end(),
                       [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("WAV"));
  EXPECT_TRUE(has("FLAC"));
  EXPECT_TRUE(has("OGG"));
  EXPECT_TRUE(has("MPEG")) << "this libsndfile cannot read MP3 (needs >= 1.1 with mpg123)";
}

// 16-bit PCM in WAV and FLAC is lossless: the decoder returns k / 32768.
TEST(AudioFile, Pcm16WavAndFlacDecodeExactly) {
  TempDir dir;
  const std::vector<float>& x = speechband_tones_16k();
  for (const auto& [name, format] : {std::pair{"a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16},
                                     std::pair{"a.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(write_audio_file(dir.path() / name, format, 1, 16000, x));
    const DecodedAudio a = load_audio(dir.path() / name, 0);
    EXPECT_EQ(a.samples, x);
    EXPECT_EQ(a.sample_rate, 16000);
    EXPECT_EQ(a.source_sample_rate, 16000);
    EXPECT_EQ(a.source_channels, 1);
    EXPECT_NE(a.source_format.find("16 bit"), std::string::npos) << a.source_format;
    EXPECT_DOUBLE_EQ(a.duration_seconds(), 1.0);
  }
}

TEST(AudioFile, ChannelsAreAveraged) {
  TempDir dir;
  const int64_t n = 3000;
  const std::vector<float> a = int16_exact(tones({{300, 0.5}}, 16000, n));
  const std::vector<float> b = int16_exact(tones({{700, 0.4, 1.0}}, 16000, n));
  const std::vector<float> c = int16_exact(tones({{1900, 0.2, 2.0}}, 16000, n));
  std::vector<float> interleaved;
  for (int64_t i = 0; i < n; ++i) {
    for (const auto* ch : {&a, &b, &c}) interleaved.push_back((*ch)[static_cast<size_t>(i)]);
  }
  ASSERT_TRUE(write_audio_file(dir.path() / "three.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 3, 16000,
                               interleaved));
  const DecodedAudio decoded = load_audio(dir.path() / "three.wav", 0);
  EXPECT_EQ(decoded.source_channels, 3);
  ASSERT_EQ(decoded.samples.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const double mean = (static_cast<double>(a[k]) + b[k] + c[k]) / 3.0;
    ASSERT_NEAR(decoded.samples[k], mean, 1e-7) << "sample " << i;  // float rounding only
  }
}

// Ogg Vorbis and MP3 are lossy: the decoded audio must be the same tones,
// not a bit pattern. Vorbis keeps the exact length (the Ogg granule position
// says where the audio ends).
TEST(AudioFile, OggVorbisDecodesToTheSameAudio) {
  TempDir dir;
  const std::vector<float>& x = speechband_tones_16k();
  ASSERT_TRUE(
      write_audio_file(dir.path() / "a.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 1, 16000, x));
  const DecodedAudio a = load_audio(dir.path() / "a.ogg", 0);
  ASSERT_EQ(a.samples.size(), x.size());
  EXPECT_GT(snr_db(a.samples, x), 25.0);  // 30 dB observed at the default quality
  EXPECT_NE(a.source_format.find("OGG"), std::string::npos) << a.source_format;
}

TEST(AudioFile, Mp3DecodesToTheSameAudio) {
  const int format = SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
  if (!testing::can_write_format(format, 1, 16000)) {
    GTEST_SKIP() << "this libsndfile has no MP3 encoder (LAME) to write the test file";
  }
  TempDir dir;
  const std::vector<float>& x = speechband_tones_16k();
  ASSERT_TRUE(write_audio_file(dir.path() / "a.mp3", format, 1, 16000, x));
  const DecodedAudio a = load_audio(dir.path() / "a.mp3", 0);
  EXPECT_EQ(a.sample_rate, 16000);
  // The decoder honours LAME's gapless header, so the length and alignment
  // survive; the codec's error is what is left.
  ASSERT_EQ(a.samples.size(), x.size());
  EXPECT_GT(snr_db(a.samples, x), 25.0);  // 38 dB observed
  EXPECT_NE(a.source_format.find("MPEG"), std::string::npos) << a.source_format;
}

// libsndfile's own decode of a file, every channel, as float frames (the
// reference for oasr's direct libmpg123 path).
std::vector<float> libsndfile_frames(const std::filesystem::path& path, int* channels) {
  SF_INFO info{};
  SNDFILE* file = sf_open(path.c_str(), SFM_READ, &info);
  if (file == nullptr) return {};
  std::vector<float> frames(static_cast<size_t>(info.frames * info.channels) + 4096);
  const sf_count_t got = sf_readf_float(file, frames.data(), info.frames + 1024 / info.channels);
  sf_close(file);
  frames.resize(static_cast<size_t>(got * info.channels));
  *channels = info.channels;
  return frames;
}

// [W3-S] MPEG audio goes through libmpg123 directly, set up as libsndfile
// sets up its decoder: the same samples bit for bit (mono and stereo, from a
// file and from memory), and libmpg123 says nothing on stderr, also for a
// file cut short (it warned "Xing stream size off by more than 1%" there).
TEST(AudioFile, Mp3DecodesAsLibsndfileDoesAndQuietly) {
  const int format = SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
  if (!testing::can_write_format(format, 2, 16000)) {
    GTEST_SKIP() << "this libsndfile has no MP3 encoder (LAME) to write the test file";
  }
  TempDir dir;
  const std::vector<float>& x = speechband_tones_16k();
  std::vector<float> stereo;
  for (size_t i = 0; i < x.size(); ++i) {
    stereo.push_back(x[i]);
    stereo.push_back(0.5f * x[(i * 7) % x.size()]);
  }
  for (const auto& [name, channels, samples] :
       {std::tuple{"mono.mp3", 1, &x},
        std::tuple{"stereo.mp3", 2, static_cast<const std::vector<float>*>(&stereo)}}) {
    const auto path = dir.path() / name;
    ASSERT_TRUE(write_audio_file(path, format, channels, 16000, *samples));
    int sf_channels = 0;
    const std::vector<float> reference = libsndfile_frames(path, &sf_channels);
    ASSERT_EQ(sf_channels, channels);
    ::testing::internal::CaptureStderr();
    const DecodedAudio a = load_audio(path, 0);
    const DecodedAudio m = load_audio_from_memory(read_bytes(path), "upload", {});
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(err, "") << name;
    ASSERT_EQ(a.samples.size() * static_cast<size_t>(channels), reference.size()) << name;
    for (size_t i = 0; i < a.samples.size(); ++i) {
      float expected = reference[i * channels];
      if (channels == 2) expected = (expected + reference[i * 2 + 1]) * 0.5f;
      ASSERT_EQ(a.samples[i], expected) << name << " frame " << i;
    }
    EXPECT_EQ(m.samples, a.samples) << name;
    EXPECT_EQ(a.source_format, "MPEG-1/2 Audio, MPEG Layer III");
    EXPECT_EQ(a.source_channels, channels);
    const std::string bytes = read_bytes(path);
    write_bytes(dir.path() / "cut.mp3", bytes.substr(0, bytes.size() * 6 / 10));
    ::testing::internal::CaptureStderr();
    EXPECT_THROW(load_audio(dir.path() / "cut.mp3", 0), Error);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << name;
  }
}

TEST(AudioFile, MemoryDecodeEqualsFileDecode) {
  TempDir dir;
  const std::vector<float>& x = speechband_tones_16k();
  for (const auto& [name, format] : {std::pair{"m.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16},
                                     std::pair{"m.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24},
                                     std::pair{"m.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS},
                                     std::pair{"m.w32.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(write_audio_file(dir.path() / name, format, 1, 16000, x));
    const DecodedAudio from_file = load_audio(dir.path() / name, 0);
    const DecodedAudio from_memory =
        load_audio_from_memory(read_bytes(dir.path() / name), "request body", {});
    EXPECT_EQ(from_memory.samples, from_file.samples);
    EXPECT_EQ(from_memory.source_format, from_file.source_format);
    EXPECT_EQ(from_memory.sample_rate, 16000);
  }
}

TEST(AudioFile, ResamplesToTheTargetRate) {
  TempDir dir;
  const std::vector<float> x = int16_exact(tones({{300, 0.4}, {1200, 0.3}}, 8000, 4001));
  ASSERT_TRUE(
      write_audio_file(dir.path() / "8k.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 8000, x));
  const DecodedAudio a = load_audio(dir.path() / "8k.wav", 16000);
  EXPECT_EQ(a.sample_rate, 16000);
  EXPECT_EQ(a.source_sample_rate, 8000);
  EXPECT_EQ(a.samples, audio::resample(x, 8000, 16000));
  EXPECT_EQ(a.samples.size(), 8002u);

  // The same rate as the file: no resampling at all.
  EXPECT_EQ(load_audio(dir.path() / "8k.wav", 8000).samples, x);

  // From memory too.
  AudioLoadOptions options;
  options.target_sample_rate = 16000;
  EXPECT_EQ(load_audio_from_memory(read_bytes(dir.path() / "8k.wav"), "body", options).samples,
            a.samples);
}

TEST(AudioFile, RequireSampleRateRefusesInsteadOfResampling) {
  TempDir dir;
  const std::vector<float> x = int16_exact(tones({{300, 0.4}}, 8000, 800));
  const auto path = dir.path() / "calib_8k.wav";
  ASSERT_TRUE(write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 8000, x));
  AudioLoadOptions options;
  options.target_sample_rate = 16000;
  options.require_sample_rate = true;
  expect_error([&] { load_audio(path, options); }, ErrorCode::kInvalidArgument,
               {path.string(), "8000 Hz", "16000 Hz", "require_sample_rate"});
  expect_error([&] { load_audio_from_memory(read_bytes(path), "calibration item 3", options); },
               ErrorCode::kInvalidArgument, {"calibration item 3", "8000 Hz", "16000 Hz"});
  options.target_sample_rate = 8000;
  EXPECT_EQ(load_audio(path, options).samples, x);
}

TEST(AudioFile, MissingFileIsNotFound) {
  TempDir dir;
  const auto path = dir.path() / "nope.wav";
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kNotFound,
               {path.string(), "no such audio file"});
}

TEST(AudioFile, DirectoryIsRefused) {
  TempDir dir;
  expect_error([&] { load_audio(dir.path(), 16000); }, ErrorCode::kIo,
               {dir.path().string(), "directory"});
}

TEST(AudioFile, UnreadableFileIsAnIoError) {
  if (geteuid() == 0) GTEST_SKIP() << "running as root: file permissions do not apply";
  TempDir dir;
  const auto path = dir.path() / "locked.wav";
  ASSERT_TRUE(
      write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 16000, speechband_tones_16k()));
  std::filesystem::permissions(path, std::filesystem::perms::none);
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kIo, {path.string(), "cannot open"});
}

TEST(AudioFile, TextFileNamedWavIsCorrupt) {
  TempDir dir;
  const auto path = dir.path() / "x.wav";
  write_bytes(path, "this is not audio, just some text that happens to end in .wav\n");
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kCorruptFile,
               {path.string(),
                "not a readable audio file: no audio format oasr reads was "
                "recognised (supported are WAV, FLAC, OGG, MP3"});
  expect_error([&] { load_audio_from_memory(read_bytes(path), "upload", {}); },
               ErrorCode::kCorruptFile, {"upload: not a readable audio file"});
}

// [W3-S] One truncation rule for every container: a FLAC, MP3 or Ogg file cut
// short is refused as truncated or damaged, never transcribed as if whole,
// and libsndfile's own texts come only as the decoder's detail.
TEST(AudioFile, AFileCutShortIsRefusedInEveryContainer) {
  TempDir dir;
  const std::vector<float> x = int16_exact(tones({{440, 0.3}}, 16000, 32000));  // 2 s
  struct Case {
    const char* name;
    int format;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"a.flac",
       SF_FORMAT_FLAC | SF_FORMAT_PCM_16,
       {"the file is truncated: its header declares 32000 frames (2 s) but only"}},
      {"a.mp3",
       SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III,
       {"the file is truncated: its header declares 32000 frames (2 s) but only"}},
      {"a.ogg",
       SF_FORMAT_OGG | SF_FORMAT_VORBIS,
       {"not a readable audio file: its OGG structure is damaged or cut short (decoder detail: ",
        "re-create the file, or convert it to WAV or FLAC"}},
  };
  for (const Case& c : cases) {
    if (!testing::can_write_format(c.format, 1, 16000)) continue;  // MP3 needs LAME
    const auto path = dir.path() / c.name;
    ASSERT_TRUE(write_audio_file(path, c.format, 1, 16000, x));
    ASSERT_EQ(load_audio(path, 0).samples.size(), x.size()) << c.name;  // whole: accepted
    const std::string bytes = read_bytes(path);
    const auto cut = dir.path() / (std::string("cut_") + c.name);
    write_bytes(cut, bytes.substr(0, bytes.size() * 6 / 10));
    std::vector<std::string> words = c.words;
    words.push_back(cut.string());
    expect_error([&] { load_audio(cut, 0); }, ErrorCode::kCorruptFile, words);
    if (c.format == (SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III)) {
      // Without its Xing / Info header an MP3's length is libsndfile's
      // estimate from the file size: no truncation is claimed from it.
      std::string headerless = bytes;
      for (const char* tag : {"Xing", "Info"}) {
        const size_t at = headerless.find(tag);
        if (at != std::string::npos && at < 4096) headerless.replace(at, 4, "None");
      }
      const auto plain = dir.path() / "headerless.mp3";
      write_bytes(plain, headerless);
      EXPECT_NO_THROW(load_audio(plain, 0));
      write_bytes(plain, headerless.substr(0, headerless.size() * 6 / 10));
      EXPECT_NO_THROW(load_audio(plain, 0));
    }
    std::vector<std::string> memory_words = c.words;
    memory_words.push_back("upload");
    if (std::string(c.name) != "a.ogg") {
      expect_error(
          [&] { load_audio_from_memory(bytes.substr(0, bytes.size() * 6 / 10), "upload", {}); },
          ErrorCode::kCorruptFile, memory_words);
    }
  }
}

TEST(AudioFile, ZeroFrameFileIsEmptyAudio) {
  TempDir dir;
  const auto path = dir.path() / "empty.wav";
  ASSERT_TRUE(write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 16000, {}));
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kInvalidArgument,
               {path.string(), "empty audio"});
  expect_error([&] { load_audio_from_memory(read_bytes(path), "body", {}); },
               ErrorCode::kInvalidArgument, {"body", "empty audio"});
  expect_error([&] { load_audio_from_memory("", "body", {}); }, ErrorCode::kInvalidArgument,
               {"body", "0 bytes"});
}

TEST(AudioFile, LongerThanTheLimitIsRefused) {
  TempDir dir;
  const auto path = dir.path() / "one_second.wav";
  ASSERT_TRUE(
      write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 16000, speechband_tones_16k()));
  AudioLoadOptions options;
  options.max_duration_seconds = 0.5;
  expect_error([&] { load_audio(path, options); }, ErrorCode::kInvalidArgument,
               {path.string(), "0.5 s", "max_duration_seconds"});
  options.max_duration_seconds = 1.0;  // exactly at the limit is accepted
  EXPECT_EQ(load_audio(path, options).samples.size(), 16000u);
  EXPECT_EQ(AudioLoadOptions{}.max_duration_seconds, 7200.0);
}

TEST(AudioFile, NonFiniteFloatSampleIsCorrupt) {
  TempDir dir;
  const auto path = dir.path() / "nan.wav";
  std::vector<float> x(100, 0.25f);
  x[42] = NAN;
  ASSERT_TRUE(write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 16000, x));
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kCorruptFile,
               {path.string(), "sample 42", "not a finite number"});
}

TEST(AudioFile, UnnormalisedFloatSamplesAreRefused) {
  TempDir dir;
  const auto path = dir.path() / "huge.wav";
  std::vector<float> x(100, 0.25f);
  x[7] = 1e30f;
  ASSERT_TRUE(write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 16000, x));
  expect_error([&] { load_audio(path, 16000); }, ErrorCode::kInvalidArgument,
               {path.string(), "sample 7 is 1e+30", "not normalised", "[-1, 1]"});
  // Clipped but normalised audio (a little over 1) is served as it is.
  x[7] = 1.5f;
  ASSERT_TRUE(write_audio_file(path, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 16000, x));
  EXPECT_EQ(load_audio(path, 16000).samples[7], 1.5f);
}

// A WAV cut short: the data chunk's size in the header is the whole
// recording's, the bytes stop half way. Written by hand (44-byte PCM header).
TEST(AudioFile, TruncatedWavIsRefusedAndPlaceholdersAreNot) {
  TempDir dir;
  const auto whole = dir.path() / "whole.wav";
  ASSERT_TRUE(
      write_audio_file(whole, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 16000, speechband_tones_16k()));
  const std::string bytes = read_bytes(whole);
  const auto cut = dir.path() / "cut.wav";
  write_bytes(cut, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { load_audio(cut, 16000); }, ErrorCode::kCorruptFile,
               {cut.string(), "truncated", "declares 32000 bytes", "1 s", "re-create"});
  expect_error([&] { load_audio_from_memory(bytes.substr(0, bytes.size() / 2), "body", {}); },
               ErrorCode::kCorruptFile, {"body", "truncated"});
  // A streaming writer's placeholder size (0xFFFFFFFF) is not a truncation.
  std::string placeholder = bytes;
  const size_t data = placeholder.find("data");
  ASSERT_NE(data, std::string::npos);
  placeholder.replace(data + 4, 4, std::string(4, '\xff'));
  const auto streamed = dir.path() / "streamed.wav";
  write_bytes(streamed, placeholder);
  EXPECT_EQ(load_audio(streamed, 16000).samples.size(), 16000u);
}

TEST(AudioFile, OptionsAreValidated) {
  AudioLoadOptions options;
  options.target_sample_rate = -1;
  expect_error([&] { options.validate(); }, ErrorCode::kInvalidArgument, {"target_sample_rate"});
  options = {};
  options.require_sample_rate = true;  // nothing to require
  expect_error([&] { options.validate(); }, ErrorCode::kInvalidArgument,
               {"require_sample_rate", "target_sample_rate"});
  options = {};
  options.max_duration_seconds = 0;
  expect_error([&] { options.validate(); }, ErrorCode::kInvalidArgument, {"max_duration_seconds"});
  options.max_duration_seconds = NAN;
  expect_error([&] { options.validate(); }, ErrorCode::kInvalidArgument, {"max_duration_seconds"});
  // load_audio validates before touching the file.
  expect_error([&] { load_audio("/nonexistent.wav", options); }, ErrorCode::kInvalidArgument,
               {"max_duration_seconds"});
  EXPECT_EQ(AudioLoadOptions{}.dump(),
            "target_sample_rate=0 require_sample_rate=false max_duration_seconds=7200");
}

}  // namespace
}  // namespace oasr
