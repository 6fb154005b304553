#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace oasr {
namespace {

TEST(Tensor, EmptyIsContiguousAndAligned) {
  Tensor t = Tensor::empty({3, 5}, DType::kF32);
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.nbytes(), 60u);
}

}  // namespace
}  // namespace oasr
