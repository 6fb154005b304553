// A Python pickle reader for data, not code: it rebuilds the value tree of a
// pickle (protocols 0-4, the opcodes PyTorch's torch.save and Python's pickle
// emit for plain data) without ever executing anything. A GLOBAL is only a
// name; calling it (REDUCE / NEWOBJ) asks a hook, and a call the hook does not
// know becomes an opaque object that remembers the callable's name, so a
// caller meets an unsupported class only if it actually uses that value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace oasr::io::pickle {

struct Value;
using ValueRef = std::shared_ptr<Value>;

enum class Kind {
  kNone,
  kBool,
  kInt,     // fits in int64
  kBigInt,  // an integer wider than 64 bits (its value is not kept)
  kFloat,
  kString,  // str (UTF-8)
  kBytes,   // bytes, or a protocol-0/1 byte string
  kTuple,
  kList,
  kDict,      // dict and collections.OrderedDict, in insertion order
  kSet,       // set and frozenset
  kGlobal,    // a module attribute named by GLOBAL / STACK_GLOBAL (not resolved)
  kObject,    // the result of calling a global the hooks did not know
  kExternal,  // a value built by a hook (e.g. a tensor); see `external`
};

// Containers are shared (pickle's memo hands out references, and a list may
// be filled after it was memoized), hence ValueRef everywhere.
struct Value {
  Value() = default;
  Value(const Value&) = default;
  Value(Value&&) = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) = default;
  ~Value();  // iterative: releasing a deeply nested value does not recurse

  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;             // kString / kBytes contents; kGlobal / kObject: "module.name"
  std::vector<ValueRef> items;  // tuple, list, set; object args
  std::vector<std::pair<ValueRef, ValueRef>> entries;  // dict, in insertion order
  std::shared_ptr<void> external;                      // kExternal payload
  std::string external_type;                           // kExternal: what the payload is
};

ValueRef make_value(Kind kind);
ValueRef make_string(std::string text);
ValueRef make_int(int64_t value);
ValueRef make_external(std::shared_ptr<void> payload, std::string type);

// "str 'abc'", "int 3", "tuple of 2", "object of class argparse.Namespace"...
std::string describe(const Value& value);

// What the reader cannot decide by itself.
struct Hooks {
  // BINPERSID / PERSID: turns a persistent id into a value. Unset: refused.
  std::function<ValueRef(const ValueRef& persistent_id)> persistent_load;
  // REDUCE / NEWOBJ on a global "module.name" with its argument tuple. Return
  // nullptr to fall back to the built-in handling (collections.OrderedDict,
  // set, frozenset, _codecs.encode) or, failing that, an opaque kObject.
  std::function<ValueRef(const std::string& global, const ValueRef& args)> call;
};

// Runs the pickle in `bytes` to its STOP and returns the result. `source`
// names the data in error messages ("model.pt: archive/data.pkl"). Throws
// oasr::Error(kCorruptFile) on an unknown opcode (with its byte offset), a
// truncated stream, a stack or memo misuse, or data left after STOP; hook
// errors propagate unchanged.
ValueRef unpickle(std::span<const uint8_t> bytes, const Hooks& hooks, const std::string& source);

}  // namespace oasr::io::pickle
