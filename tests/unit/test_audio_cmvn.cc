// GlobalCmvn (audio/cmvn.h): (x - mean) * istd per column, in float32 with
// two roundings like WeNet's module, and its refusals.
#include <gtest/gtest.h>

#include "audio/cmvn.h"
#include "support/test_support.h"
#include "unit/test_audio_util.h"

namespace oasr {
namespace {

using audio::GlobalCmvn;
using testing::bit_equal;
using testing::expect_error;

Tensor features_3x4() {
  return Tensor::from_vector<float>(
      {1.5f, -2.0f, 10.25f, 0.0f, 3.0f, 4.5f, -7.0f, 1e-3f, -0.5f, 8.0f, 2.0f, 100.0f}, {3, 4});
}

TEST(GlobalCmvn, SubtractsTheMeanThenScales) {
  const std::vector<float> mean = {1.0f, -1.0f, 2.5f, 0.1f};
  const std::vector<float> istd = {0.5f, 2.0f, 0.1f, 3.0f};
  const GlobalCmvn cmvn(Tensor::from_vector(mean, {4}), Tensor::from_vector(istd, {4}));
  EXPECT_EQ(cmvn.dim(), 4);
  const Tensor x = features_3x4();
  const Tensor y = cmvn.apply(x);
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      // float32, subtract then multiply: what (x - mean) * istd does in PyTorch.
      const float centred = x.item_float({r, c}) - mean[static_cast<size_t>(c)];
      EXPECT_EQ(y.item_float({r, c}), centred * istd[static_cast<size_t>(c)]) << r << "," << c;
    }
  }
  // apply() left its input alone; apply_() writes in place.
  EXPECT_TRUE(bit_equal(x, features_3x4()));
  Tensor z = features_3x4();
  cmvn.apply_(z);
  EXPECT_TRUE(bit_equal(z, y));
}

TEST(GlobalCmvn, MeanOnlyWhenVarianceIsNotNormalised) {
  const GlobalCmvn cmvn(Tensor::from_vector<float>({1, 2, 3, 4}, {4}),
                        Tensor::from_vector<float>({9, 9, 9, 9}, {4}),
                        /*normalize_variance=*/false);
  const Tensor y = cmvn.apply(features_3x4());
  EXPECT_EQ(y.item_float({1, 2}), -7.0f - 3.0f);
  EXPECT_EQ(y.item_float({2, 3}), 100.0f - 4.0f);
}

TEST(GlobalCmvn, AcceptsBatchesAndStridedViews) {
  const GlobalCmvn cmvn(Tensor::from_vector<float>({1, 2, 3}, {3}),
                        Tensor::from_vector<float>({2, 2, 2}, {3}));
  // [4, 3] viewed through a transpose of [3, 4]: not contiguous.
  const Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  const Tensor view = base.transpose(0, 1);
  ASSERT_FALSE(view.is_contiguous());
  const Tensor y = cmvn.apply(view);
  EXPECT_EQ(y.item_float({1, 2}), (9.0f - 3.0f) * 2.0f);  // view[1][2] = base[2][1]
  const Tensor batched = cmvn.apply(view.contiguous().view({2, 2, 3}));
  EXPECT_TRUE(bit_equal(batched.view({4, 3}), y));
  Tensor strided = view;
  expect_error([&] { cmvn.apply_(strided); }, ErrorCode::kInvalidArgument, {"contiguous"});
}

TEST(GlobalCmvn, RefusesMismatchedOrDamagedStatistics) {
  const Tensor four = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
  expect_error(
      [&] {
        GlobalCmvn(four, Tensor::from_vector<float>({1, 2, 3}, {3}));
      },
      ErrorCode::kInvalidArgument, {"mean has 4", "istd has 3"});
  expect_error(
      [&] {
        GlobalCmvn(four.view({2, 2}), four);
      },
      ErrorCode::kInvalidArgument, {"mean", "1-D"});
  expect_error(
      [&] {
        GlobalCmvn(four, Tensor::from_vector<int32_t>({1, 2, 3, 4}, {4}));
      },
      ErrorCode::kInvalidArgument, {"istd", "float32"});
  expect_error(
      [&] {
        GlobalCmvn(four, Tensor::from_vector<float>({1, NAN, 3, 4}, {4}));
      },
      ErrorCode::kInvalidArgument, {"istd[1]", "not finite"});
  expect_error([&] { GlobalCmvn(Tensor(), four); }, ErrorCode::kInvalidArgument,
               {"mean", "undefined"});
  const GlobalCmvn cmvn(four, four);
  expect_error(
      [&] {
        cmvn.apply(Tensor::zeros({2, 5}, DType::kF32));
      },
      ErrorCode::kInvalidArgument, {"CMVN dimension 4"});
  expect_error(
      [&] {
        cmvn.apply(Tensor::zeros({2, 4}, DType::kI32));
      },
      ErrorCode::kInvalidArgument, {"float32"});
}

}  // namespace
}  // namespace oasr
