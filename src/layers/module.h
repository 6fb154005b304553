// Module tree: every layer holds its parameters under their checkpoint names
// and knows its module path ("encoder.encoders.3.feed_forward.w_1"), so
// quantization and loading can address any layer of any architecture by path
// or glob. A parameter is a slot declared with the shape and dtype the model
// expects; loading fills the slot after checking every name, shape and dtype
// first, and reports all defects at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace oasr {

// What a parameter slot accepts from a checkpoint.
enum class DTypePolicy {
  kFloating,  // any of float32/float16/bfloat16; converted to the slot's dtype
  kExact,     // exactly the slot's dtype (quantized weights, scales, indices)
};

struct ParameterSlot {
  Shape shape;
  DType dtype = DType::kF32;
  DTypePolicy policy = DTypePolicy::kFloating;
  bool required = true;  // an optional slot may be absent from a checkpoint
  Tensor value;          // undefined until loaded or initialised
};

// Where load_state_dict reads from: names with dtype/shape available before
// any data is read (a safetensors checkpoint, or tensors in memory).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::vector<std::string> names() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual DType dtype(const std::string& name) const = 0;
  virtual Shape shape(const std::string& name) const = 0;
  virtual Tensor get(const std::string& name) const = 0;
};

class MapTensorSource final : public TensorSource {
 public:
  explicit MapTensorSource(std::map<std::string, Tensor> tensors) : tensors_(std::move(tensors)) {}
  std::vector<std::string> names() const override;
  bool contains(const std::string& name) const override { return tensors_.count(name) > 0; }
  DType dtype(const std::string& name) const override { return tensors_.at(name).dtype(); }
  Shape shape(const std::string& name) const override { return tensors_.at(name).shape(); }
  Tensor get(const std::string& name) const override { return tensors_.at(name); }

 private:
  std::map<std::string, Tensor> tensors_;
};

// Tensors in memory, served in the order they were given (a state dict's
// order), with an index for lookups.
class OrderedTensorSource final : public TensorSource {
 public:
  explicit OrderedTensorSource(std::vector<std::pair<std::string, Tensor>> tensors);
  std::vector<std::string> names() const override;
  bool contains(const std::string& name) const override { return index_.count(name) > 0; }
  DType dtype(const std::string& name) const override { return at(name).dtype(); }
  Shape shape(const std::string& name) const override { return at(name).shape(); }
  Tensor get(const std::string& name) const override { return at(name); }

 private:
  const Tensor& at(const std::string& name) const;
  std::vector<std::pair<std::string, Tensor>> tensors_;
  std::map<std::string, size_t> index_;
};

struct LoadOptions {
  bool strict = true;  // unexpected checkpoint names are errors
  std::string prefix;  // checkpoint names are prefix + module path
  Device device = Device::cpu();
};

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }
  // Dotted path from the root ("" for the root itself).
  const std::string& path() const { return path_; }

  // Parameters and children, in registration order.
  ParameterSlot& register_parameter(const std::string& name, Shape shape, DType dtype = DType::kF32,
                                    DTypePolicy policy = DTypePolicy::kFloating,
                                    bool required = true);
  // Re-declares an existing slot with another shape, dtype or policy (its
  // value is dropped), keeping its place in the state-dict order:
  // quantization turns a full-precision weight slot into an 8-bit one.
  ParameterSlot& redeclare_parameter(const std::string& name, Shape shape, DType dtype,
                                     DTypePolicy policy, bool required = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    attach_child(name, child);
    return child;
  }

  bool has_parameter(const std::string& name) const;
  ParameterSlot& slot(const std::string& name);
  const ParameterSlot& slot(const std::string& name) const;
  // The loaded value; refuses an unloaded required slot by its full path.
  const Tensor& param(const std::string& name) const;
  void set_param(const std::string& name, Tensor value);  // shape/dtype checked

  std::vector<std::pair<std::string, Module*>> children() const;
  Module* child(const std::string& name) const;  // nullptr when absent

  // Full-path listings of this subtree (the root's own entry is "" / itself).
  std::vector<std::pair<std::string, ParameterSlot*>> named_parameters();
  std::vector<std::pair<std::string, Module*>> named_modules();
  // Modules whose path matches an fnmatch glob ("encoder.encoders.0.*").
  std::vector<Module*> select_modules(const std::string& glob);

  // Fills every slot in this subtree from `source`. Before reading any data
  // it checks all names, shapes and dtypes and throws one oasr::Error
  // (kInvalidArgument) listing every missing, unexpected (strict mode),
  // wrong-shape and wrong-dtype name.
  void load_state_dict(const TensorSource& source, const LoadOptions& options = {});

  // Casts floating-policy parameters to `dtype` (exact-policy slots, e.g.
  // quantized weights and scales, keep theirs); moves all to `device`.
  void to(DType dtype);
  void to(Device device);

 private:
  void attach_child(const std::string& name, std::shared_ptr<Module> child);
  void set_path(const std::string& path);
  std::string full_name(const std::string& local) const;

  std::string type_name_;
  std::string path_;
  std::vector<std::pair<std::string, ParameterSlot>> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// fnmatch semantics as Python's fnmatch.fnmatchcase: '*' also matches '.'.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace oasr
