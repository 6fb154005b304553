// safetensors: reading (mmap, zero-copy CPU tensors) and atomic writing.
// The header is validated completely before any tensor data is touched; a
// corrupt or truncated file is refused with an oasr::Error (kCorruptFile)
// naming the file and the defect.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr::io {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  size_t data_begin;  // byte range inside the data section
  size_t data_end;
};

// One .safetensors file, memory-mapped read-only (PROT_READ, MAP_PRIVATE).
// Tensors returned by get() borrow the mapping (the mapping lives as long as
// any of them); their bytes are read-only, so clone() one before writing to
// it. A tensor whose bytes are not aligned for its dtype inside the file is
// copied instead of borrowed. The file must not be truncated while it is
// mapped (reading a vanished page raises SIGBUS); the atomic writer below
// replaces files by rename, which is safe. Errors: a missing file is
// kNotFound, an unreadable one kIo, a malformed or truncated one
// kCorruptFile, a dtype that safetensors defines but oasr does not serve
// (F64, BOOL, ...) kUnsupported.
class SafeTensorsFile {
 public:
  static SafeTensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const;
  // Names in file order (sorted by data offset).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // kNotFound names the file
  const std::vector<TensorInfo>& infos() const;
  const std::map<std::string, std::string>& metadata() const;  // "__metadata__"
  Tensor get(const std::string& name) const;                   // zero-copy CPU tensor
  size_t file_size() const;
  // Byte offset of the data section inside the file (8 + header length).
  size_t data_section_offset() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Writes `tensors` (any device; copied to host) to `path` atomically: a
// temporary file in the same directory, fsync, then rename. Names are
// written in the given order, with consecutive data offsets; the header is
// padded with spaces so the data section starts at a multiple of 8 bytes.
// Refused before anything is written (kInvalidArgument): an undefined tensor,
// an empty or duplicate name, the reserved name "__metadata__", text that is
// not UTF-8. On any failure the temporary file is removed and an existing
// file at `path` is left as it was.
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A checkpoint made of one file or of shards listed by a
// `*.safetensors.index.json` ({"weight_map": {name: shard_file}}). Opening a
// directory finds `model.safetensors` or, failing that,
// `model.safetensors.index.json`. Shard files are named relative to the
// index's folder and each is opened once. Every weight_map entry must be
// found in its shard; a shard tensor the weight map does not mention is
// served too, unless two shards hold it (ambiguous: refused).
class SafeTensorsCheckpoint {
 public:
  static SafeTensorsCheckpoint open(const std::filesystem::path& path);

  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;
  // The files that make up the checkpoint (one, or each shard once).
  std::vector<std::filesystem::path> files() const;

  // The path that was opened, and the index file (empty for a single file).
  const std::filesystem::path& path() const;
  const std::filesystem::path& index_path() const;
  // The opened files, in the order of files().
  const std::vector<SafeTensorsFile>& mapped_files() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace oasr::io
