// KvCache (src/layers/kv_cache.h): the layout it documents, its capacity
// refusal, the step protocol (append / read / commit / rollback), bytes(),
// and reorder_rows' semantics (row r takes source row source_rows[r]),
// checked element by element against values the test wrote.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/kv_cache.h"

namespace oasr {
namespace {

using layers::KvCache;

KvCache::Layout small_layout() {
  KvCache::Layout layout;
  layout.layers = 2;
  layout.heads = 3;
  layout.head_dim = 4;
  layout.rows = 3;
  layout.capacity_tokens = 5;
  return layout;
}

// A value that names its coordinates: which tensor (0 keys, 1 values),
// layer, row, token position, head, channel.
float tag(int kind, int64_t layer, int64_t row, int64_t token, int64_t head, int64_t d) {
  return static_cast<float>(kind * 100000 + layer * 10000 + row * 1000 + token * 100 + head * 10 +
                            d);
}

// [rows, n, heads * head_dim] for positions [start, start + n) of `layer`.
Tensor tagged(int kind, const KvCache::Layout& l, int64_t layer, int64_t start, int64_t n,
              const std::vector<int64_t>& row_ids = {}) {
  Tensor t = Tensor::empty({l.rows, n, l.heads * l.head_dim}, DType::kF32);
  float* p = t.data<float>();
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t id = row_ids.empty() ? r : row_ids[static_cast<size_t>(r)];
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t h = 0; h < l.heads; ++h) {
        for (int64_t d = 0; d < l.head_dim; ++d) {
          *p++ = tag(kind, layer, id, start + i, h, d);
        }
      }
    }
  }
  return t;
}

void append_step(KvCache& cache, int64_t n) {
  const KvCache::Layout& l = cache.layout();
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    cache.append(layer, tagged(0, l, layer, cache.length(), n),
                 tagged(1, l, layer, cache.length(), n));
  }
  cache.commit();
}

// Checks read(layer) against tag(): row r must hold source row row_source[r].
void expect_contents(const KvCache& cache, const std::vector<int64_t>& row_source) {
  const KvCache::Layout& l = cache.layout();
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    const KvCache::View kv = cache.read(layer);
    ASSERT_EQ(kv.keys.shape(), (Shape{l.rows, l.heads, cache.length(), l.head_dim}));
    ASSERT_EQ(kv.values.shape(), kv.keys.shape());
    for (int64_t r = 0; r < l.rows; ++r) {
      for (int64_t h = 0; h < l.heads; ++h) {
        for (int64_t t = 0; t < cache.length(); ++t) {
          for (int64_t d = 0; d < l.head_dim; ++d) {
            const int64_t src = row_source[static_cast<size_t>(r)];
            ASSERT_EQ(kv.keys.item_float({r, h, t, d}), tag(0, layer, src, t, h, d));
            ASSERT_EQ(kv.values.item_float({r, h, t, d}), tag(1, layer, src, t, h, d));
          }
        }
      }
    }
  }
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(WhisperKvCache, BytesAreTheReservedLayout) {
  const KvCache cache(small_layout());
  // keys + values, each layers * rows * capacity * heads * head_dim float32.
  EXPECT_EQ(cache.bytes(), 2 * 2 * 3 * 5 * 3 * 4 * 4);
  EXPECT_EQ(cache.length(), 0);
  EXPECT_EQ(cache.capacity(), 5);
}

TEST(WhisperKvCache, AppendReadCommitAndLength) {
  KvCache cache(small_layout());
  const KvCache::Layout l = cache.layout();
  // A step in progress: layer 0 sees its new tokens before the commit.
  cache.append(0, tagged(0, l, 0, 0, 2), tagged(1, l, 0, 0, 2));
  EXPECT_EQ(cache.tokens(0), 2);
  EXPECT_EQ(cache.tokens(1), 0);
  EXPECT_EQ(cache.read(0).keys.size(2), 2);
  EXPECT_EQ(cache.length(), 0);
  // Committing with layers out of step is refused.
  EXPECT_THROW(cache.commit(), Error);
  cache.append(1, tagged(0, l, 1, 0, 2), tagged(1, l, 1, 0, 2));
  cache.commit();
  EXPECT_EQ(cache.length(), 2);
  // The [rows, n, heads, head_dim] form of the same data is accepted too.
  for (int64_t layer = 0; layer < 2; ++layer) {
    cache.append(layer, tagged(0, l, layer, 2, 1).view({3, 1, 3, 4}),
                 tagged(1, l, layer, 2, 1).view({3, 1, 3, 4}));
  }
  cache.commit();
  EXPECT_EQ(cache.length(), 3);
  expect_contents(cache, {0, 1, 2});
}

TEST(WhisperKvCache, RefusesOverflowNamingTheCapacity) {
  KvCache cache(small_layout());
  append_step(cache, 4);
  const KvCache::Layout l = cache.layout();
  expect_error([&] { cache.append(0, tagged(0, l, 0, 4, 2), tagged(1, l, 0, 4, 2)); },
               "capacity of 5 tokens");
  EXPECT_EQ(cache.tokens(0), 4);  // nothing was written
  append_step(cache, 1);          // exactly full is fine
  EXPECT_EQ(cache.length(), 5);
  expect_contents(cache, {0, 1, 2});
}

TEST(WhisperKvCache, RollbackDropsTheUncommittedStep) {
  KvCache cache(small_layout());
  append_step(cache, 2);
  const KvCache::Layout l = cache.layout();
  cache.append(0, tagged(0, l, 0, 2, 3), tagged(1, l, 0, 2, 3));
  cache.rollback();
  EXPECT_EQ(cache.tokens(0), 2);
  EXPECT_EQ(cache.length(), 2);
  append_step(cache, 1);
  expect_contents(cache, {0, 1, 2});
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_EQ(cache.tokens(1), 0);
}

TEST(WhisperKvCache, ReorderRowsCopiesSourceRows) {
  KvCache cache(small_layout());
  append_step(cache, 3);
  // Row 0 <- row 2, row 1 <- row 0, row 2 <- row 0 (one source for two rows).
  const std::vector<int64_t> source = {2, 0, 0};
  cache.reorder_rows(source);
  EXPECT_EQ(cache.length(), 3);
  expect_contents(cache, source);
  // Appending after the reorder continues every row at the same position.
  const KvCache::Layout l = cache.layout();
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    cache.append(layer, tagged(0, l, layer, 3, 1, source), tagged(1, l, layer, 3, 1, source));
  }
  cache.commit();
  expect_contents(cache, source);
  // A second reorder composes: row r now holds source[second[r]].
  cache.reorder_rows(std::vector<int64_t>{1, 1, 0});
  expect_contents(cache, {0, 0, 2});
}

TEST(WhisperKvCache, RetainRowsKeepsTheChosenRowsInOrder) {
  KvCache cache(small_layout());
  append_step(cache, 2);
  cache.retain_rows(std::vector<int64_t>{0, 2});  // row 1 finished
  EXPECT_EQ(cache.rows(), 2);
  EXPECT_EQ(cache.length(), 2);
  expect_contents(cache, {0, 2});
  // Appending continues both kept rows at position 2 (tagged as rows 0, 2).
  const KvCache::Layout l = cache.layout();
  const std::vector<int64_t> ids = {0, 2};
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    cache.append(layer, tagged(0, l, layer, 2, 1, ids), tagged(1, l, layer, 2, 1, ids));
  }
  cache.commit();
  expect_contents(cache, {0, 2});
  cache.retain_rows(std::vector<int64_t>{1});
  expect_contents(cache, {2});
  expect_error([&] { cache.retain_rows(std::vector<int64_t>{}); }, "0 rows asked to be kept");
  KvCache other(small_layout());
  append_step(other, 1);
  expect_error([&] { other.retain_rows(std::vector<int64_t>{2, 1}); }, "strictly ascending");
  expect_error([&] { other.retain_rows(std::vector<int64_t>{0, 3}); }, "strictly ascending");
}

// `other` reads what `reference` (a host float32 cache) reads, rounded to
// `dtype`, bit for bit, with the dtype and device it was made with.
void expect_reads_equal(const KvCache& reference, const KvCache& other, DType dtype, Device device,
                        const char* when) {
  ASSERT_EQ(other.rows(), reference.rows()) << when;
  ASSERT_EQ(other.length(), reference.length()) << when;
  for (int64_t layer = 0; layer < reference.layout().layers; ++layer) {
    const KvCache::View want = reference.read(layer);
    const KvCache::View got = other.read(layer);
    EXPECT_EQ(got.keys.dtype(), dtype);
    EXPECT_EQ(got.keys.device(), device);
    for (const auto& [w, g] :
         {std::pair{want.keys, got.keys}, std::pair{want.values, got.values}}) {
      const Tensor host = g.to(Device::cpu()).to(DType::kF32).contiguous();
      const Tensor expected = w.to(dtype).to(DType::kF32).contiguous();
      ASSERT_EQ(host.shape(), expected.shape()) << when;
      EXPECT_EQ(std::memcmp(host.data<float>(), expected.data<float>(), expected.nbytes()), 0)
          << when << ", layer " << layer << ", " << dtype_name(dtype) << " on " << device.str();
    }
  }
}

// The script both store comparisons run: a prompt, a beam reorder, a
// retain and more appends, the reads compared after each.
void run_beam_script(KvCache& reference, KvCache& other, DType dtype, Device device,
                     const std::function<void(int64_t)>& step) {
  step(2);
  expect_reads_equal(reference, other, dtype, device, "after the prompt");
  step(1);
  const std::vector<int64_t> beams = {3, 0, 0, 2};
  reference.reorder_rows(beams);
  other.reorder_rows(beams);
  expect_reads_equal(reference, other, dtype, device, "after a reorder");
  step(1);
  const std::vector<int64_t> kept = {1, 3};
  reference.retain_rows(kept);
  other.retain_rows(kept);
  expect_reads_equal(reference, other, dtype, device, "after a retain");
  step(2);
  expect_reads_equal(reference, other, dtype, device, "after appends to the kept rows");
}

// Every other store (float16 on the host: the tensor-copy path, checked on
// any machine; float32 / float16 / bfloat16 on a CUDA device where one is
// visible) holds exactly what the host float32 store holds through appends,
// a beam reorder, a retain and more appends. The values (k / 8, |k| <= 255)
// are exact in every served dtype, so the comparison is bit for bit.
void expect_store_matches_host_f32(DType dtype, Device device) {
  KvCache::Layout l = small_layout();
  l.rows = 4;
  l.capacity_tokens = 7;
  KvCache reference(l);
  KvCache::Layout other_layout = l;
  other_layout.dtype = dtype;
  other_layout.device = device;
  KvCache other(other_layout);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> k(-255, 255);
  auto step = [&](int64_t n) {
    for (int64_t layer = 0; layer < l.layers; ++layer) {
      Tensor keys = Tensor::empty({reference.rows(), n, l.heads * l.head_dim}, DType::kF32);
      Tensor values = Tensor::empty(keys.shape(), DType::kF32);
      for (int64_t i = 0; i < keys.numel(); ++i) {
        keys.data<float>()[i] = static_cast<float>(k(rng)) / 8.0f;
        values.data<float>()[i] = static_cast<float>(k(rng)) / 8.0f;
      }
      reference.append(layer, keys, values);
      // As a decoder gives them: [rows, n, heads, head_dim] on the device.
      const Shape split = {reference.rows(), n, l.heads, l.head_dim};
      other.append(layer, keys.view(split).to(dtype).to(device),
                   values.view(split).to(dtype).to(device));
    }
    reference.commit();
    other.commit();
  };
  run_beam_script(reference, other, dtype, device, step);
  EXPECT_EQ(other.bytes(), reference.bytes() / static_cast<int64_t>(sizeof(float)) *
                               static_cast<int64_t>(dtype_size(dtype)));
}

TEST(WhisperKvCache, AHalfPrecisionHostStoreMatchesTheFloat32One) {
  expect_store_matches_host_f32(DType::kF16, Device::cpu());
}

TEST(WhisperKvCache, DeviceStoresMatchTheHostFloat32One) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_store_matches_host_f32(dtype, Device::cuda(0));
  }
}

// ---- the fp8 KV cache ---------------------------------------------------------

// e4m3 by the format's definition (1.4.3, bias 7, subnormals, no
// infinities; magnitudes 0..448 for codes 0..126), independent of oasr's
// conversions: the nearest magnitude, ties to the even code.
double e4m3_magnitude(int code) {
  const int e = code >> 3;
  const int m = code & 7;
  return e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}

double round_to_e4m3(double v) {
  const double a = std::fabs(v);
  int best = 0;
  for (int code = 1; code <= 126; ++code) {
    const double d = std::fabs(e4m3_magnitude(code) - a);
    const double best_d = std::fabs(e4m3_magnitude(best) - a);
    if (d < best_d || (d == best_d && code % 2 == 0)) best = code;
  }
  return std::copysign(e4m3_magnitude(best), v);
}

// What an fp8 cache must read back for one (token, head) vector: the
// smallest power-of-two scale with amax <= 448 * scale, each value rounded
// to e4m3 after the division, times the scale.
std::vector<float> fp8_round_trip(const std::vector<float>& vector) {
  double amax = 0.0;
  for (const float v : vector) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  double scale = 1.0;
  if (amax > 0.0) {
    int k = -60;
    while (amax > 448.0 * std::ldexp(1.0, k)) ++k;
    scale = std::ldexp(1.0, k);
  }
  std::vector<float> out;
  for (const float v : vector) out.push_back(static_cast<float>(round_to_e4m3(v / scale) * scale));
  return out;
}

// An fp8 cache (served `dtype` on `device`) reads back, through appends, a
// beam reorder, a retain and more appends, exactly what a float32 host cache
// holds when it is given the round-tripped values (rounded once more to the
// served dtype): the codes, the scales and the rows move together.
void expect_fp8_store_matches_round_trip(DType dtype, Device device) {
  KvCache::Layout l = small_layout();
  l.rows = 4;
  l.capacity_tokens = 7;
  KvCache reference(l);
  KvCache::Layout fp8_layout = l;
  fp8_layout.dtype = dtype;
  fp8_layout.device = device;
  fp8_layout.fp8 = true;
  KvCache fp8(fp8_layout);
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> magnitude(-12.0f, 12.0f);
  auto step = [&](int64_t n) {
    for (int64_t layer = 0; layer < l.layers; ++layer) {
      const Shape split = {reference.rows(), n, l.heads, l.head_dim};
      Tensor keys = Tensor::empty(split, DType::kF32);
      Tensor values = Tensor::empty(split, DType::kF32);
      Tensor want_keys = Tensor::empty(split, DType::kF32);
      Tensor want_values = Tensor::empty(split, DType::kF32);
      for (auto [x, want] : {std::pair{&keys, &want_keys}, std::pair{&values, &want_values}}) {
        for (int64_t v = 0; v < x->numel() / l.head_dim; ++v) {
          // Vectors of very different sizes (2^-12 .. 2^12) and a zero one.
          const float size = std::exp2(magnitude(rng));
          std::vector<float> vector;
          for (int64_t j = 0; j < l.head_dim; ++j)
            vector.push_back(v == 3 ? 0.0f : size * normal(rng));
          // The served dtype's values, as the decoder hands them over.
          const Tensor served = Tensor::from_vector(vector, {l.head_dim}).to(dtype).to(DType::kF32);
          vector.assign(served.data<float>(), served.data<float>() + l.head_dim);
          const std::vector<float> round_trip = fp8_round_trip(vector);
          std::copy(vector.begin(), vector.end(), x->data<float>() + v * l.head_dim);
          std::copy(round_trip.begin(), round_trip.end(), want->data<float>() + v * l.head_dim);
        }
      }
      reference.append(layer, want_keys, want_values);
      fp8.append(layer, keys.to(dtype).to(device), values.to(dtype).to(device));
    }
    reference.commit();
    fp8.commit();
  };
  run_beam_script(reference, fp8, dtype, device, step);
  // One byte an element plus one float32 scale per head_dim elements.
  const int64_t elements = reference.bytes() / static_cast<int64_t>(sizeof(float));
  EXPECT_EQ(fp8.bytes(), elements + elements / l.head_dim * 4);
}

TEST(WhisperKvCache, Fp8HostStoreHoldsThePowerOfTwoE4m3Rule) {
  expect_fp8_store_matches_round_trip(DType::kF32, Device::cpu());
}

TEST(WhisperKvCache, Fp8DeviceStoresHoldThePowerOfTwoE4m3Rule) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_fp8_store_matches_round_trip(dtype, Device::cuda(0));
  }
}

TEST(WhisperKvCache, RefusesBadRequests) {
  KvCache::Layout fp8 = small_layout();
  fp8.dtype = DType::kF8E4M3;
  expect_error([&] { KvCache cache(fp8); }, "float8_e4m3fn");
  KvCache::Layout empty = small_layout();
  empty.capacity_tokens = 0;
  EXPECT_THROW(KvCache cache(empty), Error);

  KvCache cache(small_layout());
  const KvCache::Layout l = cache.layout();
  EXPECT_THROW(cache.append(2, tagged(0, l, 0, 0, 1), tagged(1, l, 0, 0, 1)), Error);  // layer
  EXPECT_THROW(cache.append(0, Tensor::zeros({2, 1, 12}, DType::kF32),
                            Tensor::zeros({2, 1, 12}, DType::kF32)),
               Error);  // rows
  EXPECT_THROW(cache.append(0, Tensor::zeros({3, 1, 11}, DType::kF32),
                            Tensor::zeros({3, 1, 11}, DType::kF32)),
               Error);                                                                 // width
  EXPECT_THROW(cache.append(0, tagged(0, l, 0, 0, 1), tagged(1, l, 0, 0, 2)), Error);  // k != v
  expect_error([&] { cache.reorder_rows(std::vector<int64_t>{0, 1}); }, "one source per row");
  expect_error([&] { cache.reorder_rows(std::vector<int64_t>{0, 1, 3}); }, "source_rows[2] = 3");
  cache.append(0, tagged(0, l, 0, 0, 1), tagged(1, l, 0, 0, 1));
  expect_error([&] { cache.reorder_rows(std::vector<int64_t>{0, 1, 2}); }, "uncommitted");
}

}  // namespace
}  // namespace oasr
