#include "io/pickle_graph.h"

#include <functional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace oasr::io::pickle::detail {

namespace {

bool holds_values(const Value& value) {
  return !value.items.empty() || !value.entries.empty();
}

bool same_key(const Value& a, const Value& b) {
  if (&a == &b) return true;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return a.boolean == b.boolean;
    case Kind::kInt:
      return a.integer == b.integer;
    case Kind::kFloat:
      return a.real == b.real;
    case Kind::kString:
    case Kind::kBytes:
      return a.text == b.text;
    default:
      return false;
  }
}

// Equal keys (same_key) hash equally.
uint64_t key_hash(const Value& key) {
  const uint64_t kind = static_cast<uint64_t>(key.kind) * 0x9E3779B97F4A7C15ull;
  switch (key.kind) {
    case Kind::kNone:
      return kind;
    case Kind::kBool:
      return kind ^ static_cast<uint64_t>(key.boolean);
    case Kind::kInt:
      return kind ^ std::hash<int64_t>{}(key.integer);
    case Kind::kFloat:  // -0.0 == 0.0
      return kind ^ std::hash<double>{}(key.real == 0.0 ? 0.0 : key.real);
    case Kind::kString:
    case Kind::kBytes:
      return kind ^ std::hash<std::string_view>{}(key.text);
    default:
      return kind ^ std::hash<const void*>{}(&key);
  }
}

}  // namespace

Reach reaches(const ValueRef& from, const Value* target, WorkBudget& budget) {
  if (from.get() == target) return Reach::kYes;
  if (!holds_values(*from)) return Reach::kNo;
  std::vector<const Value*> pending{from.get()};
  std::unordered_set<const Value*> seen{from.get()};
  while (!pending.empty()) {
    const Value* value = pending.back();
    pending.pop_back();
    if (!budget.charge(1)) return Reach::kOverBudget;
    const auto visit = [&](const ValueRef& child) {
      if (child.get() == target) return true;
      if (holds_values(*child) && seen.insert(child.get()).second) pending.push_back(child.get());
      return false;
    };
    for (const ValueRef& item : value->items) {
      if (visit(item)) return Reach::kYes;
    }
    for (const auto& [key, item] : value->entries) {
      if (visit(key) || visit(item)) return Reach::kYes;
    }
  }
  return Reach::kNo;
}

void DictWriter::set(const ValueRef& dict, ValueRef key, ValueRef value) {
  Index& index = indexes_[dict.get()];
  if (index.dict == nullptr) index.dict = dict;
  // Entries added since the last call (a dict built by a hook or copied by
  // a builtin call) are indexed first.
  for (; index.indexed < dict->entries.size(); ++index.indexed) {
    index.by_hash.emplace(key_hash(*dict->entries[index.indexed].first), index.indexed);
  }
  const uint64_t hash = key_hash(*key);
  const auto [begin, end] = index.by_hash.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    auto& entry = dict->entries[it->second];
    if (same_key(*entry.first, *key)) {
      entry.second = std::move(value);
      return;
    }
  }
  dict->entries.emplace_back(std::move(key), std::move(value));
  index.by_hash.emplace(hash, index.indexed++);
}

}  // namespace oasr::io::pickle::detail
