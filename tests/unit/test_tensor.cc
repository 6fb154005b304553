// Tensor construction, views, copies and refusals. Expected values come from
// index arithmetic on a base tensor whose element at [i][j][k] is its flat
// row-major position, so every view's contents follow from its definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace oasr {
namespace {

// Runs `body`, which must throw an oasr::Error with `code` (and, when given,
// a message containing `fragment`).
void expect_error(const std::function<void()>& body, ErrorCode code, const char* statement,
                  const std::string& fragment = {}) {
  try {
    body();
    ADD_FAILURE() << statement << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << statement << ": " << e.what();
    if (!fragment.empty()) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << statement << ": message '" << e.what() << "' lacks '" << fragment << "'";
    }
  }
}

#define EXPECT_OASR_ERROR(statement, error_code) \
  expect_error([&] { (void)(statement); }, ErrorCode::error_code, #statement)

// 0, 1, ..., n-1 as float32 of the given shape.
Tensor arange(const Shape& shape) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  std::iota(values.begin(), values.end(), 0.0f);
  return Tensor::from_vector(values, shape);
}

// The elements of `t` in row-major order of its shape, read via contiguous().
std::vector<float> elements(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

// Every element of the 3-d tensor `t` equals expected(i, j, k) (read through
// its strides by item_float).
void expect_3d(const Tensor& t, const std::function<float(int64_t, int64_t, int64_t)>& expected) {
  ASSERT_EQ(t.dim(), 3);
  for (int64_t i = 0; i < t.size(0); ++i) {
    for (int64_t j = 0; j < t.size(1); ++j) {
      for (int64_t k = 0; k < t.size(2); ++k) {
        EXPECT_EQ(t.item_float({i, j, k}), expected(i, j, k)) << i << "," << j << "," << k;
      }
    }
  }
}

bool aligned64(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0;
}

// ---- construction -----------------------------------------------------------

TEST(Tensor, EmptyIsContiguousAndAligned) {
  Tensor t = Tensor::empty({3, 5}, DType::kF32);
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.nbytes(), 60u);
}

TEST(Tensor, EmptyAlignsEveryDTypeAndSize) {
  const size_t expected_sizes[] = {4, 2, 2, 1, 1, 4, 8, 1};  // in kAllDTypes order
  for (size_t d = 0; d < std::size(kAllDTypes); ++d) {
    for (int64_t n : {0, 1, 3, 17, 1000}) {
      const Tensor t = Tensor::empty({n}, kAllDTypes[d]);
      EXPECT_TRUE(aligned64(t)) << dtype_name(kAllDTypes[d]) << " n=" << n;
      EXPECT_EQ(t.element_size(), expected_sizes[d]);
      EXPECT_EQ(t.nbytes(), static_cast<size_t>(n) * expected_sizes[d]);
      EXPECT_EQ(t.dtype(), kAllDTypes[d]);
      EXPECT_TRUE(t.device().is_cpu());
    }
  }
  const Tensor t = Tensor::empty({2, 3, 4}, DType::kI64);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
}

TEST(Tensor, EmptyRefusesNegativeDimension) {
  EXPECT_OASR_ERROR(Tensor::empty({2, -1}, DType::kF32), kInvalidArgument);
  EXPECT_OASR_ERROR(Tensor::zeros({-3}, DType::kI8), kInvalidArgument);
}

TEST(Tensor, ZerosAreZeroBytesForEveryDType) {
  for (DType dtype : kAllDTypes) {
    const Tensor t = Tensor::zeros({3, 7}, dtype);
    const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
    EXPECT_TRUE(std::all_of(bytes, bytes + t.nbytes(), [](unsigned char b) { return b == 0; }))
        << dtype_name(dtype);
  }
}

TEST(Tensor, FullFillsAndConverts) {
  const Tensor f = Tensor::full({2, 3}, 1.5f);
  EXPECT_EQ(f.dtype(), DType::kF32);
  EXPECT_EQ(elements(f), std::vector<float>(6, 1.5f));
  const Tensor h = Tensor::full({4}, 1.5f, DType::kF16);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.data<Half>()[i].bits, 0x3E00) << i;  // 1.5 in f16
  const Tensor i32 = Tensor::full({2}, -2.7f, DType::kI32);
  EXPECT_EQ(i32.data<int32_t>()[0], -2);
  EXPECT_EQ(i32.data<int32_t>()[1], -2);
  const Tensor e4m3 = Tensor::full({1}, 1000.0f, DType::kF8E4M3);
  EXPECT_EQ(e4m3.data<Float8E4M3>()[0].bits, 0x7E);  // saturated to 448
  const Tensor scalar = Tensor::full({}, 3.25f);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.item_float({}), 3.25f);
}

TEST(Tensor, FromVectorCopiesAndChecksSize) {
  std::vector<int32_t> values = {1, -2, 3, -4, 5, -6};
  const Tensor t = Tensor::from_vector(values, {3, 2});
  values[0] = 100;  // the tensor holds its own copy
  EXPECT_EQ(t.dtype(), DType::kI32);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.data<int32_t>()[0], 1);
  EXPECT_EQ(t.item_float({2, 1}), -6.0f);
  EXPECT_OASR_ERROR(Tensor::from_vector(values, {4, 2}), kInvalidArgument);
  EXPECT_OASR_ERROR(t.data<float>(), kInvalidArgument);
  EXPECT_OASR_ERROR(t.data<int64_t>(), kInvalidArgument);
}

TEST(Tensor, FromStorageHonoursOffsetAndBounds) {
  auto storage = Storage::allocate(64, Device::cpu());
  const Tensor t = Tensor::from_storage(storage, 16, {4}, DType::kF32);
  EXPECT_EQ(t.raw_data(), static_cast<char*>(storage->data()) + 16);
  EXPECT_EQ(t.byte_offset(), 16u);
  EXPECT_EQ(t.storage().get(), storage.get());
  EXPECT_NO_THROW(Tensor::from_storage(storage, 48, {4}, DType::kF32));  // ends at byte 64
  EXPECT_OASR_ERROR(Tensor::from_storage(storage, 52, {4}, DType::kF32), kInvalidArgument);
  EXPECT_OASR_ERROR(Tensor::from_storage(storage, 0, {9, 2}, DType::kF32), kInvalidArgument);

  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  auto borrowed =
      Storage::borrow(owner->data(), owner->size() * sizeof(float), Device::cpu(), owner);
  const Tensor b = Tensor::from_storage(borrowed, 4, {3}, DType::kF32);
  EXPECT_EQ(elements(b), (std::vector<float>{2, 3, 4}));
  (*owner)[2] = 30;  // no copy was made
  EXPECT_EQ(b.item_float({1}), 30.0f);
}

TEST(Tensor, UndefinedTensor) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.str(), "undefined");
  EXPECT_OASR_ERROR(t.raw_data(), kInvalidArgument);
}

TEST(Tensor, Str) {
  EXPECT_EQ(Tensor::empty({2, 3}, DType::kF32).str(), "float32[2, 3] cpu");
  EXPECT_EQ(Tensor::empty({}, DType::kBF16).str(), "bfloat16[] cpu");
}

// ---- views ------------------------------------------------------------------

TEST(TensorView, InfersMinusOneAndSharesStorage) {
  const Tensor base = arange({2, 3, 4});
  const Tensor v = base.view({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.raw_data(), base.raw_data());
  EXPECT_EQ(v.item_float({5, 3}), 23.0f);
  EXPECT_EQ(base.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(base.view({4, -1, 3}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(base.view({1, 24, 1}).strides(), (Shape{24, 1, 1}));
  // A contiguous slice keeps its offset through a view.
  EXPECT_EQ(elements(base.slice(0, 1, 2).view({-1}))[0], 12.0f);
  EXPECT_EQ(base.slice(0, 1, 2).view({12}).item_float({11}), 23.0f);
}

TEST(TensorView, RefusesBadShapes) {
  const Tensor base = arange({2, 3, 4});
  EXPECT_OASR_ERROR(base.view({5, -1}), kInvalidArgument);   // 24 is not a multiple of 5
  EXPECT_OASR_ERROR(base.view({-1, -1}), kInvalidArgument);  // two unknowns
  EXPECT_OASR_ERROR(base.view({7}), kInvalidArgument);
  EXPECT_OASR_ERROR(base.view({25}), kInvalidArgument);
  EXPECT_OASR_ERROR(base.view({-2, -12}), kInvalidArgument);
  EXPECT_OASR_ERROR(base.view({0, -1}), kInvalidArgument);
  EXPECT_OASR_ERROR(base.transpose(0, 1).view({24}), kInvalidArgument);  // non-contiguous
  EXPECT_OASR_ERROR(base.slice(2, 0, 2).view({12}), kInvalidArgument);
}

TEST(TensorView, ReshapeOfContiguousIsAView) {
  const Tensor base = arange({2, 3, 4});
  const Tensor r = base.reshape({4, 6});
  EXPECT_EQ(r.raw_data(), base.raw_data());
  EXPECT_EQ(r.strides(), (Shape{6, 1}));
}

TEST(TensorView, ReshapeOfNonContiguousCopies) {
  const Tensor x = arange({2, 3});
  const Tensor r = x.transpose(0, 1).reshape({6});
  EXPECT_EQ(elements(r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_NE(r.storage().get(), x.storage().get());
  r.data<float>()[0] = 99;
  EXPECT_EQ(x.item_float({0, 0}), 0.0f);
  EXPECT_EQ(x.transpose(0, 1).reshape({-1, 2}).shape(), (Shape{3, 2}));
  EXPECT_OASR_ERROR(x.transpose(0, 1).reshape({4}), kInvalidArgument);
}

TEST(TensorView, SliceAndNarrow) {
  const Tensor base = arange({2, 3, 4});
  const Tensor s = base.slice(2, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(s.byte_offset(), sizeof(float));
  EXPECT_EQ(s.storage().get(), base.storage().get());
  EXPECT_FALSE(s.is_contiguous());
  expect_3d(s, [](int64_t i, int64_t j, int64_t k) { return float(i * 12 + j * 4 + k + 1); });
  EXPECT_EQ(base.slice(-1, 1, 3).shape(), s.shape());
  EXPECT_EQ(base.slice(-1, 1, 3).byte_offset(), s.byte_offset());

  const Tensor n = base.narrow(1, 1, 2);
  EXPECT_EQ(n.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(n.byte_offset(), 4 * sizeof(float));
  expect_3d(n, [](int64_t i, int64_t j, int64_t k) { return float(i * 12 + (j + 1) * 4 + k); });

  const Tensor row = base.slice(0, 1, 2);  // a leading slice stays contiguous
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_EQ(row.byte_offset(), 12 * sizeof(float));
  EXPECT_EQ(base.slice(1, 2, 2).shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(base.slice(1, 0, 3).shape(), base.shape());

  EXPECT_OASR_ERROR(base.slice(2, 3, 2), kInvalidArgument);   // start > end
  EXPECT_OASR_ERROR(base.slice(2, 0, 5), kInvalidArgument);   // end past the size
  EXPECT_OASR_ERROR(base.slice(2, -1, 2), kInvalidArgument);  // negative start
  EXPECT_OASR_ERROR(base.narrow(1, 2, 2), kInvalidArgument);
}

TEST(TensorView, Select) {
  const Tensor base = arange({2, 3, 4});
  const Tensor a = base.select(1, 2);
  EXPECT_EQ(a.shape(), (Shape{2, 4}));
  EXPECT_EQ(a.strides(), (Shape{12, 1}));
  EXPECT_EQ(a.storage().get(), base.storage().get());
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(a.item_float({i, k}), float(i * 12 + 8 + k));
  }
  const Tensor b = base.select(-1, 3);
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.strides(), (Shape{12, 4}));
  EXPECT_EQ(elements(b), (std::vector<float>{3, 7, 11, 15, 19, 23}));
  const Tensor c = base.select(0, 1);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.byte_offset(), 12 * sizeof(float));
  EXPECT_EQ(base.select(0, 1).select(0, 2).select(0, 3).item_float({}), 23.0f);
  EXPECT_OASR_ERROR(base.select(1, 3), kInvalidArgument);
  EXPECT_OASR_ERROR(base.select(0, 2), kInvalidArgument);
}

TEST(TensorView, Transpose) {
  const Tensor base = arange({2, 3, 4});
  const Tensor t = base.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.raw_data(), base.raw_data());
  expect_3d(t, [](int64_t a, int64_t b, int64_t c) { return float(c * 12 + b * 4 + a); });
  EXPECT_EQ(base.transpose(-1, -3).strides(), t.strides());
  EXPECT_TRUE(base.transpose(1, 1).is_contiguous());
  EXPECT_TRUE(t.transpose(0, 2).is_contiguous());
  // Size-1 dimensions do not break contiguity, whatever their stride.
  EXPECT_TRUE(arange({1, 4}).transpose(0, 1).is_contiguous());
}

TEST(TensorView, Unsqueeze) {
  const Tensor base = arange({2, 3, 4});
  const Tensor u0 = base.unsqueeze(0);
  EXPECT_EQ(u0.shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(u0.strides(), (Shape{24, 12, 4, 1}));
  EXPECT_TRUE(u0.is_contiguous());
  const Tensor u1 = base.unsqueeze(1);
  EXPECT_EQ(u1.shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(u1.strides(), (Shape{12, 12, 4, 1}));
  const Tensor u3 = base.unsqueeze(3);
  EXPECT_EQ(u3.shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(u3.strides(), (Shape{12, 4, 1, 1}));
  EXPECT_EQ(base.unsqueeze(-1).shape(), u3.shape());
  EXPECT_EQ(base.unsqueeze(-4).shape(), u0.shape());
  EXPECT_EQ(u3.item_float({1, 2, 3, 0}), 23.0f);
  EXPECT_EQ(u1.raw_data(), base.raw_data());
  // On a strided tensor (PyTorch's rule: stride = size * stride of the next dim).
  const Tensor t = arange({2, 3}).transpose(0, 1);  // shape [3, 2], strides [1, 3]
  EXPECT_EQ(t.unsqueeze(1).strides(), (Shape{1, 6, 3}));
  EXPECT_EQ(t.unsqueeze(2).strides(), (Shape{1, 3, 1}));
  EXPECT_EQ(elements(t.unsqueeze(1)), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_OASR_ERROR(base.unsqueeze(4), kInvalidArgument);
  EXPECT_OASR_ERROR(base.unsqueeze(-5), kInvalidArgument);
}

TEST(TensorView, WritesThroughViewsReachTheBase) {
  const Tensor base = Tensor::zeros({2, 3, 4}, DType::kF32);
  base.slice(2, 1, 3).data<float>()[0] = 1;                        // [0][0][1]
  base.narrow(1, 2, 1).data<float>()[12 + 3] = 2;                  // [1][2][3]
  base.select(1, 1).data<float>()[2] = 3;                          // [0][1][2]
  base.transpose(0, 2).data<float>()[1 * 1 + 0 * 4 + 1 * 12] = 4;  // t[1][0][1] = [1][0][1]
  base.view({6, 4}).data<float>()[5] = 5;                          // [0][1][1]
  base.unsqueeze(0).data<float>()[23] = 6;                         // [1][2][3] again
  EXPECT_EQ(base.item_float({0, 0, 1}), 1.0f);
  EXPECT_EQ(base.item_float({0, 1, 2}), 3.0f);
  EXPECT_EQ(base.item_float({1, 0, 1}), 4.0f);
  EXPECT_EQ(base.item_float({0, 1, 1}), 5.0f);
  EXPECT_EQ(base.item_float({1, 2, 3}), 6.0f);
  // copy_ into a strided view writes only the viewed elements.
  base.select(2, 0).copy_(Tensor::full({2, 3}, 7.0f));
  std::vector<float> expected(24, 0.0f);
  for (int i = 0; i < 24; i += 4) expected[i] = 7;
  expected[1] = 1, expected[6] = 3, expected[13] = 4, expected[5] = 5, expected[23] = 6;
  EXPECT_EQ(elements(base), expected);
}

// ---- copies -----------------------------------------------------------------

TEST(TensorCopy, ContiguousReturnsSelfOrALogicalOrderCopy) {
  const Tensor base = arange({2, 3, 4});
  EXPECT_EQ(base.contiguous().raw_data(), base.raw_data());
  const Tensor t = base.transpose(0, 2).contiguous();
  EXPECT_NE(t.storage().get(), base.storage().get());
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{6, 2, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(aligned64(t));
  std::vector<float> expected;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 3; ++b) {
      for (int c = 0; c < 2; ++c) expected.push_back(float(c * 12 + b * 4 + a));
    }
  }
  EXPECT_EQ(std::vector<float>(t.data<float>(), t.data<float>() + 24), expected);

  const Tensor s = base.slice(2, 1, 3).select(1, 2).contiguous();  // [i][k] = i*12 + 8 + k+1
  EXPECT_EQ(std::vector<float>(s.data<float>(), s.data<float>() + 4),
            (std::vector<float>{9, 10, 21, 22}));
}

TEST(TensorCopy, CloneIsIndependent) {
  const Tensor base = arange({2, 3});
  const Tensor c = base.clone();
  EXPECT_NE(c.raw_data(), base.raw_data());
  EXPECT_EQ(elements(c), elements(base));
  c.data<float>()[0] = -1;
  EXPECT_EQ(base.item_float({0, 0}), 0.0f);
  const Tensor ct = base.transpose(0, 1).slice(0, 1, 3).clone();  // [[1, 4], [2, 5]]
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_EQ(elements(ct), (std::vector<float>{1, 4, 2, 5}));
}

TEST(TensorCopy, CloneOfStridedViewsForEveryElementSize) {
  const std::vector<int64_t> values = {0, -1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11};
  const Tensor i64 = Tensor::from_vector(values, {3, 4});
  const std::vector<int64_t> transposed = {0, 4, 8, -1, -5, -9, 2, 6, 10, -3, -7, -11};
  for (DType dtype : {DType::kI64, DType::kI32, DType::kF16, DType::kI8}) {
    const Tensor t = i64.to(dtype).transpose(0, 1).clone();
    ASSERT_EQ(t.dtype(), dtype);
    ASSERT_EQ(t.shape(), (Shape{4, 3}));
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_EQ(t.item_float({i / 3, i % 3}), float(transposed[i])) << dtype_name(dtype);
    }
  }
}

TEST(TensorCopy, CopyChecksShapeAndDType) {
  Tensor dst = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_OASR_ERROR(dst.copy_(Tensor::zeros({3, 2}, DType::kF32)), kInvalidArgument);
  EXPECT_OASR_ERROR(dst.copy_(Tensor::zeros({6}, DType::kF32)), kInvalidArgument);
  EXPECT_OASR_ERROR(dst.copy_(Tensor::zeros({2, 3}, DType::kF16)), kInvalidArgument);
  EXPECT_OASR_ERROR(dst.copy_(Tensor()), kInvalidArgument);
  EXPECT_EQ(elements(dst), std::vector<float>(6, 0.0f));  // untouched by the refusals
  dst.copy_(arange({3, 2}).transpose(0, 1));              // strided source
  EXPECT_EQ(elements(dst), (std::vector<float>{0, 2, 4, 1, 3, 5}));
}

// ---- dimensions, zero sizes, devices, item_float --------------------------------

TEST(Tensor, OutOfRangeDimensionsAreRefused) {
  const Tensor base = arange({2, 3, 4});
  EXPECT_EQ(base.size(-1), 4);
  EXPECT_EQ(base.size(-3), 2);
  EXPECT_OASR_ERROR(base.size(3), kInvalidArgument);
  EXPECT_OASR_ERROR(base.size(-4), kInvalidArgument);
  EXPECT_OASR_ERROR(base.slice(3, 0, 1), kInvalidArgument);
  EXPECT_OASR_ERROR(base.slice(-4, 0, 1), kInvalidArgument);
  EXPECT_OASR_ERROR(base.select(3, 0), kInvalidArgument);
  EXPECT_OASR_ERROR(base.transpose(0, 3), kInvalidArgument);
  EXPECT_OASR_ERROR(base.transpose(-4, 0), kInvalidArgument);
  EXPECT_OASR_ERROR(base.narrow(5, 0, 1), kInvalidArgument);
  EXPECT_OASR_ERROR(Tensor::full({}, 1.0f).select(0, 0), kInvalidArgument);
}

TEST(Tensor, ZeroSizeTensors) {
  const Tensor e = Tensor::empty({0, 3}, DType::kF32);
  EXPECT_TRUE(e.defined());
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  EXPECT_EQ(e.strides(), (Shape{3, 1}));
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(Tensor::zeros({0}, DType::kI64).numel(), 0);
  EXPECT_EQ(e.clone().shape(), e.shape());
  EXPECT_EQ(e.to(DType::kF16).shape(), e.shape());
  EXPECT_EQ(e.to(DType::kF16).dtype(), DType::kF16);
  EXPECT_EQ(e.view({-1}).shape(), (Shape{0}));
  EXPECT_EQ(e.view({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_OASR_ERROR(e.view({-1, 0}), kInvalidArgument);  // -1 is ambiguous
  EXPECT_OASR_ERROR(e.item_float({0, 0}), kInvalidArgument);
  const Tensor z = Tensor::empty({2, 0, 3}, DType::kBF16).transpose(0, 2);
  EXPECT_EQ(z.shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(z.contiguous().shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(z.clone().numel(), 0);
  EXPECT_EQ(arange({2, 3}).slice(1, 1, 1).clone().shape(), (Shape{2, 0}));
  Tensor dst = Tensor::empty({0, 3}, DType::kF32);
  EXPECT_NO_THROW(dst.copy_(e));
}

TEST(Tensor, DeviceMoves) {
  const Tensor x = arange({2, 2});
  EXPECT_EQ(x.to(Device::cpu()).raw_data(), x.raw_data());  // already there
#ifndef OASR_WITH_CUDA
  // A build without CUDA refuses by name rather than falling back.
  for (auto attempt : std::vector<std::function<void()>>{
           [&] { (void)x.to(Device::cuda()); },
           [&] { (void)Tensor::empty({2}, DType::kF32, Device::cuda()); },
           [&] { (void)Tensor::zeros({2}, DType::kF32, Device::cuda(1)); }}) {
    expect_error(attempt, ErrorCode::kUnsupported, "CUDA request", "CUDA");
  }
#endif
}

TEST(Tensor, ItemFloatReadsEveryDTypeThroughStrides) {
  EXPECT_EQ(Tensor::from_vector<int8_t>({-5, 7}, {2}).item_float({0}), -5.0f);
  EXPECT_EQ(Tensor::from_vector<uint8_t>({200, 1}, {2}).item_float({0}), 200.0f);
  EXPECT_EQ(Tensor::from_vector<int32_t>({-70000}, {1}).item_float({0}), -70000.0f);
  EXPECT_EQ(Tensor::from_vector<int64_t>({int64_t{1} << 40}, {1}).item_float({0}),
            1099511627776.0f);
  EXPECT_EQ(Tensor::from_vector<Half>({Half{0xC100}}, {1}).item_float({0}), -2.5f);
  EXPECT_EQ(Tensor::from_vector<BFloat16>({BFloat16{0x4040}}, {1}).item_float({0}), 3.0f);
  EXPECT_EQ(Tensor::from_vector<Float8E4M3>({Float8E4M3{0x7E}}, {1}).item_float({0}), 448.0f);
  EXPECT_TRUE(std::isnan(Tensor::from_vector<Float8E4M3>({Float8E4M3{0xFF}}, {1}).item_float({0})));
  const Tensor t = arange({3, 4}).transpose(0, 1);
  EXPECT_EQ(t.item_float({3, 2}), 11.0f);
  EXPECT_EQ(t.item_float({1, 2}), 9.0f);
  EXPECT_OASR_ERROR(t.item_float({1}), kInvalidArgument);  // wrong rank
  EXPECT_OASR_ERROR(t.item_float({1, 2, 0}), kInvalidArgument);
  EXPECT_OASR_ERROR(t.item_float({4, 0}), kInvalidArgument);  // past the end
  EXPECT_OASR_ERROR(t.item_float({0, -1}), kInvalidArgument);
}

}  // namespace
}  // namespace oasr
