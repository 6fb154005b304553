#include "layers/paged_kv_cache.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "ops/kv_fp8.h"
#include "ops/write_slots.h"

namespace oasr::layers {

PagedKvCache::PagedKvCache(const Layout& layout) : layout_(layout) {
  OASR_CHECK(layout.layers > 0 && layout.heads > 0 && layout.head_dim > 0 &&
                 layout.block_size > 0 && layout.blocks > 0,
             kInvalidArgument,
             "paged KV cache: layers, heads, head_dim, block_size and blocks must all be "
             "positive, got layers=",
             layout.layers, " heads=", layout.heads, " head_dim=", layout.head_dim,
             " block_size=", layout.block_size, " blocks=", layout.blocks);
  OASR_CHECK(layout.blocks <= INT32_MAX, kInvalidArgument, "paged KV cache: ", layout.blocks,
             " blocks do not fit the int32 block table");
  OASR_CHECK(
      layout.dtype == DType::kF32 || layout.dtype == DType::kF16 || layout.dtype == DType::kBF16,
      kUnsupported, "paged KV cache: storage dtype ", dtype_name(layout.dtype),
      " is not served (float32, float16 or bfloat16: the served dtype)");
  const Shape shape = {layout.layers, layout.blocks, layout.block_size, layout.heads,
                       layout.head_dim};
  const DType stored = layout.fp8 ? DType::kU8 : layout.dtype;
  keys_ = Tensor::empty(shape, stored, layout.device);
  values_ = Tensor::empty(shape, stored, layout.device);
  if (layout.fp8) {
    const Shape scale_shape = {layout.layers, layout.blocks, layout.block_size, layout.heads, 1};
    key_scales_ = Tensor::empty(scale_shape, DType::kF32, layout.device);
    value_scales_ = Tensor::empty(scale_shape, DType::kF32, layout.device);
  }
  holders_.assign(static_cast<size_t>(layout.blocks), 0);
  free_.resize(static_cast<size_t>(layout.blocks));
  for (size_t i = 0; i < free_.size(); ++i) {
    free_[i] = static_cast<int32_t>(layout.blocks - 1 - static_cast<int64_t>(i));
  }
}

int64_t PagedKvCache::bytes() const {
  int64_t total = static_cast<int64_t>(keys_.nbytes() + values_.nbytes());
  if (layout_.fp8) total += static_cast<int64_t>(key_scales_.nbytes() + value_scales_.nbytes());
  return total;
}

PagedKvCache::SequenceId PagedKvCache::open() {
  const SequenceId id = next_id_++;
  sequences_.emplace(id, Sequence{});
  return id;
}

PagedKvCache::Sequence& PagedKvCache::find(SequenceId sequence, const char* what) {
  auto it = sequences_.find(sequence);
  OASR_CHECK(it != sequences_.end(), kInvalidArgument, "paged KV cache ", what, ": sequence ",
             sequence, " is not open");
  return it->second;
}

const PagedKvCache::Sequence& PagedKvCache::find(SequenceId sequence, const char* what) const {
  auto it = sequences_.find(sequence);
  OASR_CHECK(it != sequences_.end(), kInvalidArgument, "paged KV cache ", what, ": sequence ",
             sequence, " is not open");
  return it->second;
}

void PagedKvCache::give_back(std::span<const int32_t> blocks) {
  for (const int32_t block : blocks) {
    if (--holders_[static_cast<size_t>(block)] == 0) free_.push_back(block);
  }
  // Lowest index first again: descending order, so back() is the lowest.
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

void PagedKvCache::release(SequenceId sequence) {
  Sequence& s = find(sequence, "release");
  OASR_CHECK(
      std::find(step_sequences_.begin(), step_sequences_.end(), sequence) == step_sequences_.end(),
      kInvalidArgument, "paged KV cache release: sequence ", sequence,
      " is in the step in progress; commit or roll it back first");
  give_back(s.blocks);
  sequences_.erase(sequence);
}

PagedKvCache::SequenceId PagedKvCache::fork(SequenceId source) {
  OASR_CHECK(!in_step(), kInvalidArgument,
             "paged KV cache fork: a step is in progress; commit or roll it back first");
  const Sequence& from = find(source, "fork");
  const int64_t used = from.length % layout_.block_size;  // tokens in a partial last block
  OASR_CHECK(used == 0 || !free_.empty(), kOutOfMemory,
             "paged KV cache fork: no free block for the copy of sequence ", source,
             "'s last block (", layout_.blocks, " blocks, all held)");
  Sequence copy{from.blocks, from.length};
  if (used > 0) {
    const int32_t partial = copy.blocks.back();
    const int32_t own = free_.back();
    free_.pop_back();
    copy.blocks.back() = own;
    holders_[static_cast<size_t>(own)] = 1;
    std::vector<int64_t> slots(static_cast<size_t>(used));
    for (int64_t i = 0; i < used; ++i) slots[static_cast<size_t>(i)] = own * layout_.block_size + i;
    const Tensor to = Tensor::from_vector(slots, {used}).to(layout_.device);
    std::vector<const Tensor*> pools = {&keys_, &values_};
    if (layout_.fp8) pools.insert(pools.end(), {&key_scales_, &value_scales_});
    for (const Tensor* pool : pools) {
      for (int64_t l = 0; l < layout_.layers; ++l) {
        const Tensor rows = slot_rows(*pool, l);
        ops::write_slots(rows.narrow(0, int64_t{partial} * layout_.block_size, used), rows, to);
      }
    }
  }
  const size_t shared = copy.blocks.size() - (used > 0 ? 1 : 0);  // the copy is its own
  for (size_t i = 0; i < shared; ++i) ++holders_[static_cast<size_t>(copy.blocks[i])];
  const SequenceId id = next_id_++;
  sequences_.emplace(id, std::move(copy));
  return id;
}

int64_t PagedKvCache::length(SequenceId sequence) const {
  return find(sequence, "length").length;
}

int64_t PagedKvCache::blocks_needed(std::span<const SequenceId> sequences, int64_t n) const {
  int64_t need = 0;
  for (const SequenceId id : sequences) {
    const Sequence& s = find(id, "blocks_needed");
    need += std::max<int64_t>(0, blocks_for(s.length + n) - static_cast<int64_t>(s.blocks.size()));
  }
  return need;
}

void PagedKvCache::begin_step(std::span<const SequenceId> sequences, int64_t n) {
  OASR_CHECK(!in_step(), kInvalidArgument,
             "paged KV cache: a step is in progress; commit or roll it back first");
  OASR_CHECK(!sequences.empty() && n >= 1, kInvalidArgument,
             "paged KV cache: a step needs at least one sequence and one token, got ",
             sequences.size(), " sequences of ", n, " tokens");
  std::unordered_set<SequenceId> seen;
  for (const SequenceId id : sequences) {
    find(id, "begin_step");
    OASR_CHECK(seen.insert(id).second, kInvalidArgument, "paged KV cache: sequence ", id,
               " appears twice in one step");
  }
  const int64_t need = blocks_needed(sequences, n);
  OASR_CHECK(need <= free_blocks(), kOutOfMemory, "paged KV cache: the step needs ", need,
             " more blocks of ", layout_.block_size, " tokens but ", free_blocks(), " of ",
             layout_.blocks,
             " are free; finish or release a sequence first (or serve fewer at once)");
  const auto rows = static_cast<int64_t>(sequences.size());
  int64_t widest = 0;
  step_max_keys_ = 0;
  // From here the step holds its sequences: a throw below rolls it back.
  step_sequences_.assign(sequences.begin(), sequences.end());
  step_tokens_ = n;
  try {
    for (const SequenceId id : sequences) {
      Sequence& s = sequences_.at(id);
      while (static_cast<int64_t>(s.blocks.size()) < blocks_for(s.length + n)) {
        s.blocks.push_back(free_.back());
        step_taken_.push_back(free_.back());
        holders_[static_cast<size_t>(free_.back())] = 1;
        free_.pop_back();
      }
      widest = std::max<int64_t>(widest, static_cast<int64_t>(s.blocks.size()));
      step_max_keys_ = std::max(step_max_keys_, s.length + n);
    }
    std::vector<int64_t> slots(static_cast<size_t>(rows * n));
    std::vector<int64_t> positions(static_cast<size_t>(rows * n));
    std::vector<int32_t> table(static_cast<size_t>(rows * widest), 0);
    std::vector<int32_t> counts(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const Sequence& s = sequences_.at(sequences[static_cast<size_t>(r)]);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = s.length + i;
        positions[static_cast<size_t>(r * n + i)] = p;
        slots[static_cast<size_t>(r * n + i)] =
            int64_t{s.blocks[static_cast<size_t>(p / layout_.block_size)]} * layout_.block_size +
            p % layout_.block_size;
      }
      std::copy(s.blocks.begin(), s.blocks.end(), table.begin() + r * widest);
      counts[static_cast<size_t>(r)] = static_cast<int32_t>(s.length + n);
    }
    const Device device = layout_.device;
    step_slots_ = Tensor::from_vector(slots, {rows * n}).to(device);
    step_positions_ = Tensor::from_vector(positions, {rows, n}).to(device);
    step_table_ = Tensor::from_vector(table, {rows, widest}).to(device);
    step_counts_ = Tensor::from_vector(counts, {rows}).to(device);
  } catch (...) {
    rollback();
    throw;
  }
  layer_appended_.assign(static_cast<size_t>(layout_.layers), 0);
}

Tensor PagedKvCache::slot_rows(const Tensor& pool, int64_t layer) const {
  const int64_t inner = pool.size(4);
  const int64_t slots = layout_.blocks * layout_.block_size;
  return pool.select(0, layer).view({slots, layout_.heads * inner});
}

void PagedKvCache::append(int64_t layer, const Tensor& keys, const Tensor& values) {
  OASR_CHECK(in_step(), kInvalidArgument, "paged KV cache append: no step in progress");
  OASR_CHECK(layer >= 0 && layer < layout_.layers, kInvalidArgument,
             "paged KV cache append: layer ", layer, " is outside 0..", layout_.layers - 1);
  OASR_CHECK(layer_appended_[static_cast<size_t>(layer)] == 0, kInvalidArgument,
             "paged KV cache append: layer ", layer, " already appended this step");
  const auto rows = static_cast<int64_t>(step_sequences_.size());
  const int64_t width = layout_.heads * layout_.head_dim;
  for (const Tensor* x : {&keys, &values}) {
    OASR_CHECK(x->defined() && x->numel() == rows * step_tokens_ * width && x->size(0) == rows &&
                   x->dtype() == layout_.dtype && x->device() == layout_.device,
               kInvalidArgument, "paged KV cache append: keys and values must be [", rows, ", ",
               step_tokens_, ", ", layout_.heads, ", ", layout_.head_dim, "] ",
               dtype_name(layout_.dtype), " on the pool's device, got ",
               x->defined() ? x->str() : std::string("undefined"));
  }
  const int64_t tokens = rows * step_tokens_;
  const std::pair<const Tensor*, std::pair<Tensor*, Tensor*>> writes[] = {
      {&keys, {&keys_, &key_scales_}}, {&values, {&values_, &value_scales_}}};
  for (const auto& [x, store] : writes) {
    if (!layout_.fp8) {
      ops::write_slots(x->contiguous().view({tokens, width}), slot_rows(*store.first, layer),
                       step_slots_);
      continue;
    }
    const Tensor source = layout_.device.is_cpu() ? x->to(DType::kF32) : *x;
    const ops::Pow2E4m3 q = ops::quantize_pow2_e4m3(
        source.contiguous().view({tokens * layout_.heads, layout_.head_dim}));
    ops::write_slots(q.codes.view({tokens, width}), slot_rows(*store.first, layer), step_slots_);
    ops::write_slots(q.scales.view({tokens, layout_.heads}), slot_rows(*store.second, layer),
                     step_slots_);
  }
  layer_appended_[static_cast<size_t>(layer)] = 1;
}

ops::CachedAttentionInputs PagedKvCache::attention_inputs(int64_t layer, const Tensor& query,
                                                          bool causal) const {
  OASR_CHECK(in_step() && layer >= 0 && layer < layout_.layers &&
                 layer_appended_[static_cast<size_t>(layer)] == 1,
             kInvalidArgument, "paged KV cache: layer ", layer,
             " has not appended this step's tokens");
  ops::CachedAttentionInputs in;
  in.query = query;
  in.keys = keys_.select(0, layer);
  in.values = values_.select(0, layer);
  if (layout_.fp8) {
    in.key_scales = key_scales_.select(0, layer);
    in.value_scales = value_scales_.select(0, layer);
  }
  in.key_count = step_max_keys_;
  in.causal = causal;
  in.block_table = step_table_;
  in.block_size = layout_.block_size;
  in.key_counts = step_counts_;
  return in;
}

void PagedKvCache::commit() {
  OASR_CHECK(in_step(), kInvalidArgument, "paged KV cache commit: no step in progress");
  for (int64_t l = 0; l < layout_.layers; ++l) {
    OASR_CHECK(layer_appended_[static_cast<size_t>(l)] == 1, kInvalidArgument,
               "paged KV cache commit: layer ", l, " did not append this step's tokens");
  }
  for (const SequenceId id : step_sequences_) sequences_.at(id).length += step_tokens_;
  step_sequences_.clear();
  step_taken_.clear();
  step_max_keys_ = 0;
}

void PagedKvCache::rollback() {
  if (!in_step()) return;
  for (const SequenceId id : step_sequences_) {
    Sequence& s = sequences_.at(id);
    s.blocks.resize(static_cast<size_t>(blocks_for(s.length)));
  }
  give_back(step_taken_);
  step_sequences_.clear();
  step_taken_.clear();
  step_max_keys_ = 0;
}

}  // namespace oasr::layers
