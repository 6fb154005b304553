// Reading PyTorch state dicts written by torch.save (the zip format of
// PyTorch >= 1.6) without PyTorch: libzip opens the archive, a data-only
// pickle reader (io/pickle.h) rebuilds the dict, and each tensor is read from
// its storage entry "<archive>/data/<key>".
//
// Accepted: a dict / OrderedDict of name -> tensor, or a dict that wraps one
// under "model" or "state_dict" (other entries, such as an optimizer state or
// an epoch counter, are read and ignored). Tensors come back on the CPU,
// contiguous, in the file's order; views that share a storage share its bytes
// when they are contiguous and are copied otherwise. Element types keep their
// dtype where oasr has it; the others are converted and listed in
// `converted`: float64 -> float32 (rounded to nearest even), int16 -> int32,
// bool -> uint8 (0 / 1).
//
// Errors: a missing file is kNotFound; anything malformed (not a zip, no
// data.pkl, an unknown pickle opcode, a storage entry that is missing or too
// short, a tensor that reaches outside its storage, a state-dict value that
// is not a tensor) is kCorruptFile naming the file and the defect; a
// well-formed file this reader does not serve (big-endian data, the legacy
// pre-1.6 format, a TorchScript archive, an unknown storage type) is
// kUnsupported with what to do instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace oasr::io {

struct TorchStateDict {
  std::filesystem::path path;
  // Name -> tensor, in the order the state dict holds them.
  std::vector<std::pair<std::string, Tensor>> tensors;
  // "" for a flat state dict, else the key it was found under ("model").
  std::string container_key;
  // One line per tensor whose dtype changed: "name: float64 -> float32".
  std::vector<std::string> converted;

  const Tensor* find(const std::string& name) const;  // nullptr when absent
};

TorchStateDict load_torch_state_dict(const std::filesystem::path& path);
// The same for a torch.save archive stored as `size` bytes of `path` from
// byte `offset` (a member of an uncompressed tar, io/tar_archive.h), read in
// place; std::nullopt size reads to the end of the file. Messages name
// `path`.
TorchStateDict load_torch_state_dict(const std::filesystem::path& path, uint64_t offset,
                                     std::optional<uint64_t> size);

}  // namespace oasr::io
