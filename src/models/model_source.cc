#include "models/model_source.h"

#include "core/error.h"

namespace oasr::models {

const char* to_string(CheckpointFormat format) {
  return format == CheckpointFormat::kNative ? "native" : "wenet";
}

OrderedTensorSource::OrderedTensorSource(std::vector<std::pair<std::string, Tensor>> tensors)
    : tensors_(std::move(tensors)) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const bool inserted = index_.emplace(tensors_[i].first, i).second;
    OASR_CHECK(inserted, kInvalidArgument, "tensor '", tensors_[i].first, "' is given twice");
  }
}

std::vector<std::string> OrderedTensorSource::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

const Tensor& OrderedTensorSource::at(const std::string& name) const {
  const auto found = index_.find(name);
  OASR_CHECK(found != index_.end(), kNotFound, "no tensor named '", name, "'");
  return tensors_[found->second].second;
}

}  // namespace oasr::models
