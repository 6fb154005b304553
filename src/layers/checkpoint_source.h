// A safetensors checkpoint (one file or shards) as a TensorSource, so
// Module::load_state_dict checks names/shapes/dtypes from the header alone.
#pragma once

#include "io/safetensors.h"
#include "layers/module.h"

namespace oasr {

class CheckpointTensorSource final : public TensorSource {
 public:
  explicit CheckpointTensorSource(io::SafeTensorsCheckpoint checkpoint)
      : checkpoint_(std::move(checkpoint)) {}
  std::vector<std::string> names() const override { return checkpoint_.names(); }
  bool contains(const std::string& name) const override { return checkpoint_.contains(name); }
  DType dtype(const std::string& name) const override { return checkpoint_.info(name).dtype; }
  Shape shape(const std::string& name) const override { return checkpoint_.info(name).shape; }
  Tensor get(const std::string& name) const override { return checkpoint_.get(name); }

 private:
  io::SafeTensorsCheckpoint checkpoint_;
};

}  // namespace oasr
