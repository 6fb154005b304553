// What bounds the pickle machine's work by the size of its input (internal
// to io/): a budget for the values it copies and the nodes it walks, the
// cycle check a container insertion makes, and dict key lookup by hash.
// Without them a small pickle could make the reader allocate or loop
// without bound (a memo'd value copied again and again, a dict of many
// keys searched linearly), or build a container that holds itself, which
// shared ownership never frees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "io/pickle.h"

namespace oasr::io::pickle::detail {

class WorkBudget {
 public:
  // Every value and byte the input can spell directly, with room for the
  // copies and walks a real checkpoint needs (a few per value).
  explicit WorkBudget(size_t input_bytes) : total_(64 * uint64_t{input_bytes} + (1u << 20)) {}

  // False when `units` more would exceed the budget.
  bool charge(uint64_t units) {
    if (units > total_ - used_) return false;
    used_ += units;
    return true;
  }
  uint64_t total() const { return total_; }

 private:
  uint64_t total_;
  uint64_t used_ = 0;
};

enum class Reach { kNo, kYes, kOverBudget };

// Whether `target` is `from` or a value `from` holds (through items and
// dict entries, at any depth). Charges one unit per value visited.
Reach reaches(const ValueRef& from, const Value* target, WorkBudget& budget);

// dict[key] = value with Python's == on the key kinds a data dict uses
// (None, bool, int, float, str, bytes); other keys are equal only to
// themselves. An index per dict finds a key in constant time.
class DictWriter {
 public:
  void set(const ValueRef& dict, ValueRef key, ValueRef value);

 private:
  struct Index {
    ValueRef dict;  // kept alive, so its address names no other dict
    size_t indexed = 0;
    std::unordered_multimap<uint64_t, size_t> by_hash;  // key hash -> entry
  };
  std::unordered_map<const Value*, Index> indexes_;
};

}  // namespace oasr::io::pickle::detail
