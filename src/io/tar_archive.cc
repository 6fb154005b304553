#include "io/tar_archive.h"

#include <array>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace oasr::io {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBlock = 512;

using Block = std::array<char, kBlock>;

std::string field_text(const Block& block, size_t offset, size_t length) {
  const char* begin = block.data() + offset;
  const void* nul = std::memchr(begin, '\0', length);
  return std::string(begin, nul ? static_cast<const char*>(nul) - begin : length);
}

// A numeric header field: octal digits padded with spaces / NULs, or (GNU and
// pax-era writers, for values past 8 GiB) base-256 with the top bit set.
bool parse_number(const Block& block, size_t offset, size_t length, uint64_t& value) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(block.data() + offset);
  value = 0;
  if ((bytes[0] & 0x80) != 0) {
    for (size_t i = 1; i < length; ++i) {
      if (value >> 56) return false;
      value = (value << 8) | bytes[i];
    }
    return (bytes[0] & 0x7f) == 0;
  }
  size_t i = 0;
  while (i < length && bytes[i] == ' ') ++i;
  bool any = false;
  for (; i < length && bytes[i] >= '0' && bytes[i] <= '7'; ++i) {
    if (value >> 60) return false;
    value = value * 8 + (bytes[i] - '0');
    any = true;
  }
  for (; i < length; ++i) {
    if (bytes[i] != ' ' && bytes[i] != '\0') return false;
  }
  return any;
}

bool all_zero(const Block& block) {
  for (char c : block) {
    if (c != 0) return false;
  }
  return true;
}

// POSIX sums the header's bytes as unsigned with the checksum field read as
// spaces; some historic writers summed signed chars, which is accepted too.
bool checksum_matches(const Block& block) {
  uint64_t stored = 0;
  if (!parse_number(block, 148, 8, stored)) return false;
  int64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= 148 && i < 156;
    unsigned_sum += in_field ? ' ' : static_cast<unsigned char>(block[i]);
    signed_sum += in_field ? ' ' : static_cast<signed char>(block[i]);
  }
  return static_cast<int64_t>(stored) == unsigned_sum || static_cast<int64_t>(stored) == signed_sum;
}

// pax extended header records: "<length> <key>=<value>\n", repeated.
void apply_pax_records(const std::string& records, const std::string& where, std::string& path,
                       uint64_t& size, bool& has_size) {
  size_t at = 0;
  while (at < records.size()) {
    const size_t space = records.find(' ', at);
    OASR_CHECK(space != std::string::npos, kCorruptFile, where, ": malformed pax record");
    const uint64_t length = std::stoull(records.substr(at, space - at));
    OASR_CHECK(length > space - at && at + length <= records.size(), kCorruptFile, where,
               ": pax record length out of range");
    const std::string record = records.substr(space + 1, at + length - space - 2);
    const size_t equals = record.find('=');
    OASR_CHECK(equals != std::string::npos, kCorruptFile, where, ": pax record without '='");
    const std::string key = record.substr(0, equals);
    const std::string value = record.substr(equals + 1);
    if (key == "path") path = value;
    if (key == "size") {
      size = std::stoull(value);
      has_size = true;
    }
    at += length;
  }
}

void refuse_compressed(const fs::path& path, const Block& first) {
  const auto* b = reinterpret_cast<const unsigned char*>(first.data());
  const char* kind = nullptr;
  if (b[0] == 0x1f && b[1] == 0x8b) kind = "gzip";
  if (b[0] == 'B' && b[1] == 'Z' && b[2] == 'h') kind = "bzip2";
  if (b[0] == 0xfd && b[1] == '7' && b[2] == 'z' && b[3] == 'X' && b[4] == 'Z') kind = "xz";
  if (kind == nullptr) return;
  OASR_THROW(kUnsupported, path.string(), ": a ", kind,
             "-compressed tar archive; oasr reads the uncompressed tar that NeMo writes since "
             "1.x, or the unpacked directory: mkdir DIR && tar xf ",
             path.string(), " -C DIR, then pass DIR");
}

std::string strip_dot_slash(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  return name;
}

}  // namespace

const TarMember* TarArchive::find(const std::string& name) const {
  for (const TarMember& member : members) {
    if (!member.regular) continue;
    if (member.name == name) return &member;
    if (member.name.size() > name.size() &&
        member.name.compare(member.name.size() - name.size(), name.size(), name) == 0 &&
        member.name[member.name.size() - name.size() - 1] == '/') {
      return &member;
    }
  }
  return nullptr;
}

std::string TarArchive::read(const TarMember& member) const {
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open the file for reading");
  std::string bytes(member.size, '\0');
  in.seekg(static_cast<std::streamoff>(member.offset));
  in.read(bytes.data(), static_cast<std::streamsize>(member.size));
  OASR_CHECK(static_cast<uint64_t>(in.gcount()) == member.size, kCorruptFile, path.string(),
             ": member '", member.name, "' is cut short");
  return bytes;
}

TarArchive read_tar_archive(const fs::path& path) {
  OASR_CHECK(fs::exists(path), kNotFound, path.string(), ": no such file");
  OASR_CHECK(!fs::is_directory(path), kInvalidArgument, path.string(),
             ": is a directory, not a tar archive");
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  OASR_CHECK(!ec, kIo, path.string(), ": cannot read the file size: ", ec.message());
  std::ifstream in(path, std::ios::binary);
  OASR_CHECK(in.good(), kIo, path.string(), ": cannot open the file for reading");

  TarArchive archive;
  archive.path = path;
  uint64_t at = 0;
  std::string pending_path;  // from a pax 'x' or GNU 'L' header, for the next member
  uint64_t pending_size = 0;
  bool pending_has_size = false;
  Block block{};
  while (at + kBlock <= file_size) {
    in.seekg(static_cast<std::streamoff>(at));
    in.read(block.data(), kBlock);
    OASR_CHECK(in.gcount() == static_cast<std::streamsize>(kBlock), kIo, path.string(),
               ": read failed at byte ", at);
    if (at == 0) refuse_compressed(path, block);
    if (all_zero(block)) break;  // the end-of-archive marker
    const std::string where = path.string() + " (tar header at byte " + std::to_string(at) + ")";
    OASR_CHECK(checksum_matches(block), kCorruptFile, where,
               at == 0 ? ": not a tar archive (no valid header at its start)"
                       : ": header checksum mismatch; the archive is damaged");
    uint64_t size = 0;
    OASR_CHECK(parse_number(block, 124, 12, size), kCorruptFile, where, ": bad size field");
    const char type = block[156];
    if (type != 'x' && type != 'L' && pending_has_size) size = pending_size;
    const uint64_t data = at + kBlock;
    OASR_CHECK(data + size <= file_size, kCorruptFile, where, ": member of ", size,
               " bytes runs past the end of the file (", file_size, " bytes); truncated?");
    if (type == 'x' || type == 'L') {
      std::string payload(size, '\0');
      in.read(payload.data(), static_cast<std::streamsize>(size));
      if (type == 'L') {
        pending_path = payload.substr(0, payload.find('\0'));
      } else {
        apply_pax_records(payload, where, pending_path, pending_size, pending_has_size);
      }
    } else if (type != 'g') {
      TarMember member;
      std::string name = field_text(block, 0, 100);
      const std::string magic = field_text(block, 257, 6);
      const std::string prefix = magic.rfind("ustar", 0) == 0 ? field_text(block, 345, 155) : "";
      if (!prefix.empty()) name = prefix + "/" + name;
      if (!pending_path.empty()) name = pending_path;
      member.name = strip_dot_slash(name);
      member.offset = data;
      member.size = size;
      member.regular = type == '0' || type == '\0' || type == '7';
      archive.members.push_back(std::move(member));
      pending_path.clear();
      pending_has_size = false;
    }
    at = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  OASR_CHECK(!archive.members.empty(), kCorruptFile, path.string(),
             ": a tar archive with no members");
  return archive;
}

}  // namespace oasr::io
