// The paged KV cache (src/layers/paged_kv_cache.h) and the paged, grouped,
// per-row-count forms of ops::cached_attention (src/ops/cached_attention.h),
// against what they stand for, bit for bit: attention through a scrambled
// block table equals attention over a contiguous store of the same tokens;
// KV heads shared by groups of query heads equal the heads repeated; a row
// with its own key count equals that row alone. The cache: sequences that
// come and go over several steps read exactly the tokens they wrote, blocks
// are given back and reused, a step that does not fit is refused and leaves
// the cache as it was. On a GPU the CUDA bodies give the CPU body's bits
// (d = 64 and 128; float32 / float16 / bfloat16; fp8 stores).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/paged_kv_cache.h"
#include "ops/cached_attention.h"
#include "ops/concat.h"
#include "ops/kv_fp8.h"
#include "ops/write_slots.h"
#include "support/test_support.h"

namespace oasr {
namespace {

Tensor int32s(const std::vector<int32_t>& values, const Shape& shape, Device device) {
  return Tensor::from_vector(values, shape).to(device);
}

// Rows of per-row tokens [R, L_r] scattered over a pool of blocks in the
// order `order` gives (a permutation of the blocks), with the table that
// finds them, and the same tokens as a contiguous [R, L_max, KV, d] store.
struct PagedCase {
  Tensor pool_keys, pool_values;  // [N, bs, KV, d]
  Tensor dense_keys, dense_values;
  std::vector<int32_t> table;  // [R, max blocks]
  int64_t blocks_per_row = 0;
};

PagedCase make_paged(const std::vector<int64_t>& lengths, int64_t block_size, int64_t kv, int64_t d,
                     DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto rows = static_cast<int64_t>(lengths.size());
  int64_t longest = 0;
  for (const int64_t l : lengths) longest = std::max(longest, l);
  PagedCase c;
  c.blocks_per_row = (longest + block_size - 1) / block_size;
  const int64_t pool = rows * c.blocks_per_row + 3;  // spare blocks hold garbage
  c.dense_keys = testing::normal_tensor({rows, longest, kv, d}, rng).to(dtype);
  c.dense_values = testing::normal_tensor({rows, longest, kv, d}, rng).to(dtype);
  c.pool_keys = testing::normal_tensor({pool, block_size, kv, d}, rng, 50.0f).to(dtype);
  c.pool_values = testing::normal_tensor({pool, block_size, kv, d}, rng, 50.0f).to(dtype);
  std::vector<int32_t> order(static_cast<size_t>(pool));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  c.table.assign(static_cast<size_t>(rows * c.blocks_per_row), 0);
  size_t next = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k * block_size < lengths[static_cast<size_t>(r)]; ++k) {
      const int32_t block = order[next++];
      c.table[static_cast<size_t>(r * c.blocks_per_row + k)] = block;
      const int64_t first = k * block_size;
      const int64_t count = std::min(block_size, lengths[static_cast<size_t>(r)] - first);
      c.pool_keys.select(0, block)
          .narrow(0, 0, count)
          .copy_(c.dense_keys.select(0, r).narrow(0, first, count));
      c.pool_values.select(0, block)
          .narrow(0, 0, count)
          .copy_(c.dense_values.select(0, r).narrow(0, first, count));
    }
  }
  return c;
}

ops::CachedAttentionInputs paged_inputs(const PagedCase& c, const Tensor& query,
                                        const std::vector<int64_t>& lengths, int64_t block_size,
                                        Device device) {
  ops::CachedAttentionInputs in;
  in.query = query.to(device);
  in.keys = c.pool_keys.to(device);
  in.values = c.pool_values.to(device);
  in.key_count = *std::max_element(lengths.begin(), lengths.end());
  in.causal = true;
  in.block_table =
      int32s(c.table, {static_cast<int64_t>(lengths.size()), c.blocks_per_row}, device);
  in.block_size = block_size;
  std::vector<int32_t> counts(lengths.begin(), lengths.end());
  in.key_counts = int32s(counts, {static_cast<int64_t>(lengths.size())}, device);
  return in;
}

// Row r of the paged attention against row r alone over its contiguous
// tokens (key_count = its length, no table).
void expect_rows_equal_dense(const PagedCase& c, const ops::CachedAttentionInputs& paged,
                             const std::vector<int64_t>& lengths, const std::string& where) {
  const Tensor got = ops::cached_attention(paged);
  for (size_t r = 0; r < lengths.size(); ++r) {
    ops::CachedAttentionInputs alone;
    const auto row = static_cast<int64_t>(r);
    alone.query = paged.query.narrow(0, row, 1);
    alone.keys = c.dense_keys.narrow(0, row, 1).to(paged.query.device());
    alone.values = c.dense_values.narrow(0, row, 1).to(paged.query.device());
    alone.key_count = lengths[r];
    alone.causal = true;
    EXPECT_TRUE(
        testing::bit_equal(got.narrow(0, row, 1).contiguous(), ops::cached_attention(alone)))
        << where << " row " << r;
  }
}

const std::vector<int64_t> kLengths = {5, 37, 16, 2};

TEST(PagedAttention, ScrambledBlocksAndRowCountsEqualEachRowAlone) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t steps : {1, 2}) {
      const PagedCase c = make_paged(kLengths, 4, 2, 16, dtype, 7);
      std::mt19937 rng(9);
      const Tensor query = testing::normal_tensor({4, steps, 2, 16}, rng, 0.25f).to(dtype);
      expect_rows_equal_dense(c, paged_inputs(c, query, kLengths, 4, Device::cpu()), kLengths,
                              std::string(dtype_name(dtype)) + " steps " + std::to_string(steps));
    }
  }
}

TEST(PagedAttention, GroupedHeadsEqualRepeatedHeads) {
  std::mt19937 rng(3);
  const Tensor query = testing::normal_tensor({2, 3, 6, 16}, rng, 0.25f);
  const Tensor keys = testing::normal_tensor({2, 20, 2, 16}, rng);
  const Tensor values = testing::normal_tensor({2, 20, 2, 16}, rng);
  // HF's repeat_kv: query head h reads key head h / 3.
  const auto repeat = [](const Tensor& x) {
    std::vector<Tensor> heads;
    for (int64_t h = 0; h < 6; ++h) heads.push_back(x.narrow(2, h / 3, 1));
    return ops::concat(heads, 2);
  };
  ops::CachedAttentionInputs grouped;
  grouped.query = query;
  grouped.keys = keys;
  grouped.values = values;
  grouped.key_count = 17;
  grouped.causal = true;
  ops::CachedAttentionInputs repeated = grouped;
  repeated.keys = repeat(keys);
  repeated.values = repeat(values);
  EXPECT_TRUE(testing::bit_equal(ops::cached_attention(grouped), ops::cached_attention(repeated)));
}

TEST(PagedAttention, RefusesABadTableOrCountByName) {
  const PagedCase c = make_paged(kLengths, 4, 2, 16, DType::kF32, 7);
  std::mt19937 rng(9);
  const Tensor query = testing::normal_tensor({4, 1, 2, 16}, rng);
  ops::CachedAttentionInputs in = paged_inputs(c, query, kLengths, 4, Device::cpu());
  ASSERT_EQ(ops::cached_attention_refusal(in), "");
  ops::CachedAttentionInputs bad = in;
  std::vector<int32_t> table = c.table;
  table[static_cast<size_t>(c.blocks_per_row) + 1] = 999;
  bad.block_table = int32s(table, {4, c.blocks_per_row}, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(bad).find("block_table[1, 1] = 999 is not a pool block"),
            std::string::npos)
      << ops::cached_attention_refusal(bad);
  bad = in;
  bad.key_counts = int32s({5, 38, 16, 2}, {4}, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(bad).find("key_counts[1] = 38 is outside 1..37"),
            std::string::npos)
      << ops::cached_attention_refusal(bad);
  bad = in;
  bad.block_size = 8;
  EXPECT_NE(ops::cached_attention_refusal(bad).find("block_size (8) must be the pool's"),
            std::string::npos);
  bad = in;
  bad.query = testing::normal_tensor({4, 1, 3, 16}, rng);
  EXPECT_NE(
      ops::cached_attention_refusal(bad).find("key heads (2) must divide the query heads (3)"),
      std::string::npos);
}

// Three sequences over several steps, one released midway and a new one
// opened into its blocks: the cache's attention for each sequence equals
// attention over a contiguous store of exactly the tokens it appended.
void expect_cache_reads_what_was_written(Device device, DType dtype, int64_t d, bool fp8) {
  const std::string where = std::string(device.is_cuda() ? "cuda " : "cpu ") + dtype_name(dtype) +
                            " d " + std::to_string(d) + (fp8 ? " fp8" : "");
  layers::PagedKvCache::Layout layout;
  layout.layers = 2;
  layout.heads = 2;
  layout.head_dim = d;
  layout.block_size = 4;
  layout.blocks = 12;
  layout.dtype = dtype;
  layout.device = device;
  layout.fp8 = fp8;
  layers::PagedKvCache cache(layout);
  std::mt19937 rng(11);
  using Id = layers::PagedKvCache::SequenceId;
  std::map<Id, std::vector<Tensor>> written;  // per sequence, layer 1's keys then values by step
  std::map<Id, std::vector<Tensor>> written_values;
  std::vector<Id> live = {cache.open(), cache.open(), cache.open()};
  const auto step = [&](const std::vector<Id>& sequences, int64_t n) {
    const auto rows = static_cast<int64_t>(sequences.size());
    cache.begin_step(sequences, n);
    Tensor k1, v1;
    for (int64_t l = 0; l < 2; ++l) {
      const Tensor k = testing::normal_tensor({rows, n, 2, d}, rng).to(dtype).to(device);
      const Tensor v = testing::normal_tensor({rows, n, 2, d}, rng).to(dtype).to(device);
      cache.append(l, k, v);
      if (l == 1) {
        k1 = k;
        v1 = v;
      }
    }
    const Tensor q = testing::normal_tensor({rows, n, 4, d}, rng, 0.25f).to(dtype).to(device);
    const Tensor got = ops::cached_attention(cache.attention_inputs(1, q, true));
    cache.commit();
    for (int64_t r = 0; r < rows; ++r) {
      const Id id = sequences[static_cast<size_t>(r)];
      written[id].push_back(k1.narrow(0, r, 1));
      written_values[id].push_back(v1.narrow(0, r, 1));
      ops::CachedAttentionInputs dense;
      dense.query = q.narrow(0, r, 1);
      const Tensor keys = ops::concat(written[id], 1);
      const Tensor values = ops::concat(written_values[id], 1);
      if (fp8) {
        // The fp8 store's values: quantized per (token, head) and read back.
        for (int which = 0; which < 2; ++which) {
          const Tensor& x = which == 0 ? keys : values;
          const Tensor src = device.is_cuda() ? x : x.to(DType::kF32);
          const ops::Pow2E4m3 qz = ops::quantize_pow2_e4m3(src.contiguous().view({-1, d}));
          (which == 0 ? dense.keys : dense.values) = qz.codes.view(x.shape());
          (which == 0 ? dense.key_scales : dense.value_scales) =
              qz.scales.view({1, x.size(1), 2, 1});
        }
      } else {
        dense.keys = keys;
        dense.values = values;
      }
      dense.key_count = keys.size(1);
      dense.causal = true;
      EXPECT_TRUE(
          testing::bit_equal(got.narrow(0, r, 1).contiguous(), ops::cached_attention(dense)))
          << where << " sequence " << id << " at " << keys.size(1) << " tokens";
    }
  };
  step(live, 3);       // a prefill of 3 tokens each
  step({live[0]}, 6);  // one sequence alone, across a block boundary
  step(live, 1);       // decode steps of unequal lengths
  const int64_t free_before = cache.free_blocks();
  const int64_t held = cache.blocks_for(cache.length(live[1]));
  cache.release(live[1]);
  EXPECT_EQ(cache.free_blocks(), free_before + held) << where;
  live.erase(live.begin() + 1);
  live.push_back(cache.open());  // takes the released blocks
  step({live[2]}, 5);
  step(live, 1);
  step(live, 1);
  // Beam search's fork: the full blocks shared, a partial last block copied;
  // afterwards each of the two appends to its own last block.
  step({live[0]}, 1);  // 13 tokens: 3 full blocks and 1 token in a fourth
  const auto fork_of = [&](Id source) {
    const Id forked = cache.fork(source);
    written[forked] = written[source];
    written_values[forked] = written_values[source];
    return forked;
  };
  int64_t free_now = cache.free_blocks();
  const Id beam = fork_of(live[0]);
  EXPECT_EQ(cache.free_blocks(), free_now - 1) << where << ": one block for the partial copy";
  EXPECT_EQ(cache.length(beam), 13) << where;
  step({live[0], beam}, 1);  // both write slot 2 of their own fourth block
  step({beam, live[0]}, 3);  // and each takes a fifth
  free_now = cache.free_blocks();
  cache.release(live[0]);  // its fourth and fifth blocks; the shared three stay with the beam
  EXPECT_EQ(cache.free_blocks(), free_now + 2) << where;
  live.erase(live.begin());
  step({beam}, 3);  // 20 tokens: 5 full blocks
  free_now = cache.free_blocks();
  const Id aligned = fork_of(beam);
  EXPECT_EQ(cache.free_blocks(), free_now) << where << ": nothing to copy at a block boundary";
  step({aligned, beam}, 1);
  step({beam, aligned, live[0]}, 2);
  for (const Id id : {beam, aligned}) cache.release(id);
  cache.release(live[0]);
  cache.release(live[1]);
  EXPECT_EQ(cache.free_blocks(), layout.blocks) << where << ": every block back";
}

TEST(PagedKvCache, SequencesReadExactlyTheirOwnTokens) {
  for (const bool fp8 : {false, true})
    expect_cache_reads_what_was_written(Device::cpu(), DType::kF32, 16, fp8);
}

TEST(PagedKvCache, RefusesAStepThatDoesNotFitAndKeepsTheCache) {
  layers::PagedKvCache::Layout layout;
  layout.layers = 1;
  layout.heads = 1;
  layout.head_dim = 8;
  layout.block_size = 4;
  layout.blocks = 3;
  layers::PagedKvCache cache(layout);
  const layers::PagedKvCache::SequenceId a = cache.open(), b = cache.open();
  const layers::PagedKvCache::SequenceId both[] = {a, b};
  try {
    cache.begin_step(both, 5);  // 2 + 2 blocks, 3 in the pool
    ADD_FAILURE() << "a step past the pool was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 more blocks of 4 tokens but 3 of 3 are free"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.free_blocks(), 3);
  EXPECT_EQ(cache.length(a), 0);
  // The cache still works: a step that fits, then a rolled-back one.
  cache.begin_step(both, 4);
  const Tensor x = Tensor::zeros({2, 4, 1, 8}, DType::kF32);
  cache.append(0, x, x);
  cache.commit();
  EXPECT_EQ(cache.free_blocks(), 1);
  const layers::PagedKvCache::SequenceId first[] = {a};
  cache.begin_step(first, 1);  // takes the last block
  EXPECT_EQ(cache.free_blocks(), 0);
  EXPECT_THROW(cache.attention_inputs(0, x.narrow(0, 0, 1).narrow(1, 0, 1), true), Error);
  EXPECT_THROW(cache.release(a), Error);  // in the step
  cache.rollback();
  EXPECT_EQ(cache.free_blocks(), 1);
  EXPECT_EQ(cache.length(a), 4);
  cache.release(a);
  EXPECT_EQ(cache.free_blocks(), 2);
  EXPECT_THROW(cache.length(a), Error);
}

TEST(WriteSlots, PutsEachRowInItsSlot) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor store = Tensor::zeros({5, 2}, DType::kF32);
  ops::write_slots(x, store, Tensor::from_vector(std::vector<int64_t>{4, 0, 2}, {3}));
  EXPECT_TRUE(testing::bit_equal(
      store, Tensor::from_vector(std::vector<float>{3, 4, 0, 0, 5, 6, 0, 0, 1, 2}, {5, 2})));
  EXPECT_THROW(ops::write_slots(x, store, Tensor::from_vector(std::vector<int64_t>{0, 5, 1}, {3})),
               Error);
}

// The CUDA bodies against the CPU body on the same inputs, bit for bit.
TEST(PagedAttention, CudaEqualsTheCpuBody) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const std::vector<int64_t> lengths = {1, 300, 129, 16, 77};
  for (const int64_t d : {16, 64, 128}) {
    for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const int64_t steps : {1, 3}) {
        const std::string where = std::string(dtype_name(dtype)) + " d " + std::to_string(d) +
                                  " steps " + std::to_string(steps);
        std::vector<int64_t> counts = lengths;
        for (int64_t& c : counts) c = std::max(c, steps);
        const PagedCase c = make_paged(counts, 16, 2, d, dtype, 21);
        std::mt19937 rng(5);
        const Tensor query = testing::normal_tensor({5, steps, 4, d}, rng, 0.125f).to(dtype);
        const ops::CachedAttentionInputs host = paged_inputs(c, query, counts, 16, Device::cpu());
        const ops::CachedAttentionInputs device = paged_inputs(c, query, counts, 16, gpu);
        ASSERT_TRUE(ops::cached_attention_fusable(device)) << where;
        EXPECT_TRUE(testing::bit_equal(ops::cached_attention(device).to(Device::cpu()),
                                       ops::cached_attention(host)))
            << where;
        // The fp8 pool: codes and scales quantized on the CPU, read on both.
        ops::CachedAttentionInputs fp8_host = host;
        for (int which = 0; which < 2; ++which) {
          const Tensor& x = which == 0 ? host.keys : host.values;
          const ops::Pow2E4m3 q =
              ops::quantize_pow2_e4m3(x.to(DType::kF32).contiguous().view({-1, d}));
          (which == 0 ? fp8_host.keys : fp8_host.values) = q.codes.view(x.shape());
          (which == 0 ? fp8_host.key_scales : fp8_host.value_scales) =
              q.scales.view({x.size(0), x.size(1), x.size(2), 1});
        }
        ops::CachedAttentionInputs fp8_device = fp8_host;
        for (Tensor* t :
             {&fp8_device.query, &fp8_device.keys, &fp8_device.values, &fp8_device.key_scales,
              &fp8_device.value_scales, &fp8_device.block_table, &fp8_device.key_counts}) {
          *t = t->to(gpu);
        }
        EXPECT_TRUE(testing::bit_equal(ops::cached_attention(fp8_device).to(Device::cpu()),
                                       ops::cached_attention(fp8_host)))
            << where << " fp8";
      }
    }
  }
}

TEST(PagedKvCache, CudaSequencesReadExactlyTheirOwnTokens) {
  OASR_SKIP_WITHOUT_CUDA();
  for (const int64_t d : {16, 64, 128}) {
    for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const bool fp8 : {false, true}) {
        expect_cache_reads_what_was_written(Device::cuda(0), dtype, d, fp8);
      }
    }
  }
  std::mt19937 rng(2);
  const Tensor x = testing::normal_tensor({6, 40}, rng).to(DType::kF16);
  const Tensor slots = Tensor::from_vector(std::vector<int64_t>{9, 0, 3, 7, 1, 8}, {6});
  Tensor host = Tensor::zeros({10, 40}, DType::kF16);
  ops::write_slots(x, host, slots);
  Tensor device = Tensor::zeros({10, 40}, DType::kF16).to(Device::cuda(0));
  ops::write_slots(x.to(Device::cuda(0)), device, slots.to(Device::cuda(0)));
  EXPECT_TRUE(testing::bit_equal(device.to(Device::cpu()), host));
}

}  // namespace
}  // namespace oasr
