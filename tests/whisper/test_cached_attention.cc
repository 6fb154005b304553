// ops::cached_attention (src/ops/cached_attention.h): the CPU body against
// softmax attention written here in double precision (causal steps, beams
// sharing a key row, strided cross-attention memory); an fp8 store against
// the served-dtype store holding its dequantized values, bit for bit; on a
// GPU the CUDA body against the CPU body bit for bit in every dtype, the
// fp8 identity on the device, and batch invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "ops/cached_attention.h"
#include "ops/kv_fp8.h"
#include "support/test_support.h"

namespace oasr {
namespace {

constexpr int64_t kHeads = 3;
constexpr int64_t kHeadDim = 64;

// Normal values times a per-vector power of two in [2^lowest, 2^highest],
// so the fp8 scales differ from vector to vector.
Tensor random_vectors(const Shape& shape, uint64_t seed, float sigma = 1.0f, int lowest = -6,
                      int highest = 2) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_int_distribution<int> exponent(lowest, highest);
  const int64_t d = shape.back();
  int64_t count = 1;
  for (const int64_t s : shape) count *= s;
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t v = 0; v < count / d; ++v) {
    const float spread = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < d; ++c) values[static_cast<size_t>(v * d + c)] = normal(rng) * spread;
  }
  return Tensor::from_vector(values, shape);
}

// softmax(q k^T) v in double for query row r, step i, head h (the
// definition's keys: causal or all), from the float32 values of the tensors.
std::vector<double> attention_in_double(const Tensor& q, const Tensor& k, const Tensor& v,
                                        int64_t key_count, bool causal, int64_t r, int64_t i,
                                        int64_t h) {
  const Tensor qf = q.to(DType::kF32).contiguous();
  const Tensor kf = k.to(DType::kF32).contiguous();
  const Tensor vf = v.to(DType::kF32).contiguous();
  const int64_t n = q.size(1);
  const int64_t b = r / (q.size(0) / k.size(0));
  const int64_t seen = causal ? key_count - n + i + 1 : key_count;
  const int64_t keys_per_row = k.size(1);
  auto at = [&](const Tensor& t, int64_t row, int64_t j, int64_t c, int64_t rows_steps) {
    return static_cast<double>(
        t.data<float>()[((row * rows_steps + j) * kHeads + h) * kHeadDim + c]);
  };
  std::vector<double> scores(static_cast<size_t>(seen));
  double m = -INFINITY;
  for (int64_t j = 0; j < seen; ++j) {
    double s = 0.0;
    for (int64_t c = 0; c < kHeadDim; ++c) s += at(qf, r, i, c, n) * at(kf, b, j, c, keys_per_row);
    scores[static_cast<size_t>(j)] = s;
    m = std::max(m, s);
  }
  double total = 0.0;
  for (double& s : scores) total += (s = std::exp(s - m));
  std::vector<double> out(static_cast<size_t>(kHeadDim), 0.0);
  for (int64_t j = 0; j < seen; ++j) {
    for (int64_t c = 0; c < kHeadDim; ++c) {
      out[static_cast<size_t>(c)] +=
          scores[static_cast<size_t>(j)] / total * at(vf, b, j, c, keys_per_row);
    }
  }
  return out;
}

void expect_close_to_double(const ops::CachedAttentionInputs& in, double tolerance,
                            const std::string& where) {
  const Tensor got = ops::cached_attention(in).to(DType::kF32);
  const int64_t rows = in.query.size(0), n = in.query.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const std::vector<double> want =
            attention_in_double(in.query, in.keys, in.values, in.key_count, in.causal, r, i, h);
        for (int64_t c = 0; c < kHeadDim; ++c) {
          const double g = got.data<float>()[((r * n + i) * kHeads + h) * kHeadDim + c];
          ASSERT_NEAR(g, want[static_cast<size_t>(c)],
                      tolerance * (1.0 + std::fabs(want[static_cast<size_t>(c)])))
              << where << " row " << r << " step " << i << " head " << h << " column " << c;
        }
      }
    }
  }
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& where) {
  const Tensor x = a.to(Device::cpu()).contiguous();
  const Tensor y = b.to(Device::cpu()).contiguous();
  ASSERT_EQ(x.shape(), y.shape()) << where;
  ASSERT_EQ(x.dtype(), y.dtype()) << where;
  const auto* p = static_cast<const unsigned char*>(x.raw_data());
  const auto* q = static_cast<const unsigned char*>(y.raw_data());
  const size_t element = x.element_size();
  for (size_t at = 0; at < x.nbytes(); at += element) {
    ASSERT_EQ(std::memcmp(p + at, q + at, element), 0)
        << where << ": element " << at / element << " differs";
  }
}

// The self-attention case: R rows, n causal steps over key_count keys of a
// [R, capacity, H, d] store.
struct SelfCase {
  int64_t rows, steps, key_count, capacity;
};

ops::CachedAttentionInputs self_inputs(const SelfCase& c, DType dtype, uint64_t seed) {
  const Shape store{c.rows, c.capacity, kHeads, kHeadDim};
  ops::CachedAttentionInputs in;
  in.query = random_vectors({c.rows, c.steps, kHeads, kHeadDim}, seed, 0.125f, 0, 0).to(dtype);
  in.keys = random_vectors(store, seed + 1).to(dtype);
  in.values = random_vectors(store, seed + 2).to(dtype);
  in.key_count = c.key_count;
  in.causal = true;
  return in;
}

// Cross-attention: R rows in groups of R / B over B memory rows of T
// frames, the memory in project_memory's [B, H, T, d] seen as [B, T, H, d].
ops::CachedAttentionInputs cross_inputs(int64_t rows, int64_t memory_rows, int64_t frames,
                                        DType dtype, uint64_t seed) {
  const Shape memory{memory_rows, kHeads, frames, kHeadDim};
  ops::CachedAttentionInputs in;
  in.query = random_vectors({rows, 1, kHeads, kHeadDim}, seed, 0.125f, 0, 0).to(dtype);
  in.keys = random_vectors(memory, seed + 1).to(dtype).transpose(1, 2);
  in.values = random_vectors(memory, seed + 2).to(dtype).transpose(1, 2);
  in.key_count = frames;
  in.causal = false;
  return in;
}

// The fp8 store of `served` (its keys and values quantized per vector), and
// the served-dtype store holding the dequantized values.
struct Fp8Pair {
  ops::CachedAttentionInputs fp8, dequantized;
};

Fp8Pair fp8_pair(const ops::CachedAttentionInputs& served, Device device) {
  Fp8Pair pair{served, served};
  const DType dtype = served.query.dtype();
  for (int which = 0; which < 2; ++which) {
    const Tensor& x = which == 0 ? served.keys : served.values;
    const Shape shape = x.shape();
    // The CPU quantizes float32; the values are the served dtype's either way.
    const Tensor source = device.is_cuda() ? x.to(device) : x.to(DType::kF32);
    const ops::Pow2E4m3 q = ops::quantize_pow2_e4m3(source.contiguous().view({-1, kHeadDim}));
    const Tensor codes = q.codes.view(shape);
    const Tensor scales = q.scales.view({shape[0], shape[1], shape[2], 1});
    const Tensor dequantized =
        device.is_cuda()
            ? ops::dequantize_pow2_e4m3(q.codes, q.scales, dtype).view(shape)
            // float32 products are exact; Tensor::to rounds them once to the dtype.
            : ops::dequantize_pow2_e4m3(q.codes, q.scales, DType::kF32).to(dtype).view(shape);
    (which == 0 ? pair.fp8.keys : pair.fp8.values) = codes;
    (which == 0 ? pair.fp8.key_scales : pair.fp8.value_scales) = scales;
    (which == 0 ? pair.dequantized.keys : pair.dequantized.values) = dequantized;
  }
  pair.fp8.query = pair.dequantized.query = served.query.to(device);
  return pair;
}

ops::CachedAttentionInputs on(const ops::CachedAttentionInputs& in, Device device) {
  ops::CachedAttentionInputs out = in;
  for (Tensor* t : {&out.query, &out.keys, &out.values, &out.key_scales, &out.value_scales}) {
    if (t->defined()) *t = t->to(device);
  }
  return out;
}

const std::vector<SelfCase>& self_cases() {
  static const std::vector<SelfCase> cases = {
      {1, 1, 1, 4}, {5, 1, 37, 64}, {4, 4, 9, 16}, {16, 1, 448, 448}, {2, 3, 200, 448}};
  return cases;
}

std::string label(const SelfCase& c, DType dtype) {
  return std::string(dtype_name(dtype)) + " rows " + std::to_string(c.rows) + " steps " +
         std::to_string(c.steps) + " keys " + std::to_string(c.key_count);
}

TEST(CachedAttention, CpuBodyIsSoftmaxAttention) {
  for (const SelfCase& c : self_cases()) {
    if (c.key_count > 64) continue;  // the double oracle is slow; shapes are covered
    // float32: scores of a few units carry ~1e-6 absolute error into exp.
    expect_close_to_double(self_inputs(c, DType::kF32, 11), 1e-4, label(c, DType::kF32));
    // A 16-bit output is one rounding of the float32 result.
    expect_close_to_double(self_inputs(c, DType::kF16, 12), 2e-3, label(c, DType::kF16));
    expect_close_to_double(self_inputs(c, DType::kBF16, 13), 1e-2, label(c, DType::kBF16));
  }
  // Beams: 6 rows over 2 memory rows (rows 0-2 read row 0), strided memory.
  expect_close_to_double(cross_inputs(6, 2, 50, DType::kF32, 21), 1e-4, "cross float32");
}

TEST(CachedAttention, RefusesMismatchedInputsByName) {
  ops::CachedAttentionInputs in = self_inputs({2, 1, 5, 8}, DType::kF32, 1);
  in.key_count = 9;
  EXPECT_NE(ops::cached_attention_refusal(in).find("keys and values must be"), std::string::npos);
  in = self_inputs({3, 1, 5, 8}, DType::kF32, 1);
  in.keys = in.keys.narrow(0, 0, 2);
  in.values = in.values.narrow(0, 0, 2);
  EXPECT_NE(ops::cached_attention_refusal(in).find("multiple of the key rows"), std::string::npos);
  in = self_inputs({2, 3, 2, 8}, DType::kF32, 1);
  EXPECT_NE(ops::cached_attention_refusal(in).find("at least the query steps"), std::string::npos);
  in = self_inputs({2, 1, 5, 8}, DType::kF32, 1);
  in.keys = in.keys.to(DType::kF16);
  try {
    ops::cached_attention(in);
    FAIL() << "a float16 store under a float32 query was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cached_attention: keys and values must be the query's"),
              std::string::npos)
        << e.what();
  }
}

// The row map and the device-held count (a recorded decoder step reads both
// on the device), against what they stand for: query row r with a map gives
// the bits of row r alone over the one key row it names; a step with
// past_tokens p gives the bits of key_count p + n, and a count beyond the
// bound is clamped to it. On the device too, against the CPU body.
Tensor int_tensor(const std::vector<int64_t>& values, DType dtype, Device device) {
  if (dtype == DType::kI32) {
    const std::vector<int32_t> narrow(values.begin(), values.end());
    return Tensor::from_vector(narrow, {static_cast<int64_t>(values.size())}).to(device);
  }
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(device);
}

void expect_row_map_and_count_follow_the_definition(Device device, DType dtype) {
  const std::string where = std::string(device.is_cuda() ? "cuda " : "cpu ") + dtype_name(dtype);
  // Cross-attention: 5 query rows over 3 memory rows, in no regular order.
  const std::vector<int64_t> map = {2, 0, 2, 1, 0};
  ops::CachedAttentionInputs cross = on(cross_inputs(5, 3, 40, dtype, 71), device);
  cross.key_rows = int_tensor(map, DType::kI64, device);
  const Tensor mapped = ops::cached_attention(cross);
  for (int64_t r = 0; r < 5; ++r) {
    ops::CachedAttentionInputs alone = cross;
    alone.key_rows = Tensor();
    alone.query = cross.query.narrow(0, r, 1);
    alone.keys = cross.keys.narrow(0, map[static_cast<size_t>(r)], 1);
    alone.values = cross.values.narrow(0, map[static_cast<size_t>(r)], 1);
    expect_same_bits(mapped.narrow(0, r, 1), ops::cached_attention(alone),
                     where + " mapped row " + std::to_string(r));
  }
  // Self-attention: 3 rows, 2 steps, a store of 40 tokens.
  const ops::CachedAttentionInputs fixed = on(self_inputs({3, 2, 17, 40}, dtype, 73), device);
  ops::CachedAttentionInputs counted = fixed;
  counted.key_count = 40;
  counted.past_tokens = int_tensor({15}, DType::kI32, device);
  expect_same_bits(ops::cached_attention(counted), ops::cached_attention(fixed),
                   where + " past_tokens 15 + 2 steps");
  ops::CachedAttentionInputs whole = fixed;
  whole.key_count = 40;
  counted.past_tokens = int_tensor({60}, DType::kI32, device);
  expect_same_bits(ops::cached_attention(counted), ops::cached_attention(whole),
                   where + " past_tokens past the bound");
  // The fp8 store reads its count the same way.
  const Fp8Pair pair =
      fp8_pair(on(self_inputs({3, 2, 17, 40}, dtype, 75), Device::cpu()), Device::cpu());
  ops::CachedAttentionInputs fp8_counted = on(pair.fp8, device);
  fp8_counted.key_count = 40;
  fp8_counted.past_tokens = int_tensor({15}, DType::kI32, device);
  expect_same_bits(ops::cached_attention(fp8_counted), ops::cached_attention(pair.fp8),
                   where + " fp8 past_tokens");
}

TEST(CachedAttention, RowMapAndDeviceCountFollowTheDefinition) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_row_map_and_count_follow_the_definition(Device::cpu(), dtype);
  }
}

TEST(CachedAttention, CudaRowMapAndDeviceCountEqualTheCpuBody) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_row_map_and_count_follow_the_definition(gpu, dtype);
    ops::CachedAttentionInputs host = cross_inputs(5, 3, 1500, dtype, 77);
    host.key_rows = int_tensor({1, 1, 0, 2, 2}, DType::kI64, Device::cpu());
    ops::CachedAttentionInputs device = on(host, gpu);
    device.key_rows = host.key_rows.to(gpu);
    ASSERT_TRUE(ops::cached_attention_fusable(device)) << dtype_name(dtype);
    expect_same_bits(ops::cached_attention(device), ops::cached_attention(host),
                     std::string("cuda mapped cross ") + dtype_name(dtype));
  }
}

TEST(CachedAttention, RefusesABadRowMapOrCount) {
  ops::CachedAttentionInputs in = cross_inputs(4, 2, 10, DType::kF32, 3);
  in.key_rows = int_tensor({0, 1, 2, 0}, DType::kI64, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(in).find("key_rows[2] = 2 is not a key row"),
            std::string::npos)
      << ops::cached_attention_refusal(in);
  in.key_rows = int_tensor({0, 1, 1}, DType::kI64, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(in).find("key_rows must be a contiguous int64 [4]"),
            std::string::npos);
  in.key_rows = int_tensor({0, 1, 1, 0}, DType::kI32, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(in).find("key_rows must be"), std::string::npos);
  in.key_rows = Tensor();
  in.past_tokens = int_tensor({3}, DType::kI32, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(in).find("with causal attention"), std::string::npos);
  ops::CachedAttentionInputs self = self_inputs({2, 1, 5, 8}, DType::kF32, 1);
  self.past_tokens = int_tensor({3}, DType::kI64, Device::cpu());
  EXPECT_NE(ops::cached_attention_refusal(self).find("past_tokens must be an int32 [1]"),
            std::string::npos);
}

// The identity the fp8 KV cache promises: attention over e4m3 codes and
// scales gives the bits of attention over the cache holding their
// dequantized values (CPU body; float32, and 16-bit stores it rounds into).
TEST(CachedAttention, Fp8StoreEqualsTheDequantizedStoreBitForBit) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const SelfCase& c : self_cases()) {
      const Fp8Pair pair = fp8_pair(self_inputs(c, dtype, 31), Device::cpu());
      expect_same_bits(ops::cached_attention(pair.fp8), ops::cached_attention(pair.dequantized),
                       "cpu fp8 " + label(c, dtype));
    }
  }
}

TEST(CachedAttention, CudaBodyEqualsTheCpuBodyBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const SelfCase& c : self_cases()) {
      const ops::CachedAttentionInputs host = self_inputs(c, dtype, 41);
      const ops::CachedAttentionInputs device = on(host, gpu);
      ASSERT_TRUE(ops::cached_attention_fusable(device)) << label(c, dtype);
      expect_same_bits(ops::cached_attention(device), ops::cached_attention(host),
                       "served " + label(c, dtype));
      const Fp8Pair pair = fp8_pair(host, Device::cpu());
      expect_same_bits(ops::cached_attention(on(pair.fp8, gpu)), ops::cached_attention(pair.fp8),
                       "fp8 " + label(c, dtype));
    }
    // The longest the kernel takes (its scores fill the shared memory), and
    // one key more, which the unfused path must take.
    const ops::CachedAttentionInputs longest = self_inputs({1, 1, 11264, 11264}, dtype, 47);
    ASSERT_TRUE(ops::cached_attention_fusable(on(longest, gpu))) << dtype_name(dtype);
    expect_same_bits(ops::cached_attention(on(longest, gpu)), ops::cached_attention(longest),
                     std::string("11264 keys ") + dtype_name(dtype));
    EXPECT_FALSE(
        ops::cached_attention_fusable(on(self_inputs({1, 1, 11265, 11265}, dtype, 48), gpu)));
    // Whisper's cross-attention: 1500 frames, 5 beams of 3 utterances, strided memory.
    const ops::CachedAttentionInputs cross = cross_inputs(15, 3, 1500, dtype, 43);
    ASSERT_TRUE(ops::cached_attention_fusable(on(cross, gpu))) << dtype_name(dtype);
    expect_same_bits(ops::cached_attention(on(cross, gpu)), ops::cached_attention(cross),
                     std::string("cross ") + dtype_name(dtype));
  }
}

// The spec's test for the fp8 KV cache, on the device: the kernel over the
// codes and scales equals the served-dtype kernel over the device's own
// dequantized cache, bit for bit.
TEST(CachedAttention, CudaFp8StoreEqualsTheDequantizedStoreBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const SelfCase& c : self_cases()) {
      const Fp8Pair pair =
          fp8_pair(on(self_inputs(c, dtype, 51), Device::cuda(0)), Device::cuda(0));
      ASSERT_TRUE(ops::cached_attention_fusable(pair.fp8)) << label(c, dtype);
      expect_same_bits(ops::cached_attention(pair.fp8), ops::cached_attention(pair.dequantized),
                       "cuda fp8 " + label(c, dtype));
    }
  }
}

// A row alone gives the bits it gives inside a batch of other rows (and a
// store with more capacity than tokens).
TEST(CachedAttention, CudaRowsAreBatchInvariant) {
  OASR_SKIP_WITHOUT_CUDA();
  const ops::CachedAttentionInputs batch =
      on(self_inputs({8, 2, 120, 448}, DType::kF16, 61), Device::cuda(0));
  const Tensor all = ops::cached_attention(batch);
  for (const int64_t r : {0, 5, 7}) {
    ops::CachedAttentionInputs alone = batch;
    alone.query = batch.query.narrow(0, r, 1);
    alone.keys = batch.keys.narrow(0, r, 1).narrow(1, 0, 120).contiguous();
    alone.values = batch.values.narrow(0, r, 1).narrow(1, 0, 120).contiguous();
    expect_same_bits(ops::cached_attention(alone), all.narrow(0, r, 1), "row " + std::to_string(r));
  }
}

}  // namespace
}  // namespace oasr
