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

// One .safetensors file, memory-mapped. Tensors returned by get() borrow the
// mapping (the mapping lives as long as any of them).
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
  Tensor get(const std::string& name) const;  // zero-copy CPU tensor
  size_t file_size() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Writes `tensors` (any device; copied to host) to `path` atomically: a
// temporary file in the same directory, fsync, then rename. Names are
// written in the given order.
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A checkpoint made of one file or of shards listed by a
// `*.safetensors.index.json` ({"weight_map": {name: shard_file}}). Opening a
// directory finds `model.safetensors` or `model.safetensors.index.json`.
class SafeTensorsCheckpoint {
 public:
  static SafeTensorsCheckpoint open(const std::filesystem::path& path);

  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;
  // The files that make up the checkpoint (one, or each shard once).
  std::vector<std::filesystem::path> files() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace oasr::io
