// ops/step_tokens.h and the device-position forms of the KV cache's write
// (ops::quantize_pow2_e4m3_at; KvCache::append with past_tokens, advance,
// truncate): each against the host-position form it stands for, bit for
// bit, on the CPU and, where a GPU is visible, on the device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/kv_cache.h"
#include "ops/embedding.h"
#include "ops/kv_fp8.h"
#include "ops/step_tokens.h"
#include "support/test_support.h"

namespace oasr {
namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int64_t count = 1;
  for (const int64_t s : shape) count *= s;
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(rng);
  return Tensor::from_vector(values, shape);
}

Tensor past(int32_t value, Device device) {
  return Tensor::from_vector(std::vector<int32_t>{value}, {1}).to(device);
}

void expect_same_bytes(const Tensor& a, const Tensor& b, const std::string& where) {
  const Tensor x = a.to(Device::cpu()).contiguous();
  const Tensor y = b.to(Device::cpu()).contiguous();
  ASSERT_EQ(x.shape(), y.shape()) << where;
  ASSERT_EQ(x.dtype(), y.dtype()) << where;
  EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << where;
}

std::vector<Device> devices() {
  std::vector<Device> out = {Device::cpu()};
  if (cuda_available()) out.push_back(Device::cuda(0));
  return out;
}

// The dtypes a device's bodies serve: float32 on the CPU, all three on CUDA.
std::vector<DType> served_dtypes(Device device) {
  if (device.is_cuda()) return {DType::kF32, DType::kF16, DType::kBF16};
  return {DType::kF32};
}

TEST(StepTokens, PositionsFollowTheCount) {
  for (const Device device : devices()) {
    const Tensor ids = ops::positions_after(past(7, device), 4).to(Device::cpu());
    ASSERT_EQ(ids.dtype(), DType::kI64);
    EXPECT_EQ(std::vector<int64_t>(ids.data<int64_t>(), ids.data<int64_t>() + 4),
              (std::vector<int64_t>{7, 8, 9, 10}))
        << device.str();
  }
  EXPECT_THROW(ops::positions_after(Tensor::from_vector(std::vector<int64_t>{1}, {1}), 2), Error);
}

// The gather that leaves its ids on the device: the rows embedding() gives
// for ids in range; on the device an id outside the table reads a row of it
// (clamped), never past it.
TEST(StepTokens, EmbeddingOfDeviceIdsIsTheGather) {
  const Tensor table = random_tensor({7, 64}, 3);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{6, 0, 3, 3}, {2, 2});
  for (const Device device : devices()) {
    expect_same_bytes(ops::embedding_device_ids(ids.to(device), table.to(device)),
                      ops::embedding(ids, table), device.str());
    if (device.is_cuda()) {
      const Tensor wild = Tensor::from_vector(std::vector<int64_t>{-4, 9}, {2});
      const Tensor edges = Tensor::from_vector(std::vector<int64_t>{0, 6}, {2});
      expect_same_bytes(ops::embedding_device_ids(wild.to(device), table.to(device)),
                        ops::embedding(edges, table), "clamped ids");
    }
  }
}

// The store after a write at past_tokens p equals the store after a copy into
// its narrowed window [p, p + n); every other token is untouched.
TEST(StepTokens, WriteAtTheCountEqualsTheNarrowedCopy) {
  for (const Device device : devices()) {
    for (const DType dtype : served_dtypes(device)) {
      const std::string where = device.str() + " " + dtype_name(dtype);
      const Tensor start = random_tensor({3, 10, 2, 64}, 5).to(dtype).to(device);
      const Tensor x = random_tensor({3, 2, 2, 64}, 6).to(dtype).to(device);
      Tensor written = start.clone();
      ops::write_tokens_at(x, written, past(4, device));
      Tensor copied = start.clone();
      copied.narrow(1, 4, 2).copy_(x);
      expect_same_bytes(written, copied, where);
    }
  }
  // The CPU body refuses a window outside the store, naming it.
  Tensor store = random_tensor({1, 4, 1, 64}, 1);
  try {
    ops::write_tokens_at(random_tensor({1, 2, 1, 64}, 2), store, past(3, Device::cpu()));
    FAIL() << "a write past the store was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens 3..4 are outside the store's 4 tokens"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepTokens, Fp8WriteAtTheCountEqualsTheNarrowedWrite) {
  for (const Device device : devices()) {
    for (const DType dtype : served_dtypes(device)) {
      const std::string where = device.str() + " " + dtype_name(dtype);
      const Tensor x = random_tensor({3, 2, 2, 64}, 8).to(dtype).to(device);
      Tensor codes_at = Tensor::zeros({3, 10, 2, 64}, DType::kU8, device);
      Tensor scales_at = Tensor::zeros({3, 10, 2, 1}, DType::kF32, device);
      Tensor codes = codes_at.clone();
      Tensor scales = scales_at.clone();
      ops::quantize_pow2_e4m3_at(x, codes_at, scales_at, past(6, device));
      ops::quantize_pow2_e4m3_into(x, codes.narrow(1, 6, 2), scales.narrow(1, 6, 2));
      expect_same_bytes(codes_at, codes, where + " codes");
      expect_same_bytes(scales_at, scales, where + " scales");
    }
  }
}

// A step through the device position, then advance() (what a replay leaves
// to the host) or truncate(), against plain appends.
TEST(StepTokens, KvCacheAppendAtTheCountAdvanceAndTruncate) {
  for (const Device device : devices()) {
    if (device.is_cpu()) continue;  // a host float32 store writes by memcpy, no position needed
    for (const bool fp8 : {false, true}) {
      layers::KvCache::Layout layout;
      layout.layers = 2;
      layout.heads = 2;
      layout.head_dim = 64;
      layout.rows = 3;
      layout.capacity_tokens = 8;
      layout.dtype = DType::kF16;
      layout.device = device;
      layout.fp8 = fp8;
      layers::KvCache by_host(layout);
      layers::KvCache by_device(layout);
      for (int64_t step = 0; step < 3; ++step) {
        const int64_t n = step == 0 ? 3 : 1;
        const Tensor position = past(static_cast<int32_t>(by_device.length()), device);
        for (int64_t l = 0; l < 2; ++l) {
          const Tensor k = random_tensor({3, n, 2, 64}, 100 + step * 4 + l).to(DType::kF16);
          const Tensor v = random_tensor({3, n, 2, 64}, 200 + step * 4 + l).to(DType::kF16);
          by_host.append(l, k.to(device), v.to(device));
          by_device.append(l, k.to(device), v.to(device), position);
        }
        by_host.commit();
        by_device.commit();
      }
      for (int64_t l = 0; l < 2; ++l) {
        const layers::KvCache::View a = by_host.read(l);
        const layers::KvCache::View b = by_device.read(l);
        expect_same_bytes(a.keys, b.keys, "keys layer " + std::to_string(l));
        expect_same_bytes(a.values, b.values, "values layer " + std::to_string(l));
      }
      by_device.advance(2);
      EXPECT_EQ(by_device.length(), 7);
      EXPECT_THROW(by_device.advance(2), Error);  // 9 > capacity 8
      by_device.truncate(5);
      EXPECT_EQ(by_device.length(), 5);
      EXPECT_EQ(by_device.tokens(1), 5);
      EXPECT_THROW(by_device.truncate(6), Error);
    }
  }
  // On any machine: the host bookkeeping.
  layers::KvCache::Layout layout;
  layout.layers = 1;
  layout.heads = 1;
  layout.head_dim = 64;
  layout.rows = 1;
  layout.capacity_tokens = 4;
  layers::KvCache cache(layout);
  cache.advance(3);
  EXPECT_EQ(cache.length(), 3);
  cache.append(0, random_tensor({1, 1, 1, 64}, 1), random_tensor({1, 1, 1, 64}, 2));
  EXPECT_THROW(cache.advance(1), Error);  // uncommitted tokens
  cache.truncate(1);
  EXPECT_EQ(cache.length(), 1);
  EXPECT_EQ(cache.tokens(0), 1);
}

}  // namespace
}  // namespace oasr
