#include "layers/module.h"

#include <fnmatch.h>

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace oasr {

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::vector<std::string> MapTensorSource::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) out.push_back(name);
  return out;
}

namespace {
bool valid_local_name(const std::string& name) {
  return !name.empty() && name.find('.') == std::string::npos;
}
}  // namespace

std::string Module::full_name(const std::string& local) const {
  return path_.empty() ? local : path_ + "." + local;
}

ParameterSlot& Module::register_parameter(const std::string& name, Shape shape, DType dtype,
                                          DTypePolicy policy, bool required) {
  OASR_CHECK(valid_local_name(name), kInvalidArgument, "parameter name '", name,
             "' must be non-empty and contain no '.'");
  OASR_CHECK(!has_parameter(name) && child(name) == nullptr, kInvalidArgument, "'", full_name(name),
             "' is registered twice");
  ParameterSlot slot;
  slot.shape = std::move(shape);
  slot.dtype = dtype;
  slot.policy = policy;
  slot.required = required;
  parameters_.emplace_back(name, std::move(slot));
  return parameters_.back().second;
}

ParameterSlot& Module::redeclare_parameter(const std::string& name, Shape shape, DType dtype,
                                           DTypePolicy policy, bool required) {
  ParameterSlot& s = slot(name);
  s = ParameterSlot{};
  s.shape = std::move(shape);
  s.dtype = dtype;
  s.policy = policy;
  s.required = required;
  return s;
}

void Module::attach_child(const std::string& name, std::shared_ptr<Module> child_module) {
  OASR_CHECK(valid_local_name(name), kInvalidArgument, "module name '", name,
             "' must be non-empty and contain no '.'");
  OASR_CHECK(child_module != nullptr, kInvalidArgument, "null module registered as '",
             full_name(name), "'");
  OASR_CHECK(!has_parameter(name) && child(name) == nullptr, kInvalidArgument, "'", full_name(name),
             "' is registered twice");
  child_module->set_path(full_name(name));
  children_.emplace_back(name, std::move(child_module));
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [name, c] : children_) c->set_path(full_name(name));
}

bool Module::has_parameter(const std::string& name) const {
  return std::any_of(parameters_.begin(), parameters_.end(),
                     [&](const auto& p) { return p.first == name; });
}

ParameterSlot& Module::slot(const std::string& name) {
  for (auto& [n, s] : parameters_) {
    if (n == name) return s;
  }
  OASR_THROW(kNotFound, type_name_, " '", path_, "' has no parameter '", name, "'");
}

const ParameterSlot& Module::slot(const std::string& name) const {
  return const_cast<Module*>(this)->slot(name);
}

const Tensor& Module::param(const std::string& name) const {
  const ParameterSlot& s = slot(name);
  OASR_CHECK(s.value.defined() || !s.required, kInvalidArgument, "parameter '", full_name(name),
             "' was never loaded");
  return s.value;
}

void Module::set_param(const std::string& name, Tensor value) {
  ParameterSlot& s = slot(name);
  OASR_CHECK(value.shape() == s.shape, kInvalidArgument, "parameter '", full_name(name),
             "' expects shape ", shape_str(s.shape), ", got ", shape_str(value.shape()));
  OASR_CHECK(value.dtype() == s.dtype, kInvalidArgument, "parameter '", full_name(name),
             "' expects ", dtype_name(s.dtype), ", got ", dtype_name(value.dtype()));
  s.value = std::move(value);
}

std::vector<std::pair<std::string, Module*>> Module::children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const auto& [name, c] : children_) out.emplace_back(name, c.get());
  return out;
}

Module* Module::child(const std::string& name) const {
  for (const auto& [n, c] : children_) {
    if (n == name) return c.get();
  }
  return nullptr;
}

std::vector<std::pair<std::string, ParameterSlot*>> Module::named_parameters() {
  std::vector<std::pair<std::string, ParameterSlot*>> out;
  for (auto& [name, s] : parameters_) out.emplace_back(full_name(name), &s);
  for (auto& [name, c] : children_) {
    auto sub = c->named_parameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{path_, this}};
  for (auto& [name, c] : children_) {
    auto sub = c->named_modules();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Module*> Module::select_modules(const std::string& glob) {
  std::vector<Module*> out;
  for (auto& [path, m] : named_modules()) {
    if (glob_match(glob, path)) out.push_back(m);
  }
  return out;
}

namespace {
bool dtype_accepted(const ParameterSlot& slot, DType found) {
  if (slot.policy == DTypePolicy::kExact) return found == slot.dtype;
  return found == DType::kF32 || found == DType::kF16 || found == DType::kBF16;
}

std::string accepted_dtypes(const ParameterSlot& slot) {
  if (slot.policy == DTypePolicy::kExact) return dtype_name(slot.dtype);
  return "float32, float16 or bfloat16";
}

// The first element of a contiguous host float tensor whose exponent bits
// are all ones (NaN or infinity), read from the bits so float16 / bfloat16
// need no conversion; -1 when every element is finite or the dtype is not
// a float format.
int64_t first_non_finite(const Tensor& t) {
  const auto scan = [&](auto bits_type, uint32_t exponent_mask) -> int64_t {
    using Bits = decltype(bits_type);
    const Bits* bits = static_cast<const Bits*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if ((static_cast<uint32_t>(bits[i]) & exponent_mask) == exponent_mask) return i;
    }
    return -1;
  };
  switch (t.dtype()) {
    case DType::kF32:
      return scan(uint32_t{}, 0x7f800000u);
    case DType::kF16:
      return scan(uint16_t{}, 0x7c00u);
    case DType::kBF16:
      return scan(uint16_t{}, 0x7f80u);
    default:
      return -1;
  }
}
}  // namespace

void Module::load_state_dict(const TensorSource& source, const LoadOptions& options) {
  auto params = named_parameters();
  std::vector<std::string> missing;
  std::vector<std::string> wrong;  // shape or dtype, with details
  std::vector<std::string> expected_names;
  for (auto& [path, slot] : params) {
    const std::string key = options.prefix + path;
    expected_names.push_back(key);
    if (!source.contains(key)) {
      if (slot->required) missing.push_back(key);
      continue;
    }
    const Shape shape = source.shape(key);
    const DType dtype = source.dtype(key);
    if (shape != slot->shape) {
      wrong.push_back(key + ": shape " + shape_str(shape) + ", expected " + shape_str(slot->shape));
    }
    if (!dtype_accepted(*slot, dtype)) {
      wrong.push_back(key + ": dtype " + dtype_name(dtype) + ", expected " +
                      accepted_dtypes(*slot));
    }
  }
  std::vector<std::string> unexpected;
  if (options.strict) {
    std::sort(expected_names.begin(), expected_names.end());
    for (const auto& name : source.names()) {
      if (!options.prefix.empty() && name.rfind(options.prefix, 0) != 0) continue;
      if (!std::binary_search(expected_names.begin(), expected_names.end(), name)) {
        unexpected.push_back(name);
      }
    }
  }
  if (!missing.empty() || !unexpected.empty() || !wrong.empty()) {
    std::ostringstream msg;
    // Key paths, not class names: the user knows the checkpoint's keys.
    msg << "the checkpoint does not fit the model" << (path_.empty() ? "" : " at '" + path_ + "'")
        << ": " << missing.size() << " missing, " << unexpected.size() << " unexpected, "
        << wrong.size() << " with the wrong shape or dtype";
    auto list = [&](const char* title, const std::vector<std::string>& names) {
      if (names.empty()) return;
      msg << "\n  " << title << ":";
      for (const auto& n : names) msg << "\n    " << n;
    };
    list("missing", missing);
    list("unexpected", unexpected);
    list("wrong shape/dtype", wrong);
    OASR_THROW(kInvalidArgument, msg.str());
  }
  for (auto& [path, slot] : params) {
    const std::string key = options.prefix + path;
    if (!source.contains(key)) continue;
    Tensor value = source.get(key);
    // A NaN or infinite weight would surface later as broken output blamed
    // on the audio; refuse it here, naming the tensor.
    if (value.device().is_cpu()) {
      const Tensor host = value.contiguous();
      const int64_t bad = first_non_finite(host);
      OASR_CHECK(bad < 0, kCorruptFile, "checkpoint tensor '", key, "' ", shape_str(host.shape()),
                 " holds a NaN or infinity (element ", bad,
                 "); the checkpoint is corrupt or its training diverged: re-export it");
    }
    if (value.dtype() != slot->dtype) value = value.to(slot->dtype);
    slot->value = value.to(options.device).contiguous();
  }
}

void Module::to(DType dtype) {
  OASR_CHECK(dtype_is_floating(dtype) && dtype != DType::kF8E4M3, kInvalidArgument, "Module::to(",
             dtype_name(dtype),
             "): the served dtype must be float32, float16 or "
             "bfloat16");
  for (auto& [path, slot] : named_parameters()) {
    if (slot->policy != DTypePolicy::kFloating) continue;
    slot->dtype = dtype;
    if (slot->value.defined() && slot->value.dtype() != dtype) {
      const Device device = slot->value.device();
      slot->value = slot->value.to(Device::cpu()).to(dtype).to(device);
    }
  }
}

void Module::to(Device device) {
  for (auto& [path, slot] : named_parameters()) {
    if (slot->value.defined()) slot->value = slot->value.to(device);
  }
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

}  // namespace oasr
