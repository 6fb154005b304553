#include "audio/riff_chunks.h"

#include <cstring>
#include <string_view>

#include "core/error.h"

namespace oasr::audio::detail {

namespace {

// A damaged file can make a walk long; a real WAV has a handful of chunks.
constexpr int kMaxChunks = 4096;

struct ChunkHeader {
  std::string id;
  uint64_t size = 0;
};

class ChunkReader {
 public:
  ChunkReader(const ReadAt& read_at, bool big_endian) : read_at_(read_at), big_(big_endian) {}

  bool header_at(uint64_t offset, ChunkHeader& out) const {
    unsigned char bytes[8];
    if (read_at_(offset, bytes, sizeof(bytes)) != sizeof(bytes)) return false;
    out.id.assign(reinterpret_cast<const char*>(bytes), 4);
    out.size = big_ ? (uint64_t{bytes[4]} << 24 | uint64_t{bytes[5]} << 16 |
                       uint64_t{bytes[6]} << 8 | bytes[7])
                    : (uint64_t{bytes[7]} << 24 | uint64_t{bytes[6]} << 16 |
                       uint64_t{bytes[5]} << 8 | bytes[4]);
    return true;
  }

 private:
  const ReadAt& read_at_;
  bool big_;
};

// A chunk id as a message shows it ("LIST", or hex for unprintable bytes).
std::string shown(const std::string& id) {
  std::string out;
  for (const unsigned char c : id) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The subchunks of a LIST chunk's body [begin, end) must stay inside it
// (an odd last subchunk may lack its pad byte).
void check_list(const ChunkReader& reader, uint64_t begin, uint64_t end, uint64_t list_offset,
                const std::string& label) {
  uint64_t offset = begin;
  for (int i = 0; i < kMaxChunks && offset + 8 <= end; ++i) {
    ChunkHeader sub;
    if (!reader.header_at(offset, sub)) return;
    OASR_CHECK(sub.size <= end - offset - 8, kCorruptFile, label, ": the '", shown(sub.id),
               "' entry at offset ", offset, " of the LIST chunk at offset ", list_offset,
               " declares ", sub.size, " bytes, but the LIST ends ", end - offset - 8,
               " bytes later: the file is damaged (re-create or re-encode it)");
    offset += 8 + sub.size + (sub.size & 1);
  }
}

}  // namespace

void refuse_overrunning_riff_chunks(const ReadAt& read_at, uint64_t file_size,
                                    const std::string& label) {
  char magic[12];
  if (read_at(0, magic, sizeof(magic)) != sizeof(magic)) return;
  const std::string_view riff(magic, 4);
  if (riff != "RIFF" && riff != "RIFX" && riff != "RF64") return;
  const ChunkReader reader(read_at, riff == "RIFX");
  uint64_t offset = 12;  // after "RIFF" <size> "WAVE" (or another form type)
  for (int i = 0; i < kMaxChunks && offset + 8 <= file_size; ++i) {
    ChunkHeader chunk;
    if (!reader.header_at(offset, chunk)) return;
    const uint64_t room = file_size - offset - 8;
    if (chunk.id == "LIST") {
      OASR_CHECK(chunk.size <= room, kCorruptFile, label, ": the LIST chunk at offset ", offset,
                 " declares ", chunk.size, " bytes, but the file ends ", room,
                 " bytes later: the file is damaged (re-create or re-encode it)");
      if (chunk.size >= 4) check_list(reader, offset + 12, offset + 8 + chunk.size, offset, label);
    } else if (chunk.size > room) {
      // A placeholder data size, or trailing bytes that are no chunk:
      // libsndfile stops its chunk walk there too.
      return;
    }
    offset += 8 + chunk.size + (chunk.size & 1);
  }
}

}  // namespace oasr::audio::detail
