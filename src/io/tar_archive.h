// The member table of an uncompressed tar archive (POSIX ustar, with the pax
// and GNU long-name extensions Python's tarfile writes), as byte ranges of
// the file. A NeMo checkpoint (.nemo) is such an archive around a torch.save
// zip; reading the zip in place at its offset (io/torch_checkpoint.h) keeps a
// multi-gigabyte checkpoint from being copied once more into memory, which a
// streaming reader (libarchive) cannot offer because it does not expose
// where a member's bytes lie.
//
// Errors: a missing file is kNotFound; a gzip / bzip2 / xz stream is
// kUnsupported (unpack it first; what to run is in the message); a header
// whose checksum does not match, a size field that is not a number, a member
// that runs past the end of the file, or a file that is no tar at all is
// kCorruptFile naming the file and the header's offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace oasr::io {

struct TarMember {
  std::string name;     // as stored, "./" prefixes removed
  uint64_t offset = 0;  // where the member's bytes start in the file
  uint64_t size = 0;
  bool regular = true;  // a regular file (directories and links are listed as false)
};

struct TarArchive {
  std::filesystem::path path;
  std::vector<TarMember> members;  // in archive order

  // The regular member called `name`, or whose name ends in "/" + name
  // (NeMo writes "./model_config.yaml"); nullptr when absent.
  const TarMember* find(const std::string& name) const;
  // The member's bytes (for small members: configs, tokenizers).
  std::string read(const TarMember& member) const;
};

TarArchive read_tar_archive(const std::filesystem::path& path);

}  // namespace oasr::io
