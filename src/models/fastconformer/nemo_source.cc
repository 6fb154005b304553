#include "models/fastconformer/nemo_source.h"

#include <sentencepiece_processor.h>

#include <functional>

#include "core/error.h"
#include "io/posix_file.h"
#include "io/tar_archive.h"
#include "io/torch_checkpoint.h"

namespace oasr::models {
namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigMember = "model_config.yaml";
constexpr const char* kWeightsMember = "model_weights.ckpt";
constexpr const char* kWindowName = "preprocessor.featurizer.window";
constexpr const char* kFilterbankName = "preprocessor.featurizer.fb";

// The members NemoSource needs, from the archive or the directory.
struct Members {
  std::string config_text;
  fs::path config_file;  // named in messages
  io::TorchStateDict state;
  std::function<std::string(const std::string& name)> read_member;
};

Members read_archive(const fs::path& path) {
  auto tar = std::make_shared<const io::TarArchive>(io::read_tar_archive(path));
  // Owns the table, so read_member may outlive this call.
  const auto need = [tar, path](const std::string& name) -> const io::TarMember& {
    const io::TarMember* member = tar->find(name);
    OASR_CHECK(member != nullptr, kCorruptFile, path.string(), ": the .nemo archive has no ", name,
               " (NeMo's save_to writes ", kConfigMember, ", ", kWeightsMember,
               " and the tokenizer files)");
    return *member;
  };
  Members m;
  m.config_file = path / kConfigMember;
  m.config_text = tar->read(need(kConfigMember));
  const io::TarMember& weights = need(kWeightsMember);
  m.state = io::load_torch_state_dict(path, weights.offset, weights.size);
  m.read_member = [tar, need](const std::string& name) { return tar->read(need(name)); };
  return m;
}

Members read_directory(const fs::path& dir) {
  const auto need = [dir](const std::string& name) {
    const fs::path file = dir / name;
    OASR_CHECK(fs::is_regular_file(file), kNotFound, dir.string(), ": no ", name,
               " in the unpacked NeMo directory");
    return file;
  };
  Members m;
  m.config_file = need(kConfigMember);
  m.config_text = io::read_file_bytes(m.config_file);
  m.state = io::load_torch_state_dict(need(kWeightsMember));
  m.read_member = [need](const std::string& name) { return io::read_file_bytes(need(name)); };
  return m;
}

Tensor take_float_buffer(io::TorchStateDict& state, const char* name, const Shape& shape,
                         const fs::path& path) {
  for (auto it = state.tensors.begin(); it != state.tensors.end(); ++it) {
    if (it->first != name) continue;
    const Tensor t = it->second;
    OASR_CHECK(t.shape() == shape && dtype_is_floating(t.dtype()), kCorruptFile, path.string(),
               ": ", name, " is ", t.str(), "; the config needs float", shape_str(shape));
    state.tensors.erase(it);
    return t.to(DType::kF32).contiguous();
  }
  OASR_THROW(kCorruptFile, path.string(), ": the weights have no ", name, " (the preprocessor's ",
             name == std::string(kWindowName) ? "window" : "mel filterbank",
             ", which NeMo saves with the model)");
}

}  // namespace

bool is_nemo_checkpoint(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return fs::is_regular_file(path / kConfigMember, ec) &&
           fs::is_regular_file(path / kWeightsMember, ec);
  }
  if (!fs::is_regular_file(path, ec) || path.extension() != ".nemo") return false;
  try {
    const io::TarArchive tar = io::read_tar_archive(path);
    return tar.find(kConfigMember) != nullptr;
  } catch (const std::exception&) {
    return false;
  }
}

NemoSource load_nemo_checkpoint(const fs::path& path) {
  OASR_CHECK(fs::exists(path), kNotFound, path.string(), ": no such file or directory");
  Members m = fs::is_directory(path) ? read_directory(path) : read_archive(path);
  NemoSource source;
  source.path = path;
  source.config = parse_fastconformer_config(m.config_text, m.config_file);
  const audio::NemoMelOptions& mel = source.config.preprocessor;
  source.mel_window = take_float_buffer(m.state, kWindowName, {mel.win_length}, path);
  source.mel_filterbank =
      take_float_buffer(m.state, kFilterbankName, {1, mel.features, mel.frequency_bins()}, path);
  source.notes = m.state.converted;

  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status =
      processor->LoadFromSerializedProto(m.read_member(source.config.tokenizer_model));
  OASR_CHECK(status.ok(), kCorruptFile, path.string(), ": ", source.config.tokenizer_model,
             " is not a SentencePiece model: ", status.ToString());
  const auto& vocabulary = source.config.vocabulary;
  OASR_CHECK(processor->GetPieceSize() == static_cast<int>(vocabulary.size()), kCorruptFile,
             path.string(), ": the tokenizer ", source.config.tokenizer_model, " has ",
             processor->GetPieceSize(), " pieces but ", source.config.vocabulary_key, " has ",
             vocabulary.size(), "; the tokenizer does not belong to this model");
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    OASR_CHECK(processor->IdToPiece(static_cast<int>(i)) == vocabulary[i], kCorruptFile,
               path.string(), ": tokenizer piece ", i, " is '",
               processor->IdToPiece(static_cast<int>(i)), "' but ", source.config.vocabulary_key,
               "[", i, "] is '", vocabulary[i], "'; the tokenizer does not belong to this model");
  }
  source.tokenizer = std::move(processor);
  source.weights = std::make_shared<OrderedTensorSource>(std::move(m.state.tensors));
  return source;
}

}  // namespace oasr::models
