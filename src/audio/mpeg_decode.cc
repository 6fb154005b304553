#include "audio/mpeg_decode.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

// libmpg123's header picks its off_t-suffixed names from _FILE_OFFSET_BITS;
// on 64-bit Linux off_t is 64 bits either way.
#include <mpg123.h>

namespace oasr::audio::detail {

namespace {

// libmpg123's global tables: filled once (mpg123.h: call it in a
// non-parallel context; later calls do nothing).
bool init_library() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = mpg123_init() == MPG123_OK; });
  return ok;
}

// The size of an ID3v2 tag starting at `header` (10 bytes), footer included.
uint64_t id3v2_size(const unsigned char* header) {
  const uint64_t body = (uint64_t{header[6]} & 0x7f) << 21 | (uint64_t{header[7]} & 0x7f) << 14 |
                        (uint64_t{header[8]} & 0x7f) << 7 | (uint64_t{header[9]} & 0x7f);
  return 10 + body + ((header[5] & 0x10) != 0 ? 10 : 0);
}

// An MPEG audio frame header (ISO 11172-3 / 13818-3): 11 sync bits, a
// version other than "reserved", a layer other than "reserved", a bitrate
// index other than "bad" and a sample rate index other than "reserved".
bool is_frame_header(const unsigned char* h) {
  if (h[0] != 0xff || (h[1] & 0xe0) != 0xe0) return false;
  const int version = (h[1] >> 3) & 3;
  const int layer = (h[1] >> 1) & 3;
  const int bitrate = h[2] >> 4;
  const int rate = (h[2] >> 2) & 3;
  return version != 1 && layer != 0 && bitrate != 15 && rate != 3;
}

}  // namespace

bool looks_like_mpeg_audio(const ReadAt& read_at) {
  unsigned char head[10] = {};
  if (read_at(0, head, sizeof(head)) != sizeof(head)) return false;
  if (std::memcmp(head, "ID3", 3) == 0) {
    // A tag also leads some other containers' files rarely; the frame after
    // it decides.
    unsigned char frame[4] = {};
    return read_at(id3v2_size(head), frame, sizeof(frame)) == sizeof(frame) &&
           is_frame_header(frame);
  }
  return is_frame_header(head);
}

// The byte source libmpg123 reads through (its reader callbacks).
struct MpegDecoder::Source {
  const ReadAt* read_at;
  uint64_t size;
  uint64_t position = 0;

  static ssize_t read(void* self, void* out, size_t count) {
    auto* source = static_cast<Source*>(self);
    const size_t got = (*source->read_at)(source->position, out, count);
    // Nothing read before the end is a read error, not the end of the stream
    // (ReadAt reports both as 0): libmpg123 then fails the decode.
    if (got == 0 && count > 0 && source->position < source->size) return -1;
    source->position += got;
    return static_cast<ssize_t>(got);
  }
  static off_t seek(void* self, off_t offset, int whence) {
    auto* source = static_cast<Source*>(self);
    int64_t base = 0;
    if (whence == SEEK_CUR) base = static_cast<int64_t>(source->position);
    if (whence == SEEK_END) base = static_cast<int64_t>(source->size);
    const int64_t target = base + static_cast<int64_t>(offset);
    if (target < 0 || static_cast<uint64_t>(target) > source->size) return -1;
    source->position = static_cast<uint64_t>(target);
    return static_cast<off_t>(target);
  }
};

std::unique_ptr<MpegDecoder> MpegDecoder::open(const ReadAt& read_at, uint64_t size) {
  if (!init_library()) return nullptr;
  int status = MPG123_OK;
  mpg123_handle* handle = mpg123_new(nullptr, &status);
  if (handle == nullptr) return nullptr;
  std::unique_ptr<MpegDecoder> decoder(new MpegDecoder());
  decoder->handle_ = handle;  // the destructor closes and deletes it from here on
  decoder->source_ = std::make_unique<Source>(Source{&read_at, size});
  mpg123_param(handle, MPG123_ADD_FLAGS, MPG123_QUIET, 0.0);
  mpg123_param(handle, MPG123_REMOVE_FLAGS, MPG123_AUTO_RESAMPLE, 0.0);
  mpg123_param(handle, MPG123_ADD_FLAGS, MPG123_FORCE_FLOAT | MPG123_GAPLESS, 0.0);
  mpg123_param(handle, MPG123_ADD_FLAGS, MPG123_NO_FRANKENSTEIN, 0.0);
  if (mpg123_replace_reader_handle(handle, &Source::read, &Source::seek, nullptr) != MPG123_OK ||
      mpg123_open_handle(handle, decoder->source_.get()) != MPG123_OK) {
    return nullptr;
  }
  long rate = 0;
  int channels = 0;
  int encoding = 0;
  // MPG123_FORCE_FLOAT makes the negotiated output float32; read() relies
  // on it. A stream that later changes its rate or channel count fails
  // read() (MPG123_NEW_FORMAT) rather than being resampled.
  if (mpg123_getformat(handle, &rate, &channels, &encoding) != MPG123_OK || rate <= 0 ||
      channels <= 0 || encoding != MPG123_ENC_FLOAT_32) {
    return nullptr;
  }
  off_t length = mpg123_length(handle);
  if (length <= 0 && mpg123_scan(handle) == MPG123_OK) length = mpg123_length(handle);
  mpg123_frameinfo info{};
  if (mpg123_info(handle, &info) != MPG123_OK || info.layer < 1 || info.layer > 3) return nullptr;
  decoder->sample_rate_ = static_cast<int>(rate);
  decoder->channels_ = channels;
  decoder->frames_ = length >= 0 ? static_cast<int64_t>(length) : -1;
  static const char* const kLayers[] = {"", "MPEG Layer I", "MPEG Layer II", "MPEG Layer III"};
  decoder->format_ = std::string("MPEG-1/2 Audio, ") + kLayers[info.layer];
  return decoder;
}

MpegDecoder::~MpegDecoder() {
  auto* handle = static_cast<mpg123_handle*>(handle_);
  if (handle == nullptr) return;
  mpg123_close(handle);
  mpg123_delete(handle);
}

int64_t MpegDecoder::read(float* out, int64_t max_frames) {
  auto* handle = static_cast<mpg123_handle*>(handle_);
  size_t done = 0;
  const size_t bytes = static_cast<size_t>(max_frames) * static_cast<size_t>(channels_) * 4;
  const int status = mpg123_read(handle, out, bytes, &done);
  if (status == MPG123_OK || status == MPG123_DONE) {
    return static_cast<int64_t>(done / (sizeof(float) * static_cast<size_t>(channels_)));
  }
  error_ = status == MPG123_NEW_FORMAT ? "the stream changes its sample rate or channels midway"
                                       : mpg123_strerror(handle);
  return -1;
}

}  // namespace oasr::audio::detail
