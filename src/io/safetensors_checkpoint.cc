// SafeTensorsCheckpoint: one .safetensors file, or shards tied together by a
// Hugging Face style `*.safetensors.index.json`.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"

namespace oasr::io {

namespace {

constexpr const char* kSingleFileName = "model.safetensors";
constexpr const char* kIndexFileName = "model.safetensors.index.json";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// weight_map of an index file: tensor name -> shard file name, both strings.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index_path) {
  const nlohmann::json index = read_json_file(index_path);
  const std::string label = index_path.string();
  OASR_CHECK(index.is_object(), kCorruptFile, label, ": the index is a JSON ", index.type_name(),
             ", expected an object with a \"weight_map\"");
  const auto it = index.find("weight_map");
  OASR_CHECK(it != index.end(), kCorruptFile, label, ": the index has no \"weight_map\"");
  OASR_CHECK(it->is_object(), kCorruptFile, label,
             ": \"weight_map\" must be an object {tensor name: shard file}, got a JSON ",
             it->type_name());
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : it->items()) {
    OASR_CHECK(shard.is_string() && !shard.get<std::string>().empty(), kCorruptFile, label,
               ": weight_map entry for tensor '", name,
               "' must be a non-empty shard file name, got ", shard.dump());
    weight_map.emplace(name, shard.get<std::string>());
  }
  return weight_map;
}

}  // namespace

struct SafeTensorsCheckpoint::Impl {
  std::filesystem::path path;
  std::filesystem::path index_path;  // empty for a single file
  std::vector<SafeTensorsFile> files;
  std::vector<std::string> names;                    // listing order
  std::unordered_map<std::string, size_t> location;  // name -> index into files

  std::string label() const { return path.string(); }

  void add(const std::string& name, size_t file_index) {
    location.emplace(name, file_index);
    names.push_back(name);
  }

  void open_single(const std::filesystem::path& file_path) {
    files.push_back(SafeTensorsFile::open(file_path));
    for (const std::string& name : files[0].names()) add(name, 0);
  }

  void open_sharded(const std::filesystem::path& index_file);
};

void SafeTensorsCheckpoint::Impl::open_sharded(const std::filesystem::path& index_file) {
  index_path = index_file;
  const std::string index_label = index_file.string();
  const std::map<std::string, std::string> weight_map = read_weight_map(index_file);

  // Each shard once, in file-name order (model-00001-of-00003, ...).
  std::map<std::string, size_t> shard_position;
  for (const auto& [name, shard] : weight_map) shard_position.emplace(shard, 0);
  const std::filesystem::path folder = index_file.parent_path();
  for (auto& [shard, position] : shard_position) {
    position = files.size();
    try {
      files.push_back(SafeTensorsFile::open(folder / shard));
    } catch (const Error& e) {
      throw Error(e.code(), detail::concat(index_label, ": shard '", shard,
                                           "' cannot be opened: ", e.what()));
    }
  }
  for (const auto& [name, shard] : weight_map) {
    OASR_CHECK(files[shard_position.at(shard)].contains(name), kCorruptFile, index_label,
               ": weight_map puts tensor '", name, "' in shard '", shard,
               "', which holds no such tensor");
  }

  // Tensors a shard holds beyond the weight map are served too, as long as
  // exactly one shard has them (otherwise which one is meant is unknowable).
  std::unordered_map<std::string, size_t> unmapped_home;
  for (size_t i = 0; i < files.size(); ++i) {
    for (const std::string& name : files[i].names()) {
      if (weight_map.count(name) != 0) continue;
      const auto [it, inserted] = unmapped_home.emplace(name, i);
      OASR_CHECK(inserted, kCorruptFile, index_label, ": tensor '", name, "' is in shards '",
                 files[it->second].path().filename().string(), "' and '",
                 files[i].path().filename().string(),
                 "' and the weight_map does not say which one to use");
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    for (const std::string& name : files[i].names()) {
      const auto mapped = weight_map.find(name);
      const bool served_here = mapped != weight_map.end() ? shard_position.at(mapped->second) == i
                                                          : unmapped_home.at(name) == i;
      if (served_here) add(name, i);
    }
  }
}

SafeTensorsCheckpoint SafeTensorsCheckpoint::open(const std::filesystem::path& path) {
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  OASR_CHECK(status.type() != std::filesystem::file_type::not_found, kNotFound, path.string(),
             ": no such file or directory");
  if (status.type() == std::filesystem::file_type::directory) {
    // Same preference as Hugging Face transformers: the single file first.
    if (std::filesystem::exists(path / kSingleFileName)) {
      impl->open_single(path / kSingleFileName);
    } else if (std::filesystem::exists(path / kIndexFileName)) {
      impl->open_sharded(path / kIndexFileName);
    } else {
      OASR_THROW(kNotFound, path.string(), ": the directory holds neither ", kSingleFileName,
                 " nor ", kIndexFileName, "; is it a checkpoint directory?");
    }
  } else if (ends_with(path.filename().string(), ".json")) {
    impl->open_sharded(path);
  } else {
    impl->open_single(path);
  }
  SafeTensorsCheckpoint checkpoint;
  checkpoint.impl_ = std::move(impl);
  return checkpoint;
}

std::vector<std::string> SafeTensorsCheckpoint::names() const {
  return impl_->names;
}

bool SafeTensorsCheckpoint::contains(const std::string& name) const {
  return impl_->location.count(name) != 0;
}

const TensorInfo& SafeTensorsCheckpoint::info(const std::string& name) const {
  const auto it = impl_->location.find(name);
  OASR_CHECK(it != impl_->location.end(), kNotFound, impl_->label(), ": no tensor named '", name,
             "' in the checkpoint (", impl_->names.size(), " tensors)");
  return impl_->files[it->second].info(name);
}

Tensor SafeTensorsCheckpoint::get(const std::string& name) const {
  info(name);  // refuses an unknown name with the checkpoint's path
  return impl_->files[impl_->location.at(name)].get(name);
}

std::vector<std::filesystem::path> SafeTensorsCheckpoint::files() const {
  std::vector<std::filesystem::path> paths;
  for (const SafeTensorsFile& file : impl_->files) paths.push_back(file.path());
  return paths;
}

const std::filesystem::path& SafeTensorsCheckpoint::path() const {
  return impl_->path;
}

const std::filesystem::path& SafeTensorsCheckpoint::index_path() const {
  return impl_->index_path;
}

const std::vector<SafeTensorsFile>& SafeTensorsCheckpoint::mapped_files() const {
  return impl_->files;
}

}  // namespace oasr::io
