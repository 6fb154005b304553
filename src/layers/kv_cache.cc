#include "layers/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "core/error.h"
#include "ops/embedding.h"
#include "ops/kv_fp8.h"
#include "ops/step_tokens.h"

namespace oasr::layers {

KvCache::KvCache(const Layout& layout) : layout_(layout) {
  OASR_CHECK(layout.layers > 0 && layout.heads > 0 && layout.head_dim > 0 && layout.rows > 0 &&
                 layout.capacity_tokens > 0,
             kInvalidArgument,
             "KV cache: layers, heads, head_dim, rows and capacity_tokens must all be positive, "
             "got layers=",
             layout.layers, " heads=", layout.heads, " head_dim=", layout.head_dim,
             " rows=", layout.rows, " capacity_tokens=", layout.capacity_tokens);
  OASR_CHECK(
      layout.dtype == DType::kF32 || layout.dtype == DType::kF16 || layout.dtype == DType::kBF16,
      kUnsupported, "KV cache: storage dtype ", dtype_name(layout.dtype),
      " is not served (float32, float16 or bfloat16: the served dtype)");
  const Shape shape = {layout.layers, layout.rows, layout.capacity_tokens, layout.heads,
                       layout.head_dim};
  const DType stored = layout.fp8 ? DType::kU8 : layout.dtype;
  keys_ = Tensor::empty(shape, stored, layout.device);
  values_ = Tensor::empty(shape, stored, layout.device);
  if (layout.fp8) {
    const Shape scale_shape = {layout.layers, layout.rows, layout.capacity_tokens, layout.heads, 1};
    key_scales_ = Tensor::empty(scale_shape, DType::kF32, layout.device);
    value_scales_ = Tensor::empty(scale_shape, DType::kF32, layout.device);
  }
  layer_tokens_.assign(static_cast<size_t>(layout.layers), 0);
}

Tensor KvCache::layer_view(const Tensor& store, int64_t layer) const {
  const int64_t inner = store.size(4);
  const int64_t elements = layer_elements() / layout_.head_dim * inner;
  return store.view({-1})
      .narrow(0, layer * elements, elements)
      .view({layout_.rows, layout_.capacity_tokens, layout_.heads, inner});
}

Tensor KvCache::row_view(const Tensor& store, int64_t flat_row) const {
  const int64_t inner = store.size(4);
  const int64_t elements = row_elements() / layout_.head_dim * inner;
  return store.view({-1})
      .narrow(0, flat_row * elements, elements)
      .view({layout_.capacity_tokens, layout_.heads, inner});
}

std::vector<Tensor*> KvCache::stores() {
  if (layout_.fp8) return {&keys_, &values_, &key_scales_, &value_scales_};
  return {&keys_, &values_};
}

Tensor KvCache::served_tokens(const Tensor& store, const Tensor& scales, int64_t layer,
                              int64_t count) const {
  const Tensor tokens = layer_view(store, layer).narrow(1, 0, count);
  if (!layout_.fp8) return tokens;
  const Tensor codes = tokens.contiguous().view({-1, layout_.head_dim});
  const Tensor per_vector = layer_view(scales, layer).narrow(1, 0, count).contiguous().view({-1});
  return ops::dequantize_pow2_e4m3(codes, per_vector, layout_.dtype)
      .view({layout_.rows, count, layout_.heads, layout_.head_dim});
}

KvCache::Stored KvCache::stored(int64_t layer) const {
  check_layer(layer, "stored");
  Stored out{layer_view(keys_, layer), layer_view(values_, layer), Tensor(), Tensor()};
  if (layout_.fp8) {
    out.key_scales = layer_view(key_scales_, layer);
    out.value_scales = layer_view(value_scales_, layer);
  }
  return out;
}

int64_t KvCache::bytes() const {
  int64_t total = static_cast<int64_t>(keys_.nbytes() + values_.nbytes());
  if (layout_.fp8) total += static_cast<int64_t>(key_scales_.nbytes() + value_scales_.nbytes());
  return total;
}

void KvCache::check_layer(int64_t layer, const char* what) const {
  OASR_CHECK(layer >= 0 && layer < layout_.layers, kInvalidArgument, "KV cache ", what, ": layer ",
             layer, " is out of range (the cache has ", layout_.layers, " layers)");
}

int64_t KvCache::tokens(int64_t layer) const {
  check_layer(layer, "tokens");
  return layer_tokens_[static_cast<size_t>(layer)];
}

void KvCache::append(int64_t layer, const Tensor& keys, const Tensor& values,
                     const Tensor& past_tokens) {
  check_layer(layer, "append");
  const int64_t rows = layout_.rows;
  const int64_t width = token_elements();
  auto valid = [&](const Tensor& t) {
    if (!t.defined() || t.dtype() != layout_.dtype || t.device() != layout_.device || t.dim() < 3 ||
        t.size(0) != rows) {
      return false;
    }
    if (t.dim() == 3) return t.size(2) == width;
    return t.dim() == 4 && t.size(2) == layout_.heads && t.size(3) == layout_.head_dim;
  };
  OASR_CHECK(valid(keys) && valid(values) && keys.shape() == values.shape(), kInvalidArgument,
             "KV cache append (layer ", layer, "): keys and values must be ",
             dtype_name(layout_.dtype), " on ", layout_.device.str(), " [", rows, ", n, ",
             layout_.heads, ", ", layout_.head_dim, "] or [", rows, ", n, ", width,
             "] with the same shape, got keys ",
             keys.defined() ? keys.str() : std::string("undefined"), " and values ",
             values.defined() ? values.str() : std::string("undefined"));
  const int64_t n = keys.size(1);
  const int64_t start = layer_tokens_[static_cast<size_t>(layer)];
  OASR_CHECK(start + n <= layout_.capacity_tokens, kInvalidArgument, "KV cache is full: layer ",
             layer, " holds ", start, " tokens and ", n, " more would exceed its capacity of ",
             layout_.capacity_tokens,
             " tokens; create the cache with a larger capacity (or stop decoding earlier)");
  if (n == 0) return;
  if (past_tokens.defined() && !host_f32()) {
    OASR_CHECK(
        start == length_, kInternal, "KV cache append (layer ", layer,
        "): a position on the device stands for the committed length, but the layer already ",
        "holds ", start - length_, " uncommitted tokens");
    const Shape shape = {rows, n, layout_.heads, layout_.head_dim};
    if (layout_.fp8) {
      ops::quantize_pow2_e4m3_at(keys.reshape(shape), layer_view(keys_, layer),
                                 layer_view(key_scales_, layer), past_tokens);
      ops::quantize_pow2_e4m3_at(values.reshape(shape), layer_view(values_, layer),
                                 layer_view(value_scales_, layer), past_tokens);
    } else {
      ops::write_tokens_at(keys.reshape(shape), layer_view(keys_, layer), past_tokens);
      ops::write_tokens_at(values.reshape(shape), layer_view(values_, layer), past_tokens);
    }
    layer_tokens_[static_cast<size_t>(layer)] = start + n;
    return;
  }
  if (layout_.fp8) {
    const Shape shape = {rows, n, layout_.heads, layout_.head_dim};
    for (auto [x, store, scales] :
         {std::tuple{&keys, &keys_, &key_scales_}, std::tuple{&values, &values_, &value_scales_}}) {
      ops::quantize_pow2_e4m3_into(x->reshape(shape), layer_view(*store, layer).narrow(1, start, n),
                                   layer_view(*scales, layer).narrow(1, start, n));
    }
    layer_tokens_[static_cast<size_t>(layer)] = start + n;
    return;
  }
  if (!host_f32()) {
    const Shape shape = {rows, n, layout_.heads, layout_.head_dim};
    layer_view(keys_, layer).narrow(1, start, n).copy_(keys.reshape(shape));
    layer_view(values_, layer).narrow(1, start, n).copy_(values.reshape(shape));
    layer_tokens_[static_cast<size_t>(layer)] = start + n;
    return;
  }
  const Tensor k = keys.contiguous();
  const Tensor v = values.contiguous();
  const size_t run = static_cast<size_t>(n * width) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = layer * layer_elements() + r * row_elements() + start * width;
    std::memcpy(keys_.data<float>() + offset, k.data<float>() + r * n * width, run);
    std::memcpy(values_.data<float>() + offset, v.data<float>() + r * n * width, run);
  }
  layer_tokens_[static_cast<size_t>(layer)] = start + n;
}

KvCache::View KvCache::read(int64_t layer) const {
  check_layer(layer, "read");
  const int64_t count = layer_tokens_[static_cast<size_t>(layer)];
  const int64_t rows = layout_.rows;
  const int64_t heads = layout_.heads;
  const int64_t dim = layout_.head_dim;
  if (!host_f32()) {
    auto gather = [&](const Tensor& store, const Tensor& scales) {
      return served_tokens(store, scales, layer, count).transpose(1, 2).contiguous();
    };
    return {gather(keys_, key_scales_), gather(values_, value_scales_)};
  }
  // [row][token][head][head_dim] -> [row][head][token][head_dim], one
  // head_dim run at a time.
  auto gather = [&](const Tensor& store) {
    Tensor out = Tensor::empty({rows, heads, count, dim}, DType::kF32);
    const float* src = store.data<float>() + layer * layer_elements();
    float* dst = out.data<float>();
    const size_t run = static_cast<size_t>(dim) * sizeof(float);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < count; ++t) {
        const float* token = src + r * row_elements() + t * token_elements();
        for (int64_t h = 0; h < heads; ++h) {
          std::memcpy(dst + ((r * heads + h) * count + t) * dim, token + h * dim, run);
        }
      }
    }
    return out;
  };
  return {gather(keys_), gather(values_)};
}

void KvCache::commit() {
  const int64_t count = layer_tokens_.front();
  for (int64_t l = 0; l < layout_.layers; ++l) {
    OASR_CHECK(layer_tokens_[static_cast<size_t>(l)] == count, kInternal,
               "KV cache commit: layers hold different token counts (layer 0: ", count, ", layer ",
               l, ": ", layer_tokens_[static_cast<size_t>(l)],
               "); every layer must append the same tokens in a step");
  }
  length_ = count;
}

void KvCache::rollback() {
  std::fill(layer_tokens_.begin(), layer_tokens_.end(), length_);
}

void KvCache::advance(int64_t n) {
  OASR_CHECK(std::all_of(layer_tokens_.begin(), layer_tokens_.end(),
                         [&](int64_t t) { return t == length_; }),
             kInvalidArgument,
             "KV cache advance: the current step has uncommitted tokens; commit() or rollback() "
             "first");
  OASR_CHECK(n >= 0 && length_ + n <= layout_.capacity_tokens, kInvalidArgument,
             "KV cache is full: it holds ", length_, " tokens and ", n,
             " more would exceed its capacity of ", layout_.capacity_tokens,
             " tokens; create the cache with a larger capacity (or stop decoding earlier)");
  length_ += n;
  std::fill(layer_tokens_.begin(), layer_tokens_.end(), length_);
}

void KvCache::truncate(int64_t tokens) {
  OASR_CHECK(tokens >= 0 && tokens <= length_, kInvalidArgument, "KV cache truncate: ", tokens,
             " tokens asked to be kept of the ", length_, " it holds (keep 0..", length_, ")");
  length_ = tokens;
  std::fill(layer_tokens_.begin(), layer_tokens_.end(), length_);
}

void KvCache::clear() {
  length_ = 0;
  std::fill(layer_tokens_.begin(), layer_tokens_.end(), 0);
}

void KvCache::reorder_rows(std::span<const int64_t> source_rows) {
  const int64_t rows = layout_.rows;
  OASR_CHECK(static_cast<int64_t>(source_rows.size()) == rows, kInvalidArgument,
             "KV cache reorder_rows: got ", source_rows.size(), " source rows for a cache of ",
             rows, " rows (one source per row)");
  for (size_t r = 0; r < source_rows.size(); ++r) {
    OASR_CHECK(source_rows[r] >= 0 && source_rows[r] < rows, kInvalidArgument,
               "KV cache reorder_rows: source_rows[", r, "] = ", source_rows[r],
               " is not a row of the cache (0..", rows - 1, ")");
  }
  OASR_CHECK(std::all_of(layer_tokens_.begin(), layer_tokens_.end(),
                         [&](int64_t t) { return t == length_; }),
             kInvalidArgument,
             "KV cache reorder_rows: the current step has uncommitted tokens; commit() or "
             "rollback() first");
  bool identity = true;
  for (int64_t r = 0; r < rows; ++r) identity = identity && source_rows[r] == r;
  if (identity || length_ == 0) return;
  // Only the committed tokens of each row move; a row may be copied to
  // several rows, so the sources are read from a snapshot of the layer.
  if (!host_f32()) {
    // One gather per layer and store (ops::embedding over the layer's rows
    // as a table), not one copy per row: beam search reorders every step.
    const Tensor ids =
        Tensor::from_vector(std::vector<int64_t>(source_rows.begin(), source_rows.end()), {rows})
            .to(layout_.device);
    for (Tensor* store : stores()) {
      for (int64_t l = 0; l < layout_.layers; ++l) {
        Tensor layer_tokens = layer_view(*store, l).narrow(1, 0, length_);
        const Tensor table = layer_tokens.contiguous().view({rows, -1});
        if (store->dtype() == DType::kU8 || store->device().is_cpu()) {
          // fp8 codes (not a float table for the gather) and host stores
          // (a row copy is a memcpy there): row by row.
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t source = source_rows[static_cast<size_t>(r)];
            if (source == r) continue;
            Tensor destination = layer_tokens.select(0, r);
            destination.copy_(table.select(0, source).view(destination.shape()));
          }
          continue;
        }
        layer_tokens.copy_(ops::embedding(ids, table).view(layer_tokens.shape()));
      }
    }
    return;
  }
  const size_t run = static_cast<size_t>(length_ * token_elements()) * sizeof(float);
  std::vector<float> snapshot(static_cast<size_t>(rows * length_ * token_elements()));
  for (Tensor* store : {&keys_, &values_}) {
    for (int64_t l = 0; l < layout_.layers; ++l) {
      float* base = store->data<float>() + l * layer_elements();
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(snapshot.data() + r * length_ * token_elements(), base + r * row_elements(),
                    run);
      }
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(
            base + r * row_elements(),
            snapshot.data() + source_rows[static_cast<size_t>(r)] * length_ * token_elements(),
            run);
      }
    }
  }
}

void KvCache::retain_rows(std::span<const int64_t> rows) {
  const int64_t old_rows = layout_.rows;
  const auto kept = static_cast<int64_t>(rows.size());
  OASR_CHECK(kept >= 1 && kept <= old_rows, kInvalidArgument, "KV cache retain_rows: ", kept,
             " rows asked to be kept of ", old_rows, " (keep 1..", old_rows, ")");
  for (int64_t i = 0; i < kept; ++i) {
    OASR_CHECK(rows[i] >= 0 && rows[i] < old_rows && (i == 0 || rows[i] > rows[i - 1]),
               kInvalidArgument, "KV cache retain_rows: rows must be strictly ascending rows of ",
               "the cache (0..", old_rows - 1, "); rows[", i, "] = ", rows[i]);
  }
  OASR_CHECK(std::all_of(layer_tokens_.begin(), layer_tokens_.end(),
                         [&](int64_t t) { return t == length_; }),
             kInvalidArgument,
             "KV cache retain_rows: the current step has uncommitted tokens; commit() or "
             "rollback() first");
  if (kept == old_rows) return;
  // The layer stride shrinks with the row count, so every kept row moves to
  // (layer, i) of the new layout; destinations never pass their sources
  // (l * kept + i <= l * old_rows + rows[i]), so a forward pass of memmoves
  // reads each source before anything overwrites it.
  if (!host_f32()) {
    // Rows are whole blocks of row_elements(): a source and a destination
    // either coincide or do not overlap, and in this order no row is
    // overwritten before it is read (the reasoning below).
    for (Tensor* store : stores()) {
      for (int64_t l = 0; l < layout_.layers; ++l) {
        for (int64_t i = 0; i < kept; ++i) {
          const int64_t source = l * old_rows + rows[i];
          const int64_t destination = l * kept + i;
          if (length_ == 0 || source == destination) continue;
          row_view(*store, destination)
              .narrow(0, 0, length_)
              .copy_(row_view(*store, source).narrow(0, 0, length_));
        }
      }
    }
    layout_.rows = kept;
    return;
  }
  const size_t run = static_cast<size_t>(length_ * token_elements()) * sizeof(float);
  for (Tensor* store : {&keys_, &values_}) {
    float* data = store->data<float>();
    for (int64_t l = 0; l < layout_.layers; ++l) {
      for (int64_t i = 0; i < kept; ++i) {
        const float* source = data + (l * old_rows + rows[i]) * row_elements();
        float* destination = data + (l * kept + i) * row_elements();
        if (run > 0 && source != destination) std::memmove(destination, source, run);
      }
    }
  }
  layout_.rows = kept;
}

}  // namespace oasr::layers
