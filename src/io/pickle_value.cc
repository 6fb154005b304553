// The pickle value tree: constructors, descriptions, and a release that
// does not recurse.
#include <utility>
#include <vector>

#include "io/pickle.h"

namespace oasr::io::pickle {

// Released recursively, a deep value would overflow the stack: a pickle can
// add a level of nesting per byte (NONE, then TUPLE1 after TUPLE1). So the
// outermost release queues the children of every value it frees and frees
// them one at a time; a release inside it only adds to the queue.
Value::~Value() {
  thread_local std::vector<ValueRef>* queue = nullptr;
  std::vector<ValueRef> own;
  std::vector<ValueRef>& pending = queue != nullptr ? *queue : own;
  for (ValueRef& item : items) pending.push_back(std::move(item));
  for (auto& [key, value] : entries) {
    pending.push_back(std::move(key));
    pending.push_back(std::move(value));
  }
  if (queue != nullptr) return;
  queue = &own;
  while (!own.empty()) {
    ValueRef next = std::move(own.back());
    own.pop_back();
    next.reset();  // may queue more
  }
  queue = nullptr;
}

ValueRef make_value(Kind kind) {
  auto value = std::make_shared<Value>();
  value->kind = kind;
  return value;
}

ValueRef make_string(std::string text) {
  ValueRef value = make_value(Kind::kString);
  value->text = std::move(text);
  return value;
}

ValueRef make_int(int64_t integer) {
  ValueRef value = make_value(Kind::kInt);
  value->integer = integer;
  return value;
}

ValueRef make_external(std::shared_ptr<void> payload, std::string type) {
  ValueRef value = make_value(Kind::kExternal);
  value->external = std::move(payload);
  value->external_type = std::move(type);
  return value;
}

std::string describe(const Value& value) {
  switch (value.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return value.boolean ? "bool True" : "bool False";
    case Kind::kInt:
      return "int " + std::to_string(value.integer);
    case Kind::kBigInt:
      return "int wider than 64 bits";
    case Kind::kFloat:
      return "float " + std::to_string(value.real);
    case Kind::kString: {
      const std::string shown =
          value.text.size() > 40 ? value.text.substr(0, 40) + "..." : value.text;
      return "str '" + shown + "'";
    }
    case Kind::kBytes:
      return "bytes of length " + std::to_string(value.text.size());
    case Kind::kTuple:
      return "tuple of " + std::to_string(value.items.size());
    case Kind::kList:
      return "list of " + std::to_string(value.items.size());
    case Kind::kDict:
      return "dict of " + std::to_string(value.entries.size());
    case Kind::kSet:
      return "set of " + std::to_string(value.items.size());
    case Kind::kGlobal:
      return "global " + value.text;
    case Kind::kObject:
      return "object built by unsupported global " + value.text;
    case Kind::kExternal:
      return value.external_type;
  }
  return "unknown value";
}

}  // namespace oasr::io::pickle
