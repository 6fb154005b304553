#include "ops/cached_attention.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "core/activations.h"
#include "core/device_dispatch.h"
#include "core/error.h"
#include "core/float_types.h"
#include "ops/cuda/cached_attention.h"

namespace oasr::ops {
namespace {

using act::exp_f32;
using act::detail::add_rn;
using act::detail::div_rn;
using act::detail::fma_rn;
using act::detail::mul_rn;
using act::detail::sub_rn;

// The definition's interleaved groups of the weighted sum.
constexpr int64_t kValueGroups = 8;
// The kernel keeps a query's scores in shared memory: 4 bytes a key next to
// at most 2436 (d <= 64) or 4740 (d = 128) bytes of its own, under the 48 KiB
// a block gets without opting in. Head sizes 16, 32, 64 and 128 are compiled.
int64_t fused_max_keys(int64_t head_dim) {
  if (head_dim == 16 || head_dim == 32 || head_dim == 64) return 11264;
  if (head_dim == 128) return 10240;
  return 0;
}

bool served(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

bool fp8(const CachedAttentionInputs& in) {
  return in.keys.defined() && in.keys.dtype() == DType::kU8;
}

// float(x) of element `at` of a float32 / float16 / bfloat16 buffer.
float load_served(const void* data, DType dtype, int64_t at) {
  switch (dtype) {
    case DType::kF16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(data)[at]);
    case DType::kBF16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(data)[at]);
    default:
      return static_cast<const float*>(data)[at];
  }
}

// float(T(v)): v rounded to the served dtype and read back.
float round_to(float v, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return f16_bits_to_f32(f32_to_f16_bits(v));
    case DType::kBF16:
      return bf16_bits_to_f32(f32_to_bf16_bits(v));
    default:
      return v;
  }
}

void store_served(void* data, DType dtype, int64_t at, float v) {
  switch (dtype) {
    case DType::kF16:
      static_cast<uint16_t*>(data)[at] = f32_to_f16_bits(v);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(data)[at] = f32_to_bf16_bits(v);
      return;
    default:
      static_cast<float*>(data)[at] = v;
  }
}

// k_jc / v_jc of the definition: a served element, or an e4m3 code times its
// scale rounded to the served dtype (the dequantized store's value).
struct Operand {
  const Tensor& data;
  const Tensor& scales;
  DType served;
  float at(int64_t b, int64_t j, int64_t h, int64_t c) const {
    const auto& s = data.strides();
    const int64_t offset = b * s[0] + j * s[1] + h * s[2] + c * s[3];
    if (!scales.defined()) return load_served(data.raw_data(), served, offset);
    const auto& ss = scales.strides();
    const float scale = scales.data<float>()[b * ss[0] + j * ss[1] + h * ss[2]];
    return round_to(mul_rn(e4m3_bits_to_f32(data.data<uint8_t>()[offset]), scale), served);
  }
};

// L of the definition for the last query: key_count, or the host copy of
// past_tokens plus n, clamped to [n, key_count] as the kernel clamps it.
int64_t seen_keys(const CachedAttentionInputs& in) {
  if (!in.past_tokens.defined()) return in.key_count;
  const int64_t n = in.query.size(1);
  const int64_t past = in.past_tokens.data<int32_t>()[0];
  return std::clamp<int64_t>(past + n, n, in.key_count);
}

// Query row r's L (checked against [n or 1, key_count] by the refusal).
int64_t row_keys(const CachedAttentionInputs& in, int64_t r) {
  if (!in.key_counts.defined()) return seen_keys(in);
  return in.key_counts.data<int32_t>()[r];
}

// Where key j of query row r lives: (store row or pool block, token).
struct Place {
  int64_t b, t;
};

Place place(const CachedAttentionInputs& in, int64_t r, int64_t per_key_row, int64_t j) {
  if (in.block_table.defined()) {
    const auto& ts = in.block_table.strides();
    const int64_t block = in.block_table.data<int32_t>()[r * ts[0] + (j / in.block_size) * ts[1]];
    return {block, j % in.block_size};
  }
  const int64_t b = in.key_rows.defined() ? in.key_rows.data<int64_t>()[r] : r / per_key_row;
  return {b, j};
}

void cached_attention_cpu(const CachedAttentionInputs& in, Tensor& out) {
  const Tensor& q = in.query;
  const DType dtype = q.dtype();
  const int64_t rows = q.size(0), n = q.size(1), heads = q.size(2), d = q.size(3);
  const int64_t per_key_row =
      in.block_table.defined() ? 1 : std::max<int64_t>(rows / in.keys.size(0), 1);
  const int64_t group = heads / in.keys.size(2);
  const Operand keys{in.keys, in.key_scales, dtype};
  const Operand values{in.values, in.value_scales, dtype};
  const auto& qs = q.strides();
  std::vector<float> query(static_cast<size_t>(d));
  std::vector<float> e(static_cast<size_t>(in.key_count));
  std::vector<Place> places(static_cast<size_t>(in.key_count));
  std::vector<std::vector<float>> groups(kValueGroups, std::vector<float>(static_cast<size_t>(d)));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t key_count = row_keys(in, r);
    for (int64_t j = 0; j < key_count; ++j)
      places[static_cast<size_t>(j)] = place(in, r, per_key_row, j);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t seen = in.causal ? key_count - n + i + 1 : key_count;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = h / group;
        for (int64_t c = 0; c < d; ++c) {
          query[static_cast<size_t>(c)] =
              load_served(q.raw_data(), dtype, r * qs[0] + i * qs[1] + h * qs[2] + c * qs[3]);
        }
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < seen; ++j) {
          const Place p = places[static_cast<size_t>(j)];
          float s = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            s = fma_rn(query[static_cast<size_t>(c)], keys.at(p.b, p.t, kv, c), s);
          }
          e[static_cast<size_t>(j)] = s;
          m = std::max(m, s);
        }
        std::array<float, 32> partial{};
        for (int64_t j = 0; j < seen; ++j) {
          e[static_cast<size_t>(j)] = exp_f32(sub_rn(e[static_cast<size_t>(j)], m));
          partial[static_cast<size_t>(j % 32)] =
              add_rn(partial[static_cast<size_t>(j % 32)], e[static_cast<size_t>(j)]);
        }
        for (size_t o = 16; o >= 1; o /= 2) {
          std::array<float, 32> next{};
          for (size_t l = 0; l < 32; ++l) next[l] = add_rn(partial[l], partial[l ^ o]);
          partial = next;
        }
        for (std::vector<float>& a : groups) std::fill(a.begin(), a.end(), 0.0f);
        for (int64_t j = 0; j < seen; ++j) {
          std::vector<float>& a = groups[static_cast<size_t>(j % kValueGroups)];
          const Place p = places[static_cast<size_t>(j)];
          for (int64_t c = 0; c < d; ++c) {
            a[static_cast<size_t>(c)] = fma_rn(
                e[static_cast<size_t>(j)], values.at(p.b, p.t, kv, c), a[static_cast<size_t>(c)]);
          }
        }
        for (int64_t c = 0; c < d; ++c) {
          const auto a = [&](size_t g) { return groups[g][static_cast<size_t>(c)]; };
          const float sum = add_rn(add_rn(add_rn(a(0), a(1)), add_rn(a(2), a(3))),
                                   add_rn(add_rn(a(4), a(5)), add_rn(a(6), a(7))));
          store_served(out.raw_data(), dtype, ((r * n + i) * heads + h) * d + c,
                       div_rn(sum, partial[0]));
        }
      }
    }
  }
}

bool aligned16(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  const int64_t bytes = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t dim = 0; dim + 1 < t.dim(); ++dim) {
    if (t.size(dim) > 1 && (t.strides()[static_cast<size_t>(dim)] * bytes) % 16 != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

std::string int_vector_refusal(const Tensor& t, const char* name, DType dtype, int64_t rows,
                               const Tensor& q) {
  if (t.dtype() != dtype || t.dim() != 1 || t.size(0) != rows || !t.is_contiguous() ||
      t.device() != q.device()) {
    return std::string(name) + " must be a contiguous " + dtype_name(dtype) + " [" +
           std::to_string(rows) + "] on the query's device";
  }
  return {};
}

// The paged form's table and counts; on the CPU also the values the rows read.
std::string paged_refusal(const CachedAttentionInputs& in) {
  const Tensor& q = in.query;
  const int64_t rows = q.size(0);
  const Tensor& table = in.block_table;
  if (in.key_rows.defined() || in.past_tokens.defined()) {
    return "a block table goes without key_rows and past_tokens (key_counts gives each row's "
           "count)";
  }
  if (table.dtype() != DType::kI32 || table.dim() != 2 || table.size(0) != rows ||
      table.device() != q.device() || table.strides()[1] != 1) {
    return "block_table must be an int32 [" + std::to_string(rows) +
           ", blocks] with blocks contiguous on the query's device";
  }
  if (in.block_size < 1 || in.keys.size(1) != in.block_size) {
    return "block_size (" + std::to_string(in.block_size) + ") must be the pool's block size (" +
           std::to_string(in.keys.size(1)) + ")";
  }
  if (table.size(1) * in.block_size < in.key_count) {
    return "the block table's " + std::to_string(table.size(1)) + " blocks of " +
           std::to_string(in.block_size) + " hold fewer than key_count (" +
           std::to_string(in.key_count) + ") keys";
  }
  if (!q.device().is_cpu()) return {};
  const int64_t pool = in.keys.size(0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t count = in.key_counts.defined() ? in.key_counts.data<int32_t>()[r] : in.key_count;
    for (int64_t k = 0; k * in.block_size < std::min(count, in.key_count); ++k) {
      const int64_t block = table.data<int32_t>()[r * table.strides()[0] + k];
      if (block < 0 || block >= pool) {
        return "block_table[" + std::to_string(r) + ", " + std::to_string(k) +
               "] = " + std::to_string(block) + " is not a pool block (0.." +
               std::to_string(pool - 1) + ")";
      }
    }
  }
  return {};
}

}  // namespace

std::string cached_attention_refusal(const CachedAttentionInputs& in) {
  if (!in.query.defined() || !in.keys.defined() || !in.values.defined()) {
    return "query, keys and values must be defined";
  }
  const Tensor& q = in.query;
  if (!served(q.dtype())) return "the query must be float32, float16 or bfloat16";
  if (q.dim() != 4 || in.keys.dim() != 4 || in.values.dim() != 4) {
    return "query, keys and values must be [rows, steps, heads, head_dim]";
  }
  const int64_t rows = q.size(0), n = q.size(1), heads = q.size(2), d = q.size(3);
  const bool paged = in.block_table.defined();
  const int64_t key_rows = in.keys.size(0);
  const int64_t kv_heads = in.keys.size(2);
  if (kv_heads < 1 || heads % kv_heads != 0) {
    return "the key heads (" + std::to_string(kv_heads) + ") must divide the query heads (" +
           std::to_string(heads) + ")";
  }
  if (!paged && (key_rows < 1 || (!in.key_rows.defined() && rows % key_rows != 0))) {
    return "the query rows (" + std::to_string(rows) + ") must be a multiple of the key rows (" +
           std::to_string(key_rows) + ")";
  }
  const int64_t tokens = paged ? in.keys.size(1) : in.key_count;  // paged: the block size
  for (const Tensor* t : {&in.keys, &in.values}) {
    if (t->size(0) != key_rows || t->size(2) != kv_heads || t->size(3) != d ||
        t->size(1) < tokens) {
      return "keys and values must be [" + std::to_string(key_rows) +
             ", >= " + std::to_string(tokens) + ", " + std::to_string(kv_heads) + ", " +
             std::to_string(d) + "], got " + shape_str(t->shape());
    }
    if (t->device() != q.device()) return "keys and values must be on the query's device";
  }
  if (in.key_rows.defined()) {
    if (std::string why = int_vector_refusal(in.key_rows, "key_rows", DType::kI64, rows, q);
        !why.empty()) {
      return why;
    }
  }
  if (in.key_rows.defined() && q.device().is_cpu()) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = in.key_rows.data<int64_t>()[r];
      if (b < 0 || b >= key_rows) {
        return "key_rows[" + std::to_string(r) + "] = " + std::to_string(b) +
               " is not a key row (0.." + std::to_string(key_rows - 1) + ")";
      }
    }
  }
  if (in.past_tokens.defined() &&
      (!in.causal || in.past_tokens.dtype() != DType::kI32 || in.past_tokens.numel() != 1 ||
       in.past_tokens.device() != q.device())) {
    return "past_tokens must be an int32 [1] on the query's device, with causal attention";
  }
  if (in.key_count < 1 || (in.causal && in.key_count < n)) {
    return "key_count (" + std::to_string(in.key_count) + ") must be at least 1" +
           (in.causal ? " and at least the query steps (" + std::to_string(n) + ")" : "");
  }
  if (in.key_counts.defined()) {
    if (in.past_tokens.defined()) return "key_counts goes without past_tokens";
    if (std::string why = int_vector_refusal(in.key_counts, "key_counts", DType::kI32, rows, q);
        !why.empty()) {
      return why;
    }
    if (q.device().is_cpu()) {
      const int64_t floor = in.causal ? n : 1;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t count = in.key_counts.data<int32_t>()[r];
        if (count < floor || count > in.key_count) {
          return "key_counts[" + std::to_string(r) + "] = " + std::to_string(count) +
                 " is outside " + std::to_string(floor) + ".." + std::to_string(in.key_count);
        }
      }
    }
  }
  if (paged) {
    if (std::string why = paged_refusal(in); !why.empty()) return why;
  }
  if (fp8(in)) {
    if (in.values.dtype() != DType::kU8) return "keys and values must both be e4m3 codes";
    for (const Tensor* s : {&in.key_scales, &in.value_scales}) {
      if (!s->defined() || s->dtype() != DType::kF32 || s->dim() != 4 || s->size(0) != key_rows ||
          s->size(1) < tokens || s->size(2) != kv_heads || s->size(3) != 1 ||
          s->device() != q.device()) {
        return "an fp8 store needs float32 key_scales and value_scales [B, >= key_count, KV, 1] "
               "on the query's device";
      }
    }
  } else {
    if (in.keys.dtype() != q.dtype() || in.values.dtype() != q.dtype()) {
      return "keys and values must be the query's dtype, or uint8 e4m3 codes with scales";
    }
    if (in.key_scales.defined() || in.value_scales.defined()) {
      return "scales go with e4m3 codes only";
    }
  }
  return {};
}

bool cached_attention_shape_fusable(int64_t head_dim, int64_t key_count) {
  return key_count <= fused_max_keys(head_dim);
}

bool cached_attention_fusable(const CachedAttentionInputs& in) {
  if (!in.query.defined() || !in.query.device().is_cuda() ||
      !cached_attention_refusal(in).empty()) {
    return false;
  }
  if (!cached_attention_shape_fusable(in.query.size(3), in.key_count)) return false;
  if (in.query.size(1) > 65535 || in.query.size(0) > 65535 || in.query.size(2) > 65535) {
    return false;
  }
  for (const Tensor* t : {&in.query, &in.keys, &in.values}) {
    if (t->strides()[3] != 1 || !aligned16(*t)) return false;
  }
  return true;
}

Tensor cached_attention(const CachedAttentionInputs& in) {
  const std::string why = cached_attention_refusal(in);
  OASR_CHECK(why.empty(), kInvalidArgument, "cached_attention: ", why);
  const Tensor& q = in.query;
  Tensor out = Tensor::empty({q.size(0), q.size(1), q.size(2) * q.size(3)}, q.dtype(), q.device());
  if (q.numel() == 0) return out;
  on_device(
      "cached_attention", q.device(), [&] { cached_attention_cpu(in, out); },
      [&](auto) {
        OASR_CHECK(cached_attention_fusable(in), kUnsupported,
                   "cached_attention: the CUDA kernel needs head_dim 16, 32 or 64 (at most 11264 "
                   "keys) or 128 (at most 10240 keys) and 16-byte aligned rows with head_dim "
                   "contiguous; "
                   "run the unfused attention for these inputs");
        cuda::cached_attention(in, out);
      });
  return out;
}

}  // namespace oasr::ops
