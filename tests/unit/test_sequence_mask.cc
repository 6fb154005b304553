// ops::zero_tail_frames: frames past each row's length become exactly +0,
// kept frames keep their exact bits, and nothing is copied when no row is
// padded. Expected values are written out element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/hd.h"
#include "ops/sequence_mask.h"
#include "support/test_support.h"

namespace oasr {
namespace {

// x[b, t, c] = 100 b + 10 t + c + 1 (never 0, so a zero can only come from masking).
Tensor counting_input(int64_t batch, int64_t frames, int64_t channels) {
  std::vector<float> values;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t c = 0; c < channels; ++c)
        values.push_back(static_cast<float>(100 * b + 10 * t + c + 1));
  return Tensor::from_vector(values, {batch, frames, channels});
}

// Checks every element of out against x masked by `lengths` (already clamped).
void expect_masked(const Tensor& out, const Tensor& x, const std::vector<int64_t>& lengths) {
  ASSERT_EQ(out.shape(), x.shape());
  ASSERT_EQ(out.dtype(), DType::kF32);
  for (int64_t b = 0; b < x.size(0); ++b) {
    for (int64_t t = 0; t < x.size(1); ++t) {
      for (int64_t c = 0; c < x.size(2); ++c) {
        const float got = out.item_float({b, t, c});
        if (t < lengths[static_cast<size_t>(b)]) {
          EXPECT_EQ(float_bits(got), float_bits(x.item_float({b, t, c})))
              << "kept frame b=" << b << " t=" << t << " c=" << c;
        } else {
          EXPECT_EQ(float_bits(got), 0u) << "padded frame b=" << b << " t=" << t << " c=" << c;
        }
      }
    }
  }
}

TEST(ZeroTailFrames, ZeroesFramesPastEachLength) {
  const Tensor x = counting_input(3, 4, 2);
  const std::vector<int64_t> lengths = {4, 1, 3};
  const Tensor out = ops::zero_tail_frames(x, lengths);
  EXPECT_NE(out.raw_data(), x.raw_data());
  expect_masked(out, x, lengths);
  // Spot values written out: row 1 keeps t = 0 only; row 2 drops t = 3.
  EXPECT_EQ(out.item_float({1, 0, 1}), 102.0f);
  EXPECT_EQ(out.item_float({1, 1, 0}), 0.0f);
  EXPECT_EQ(out.item_float({2, 2, 1}), 222.0f);
  EXPECT_EQ(out.item_float({2, 3, 0}), 0.0f);
  // x itself is untouched.
  EXPECT_EQ(x.item_float({1, 3, 1}), 132.0f);
}

TEST(ZeroTailFrames, ClampsLengthsToTheFrameCount) {
  const Tensor x = counting_input(3, 3, 2);
  const Tensor out = ops::zero_tail_frames(x, std::vector<int64_t>{-5, 7, 0});
  expect_masked(out, x, {0, 3, 0});
}

TEST(ZeroTailFrames, ReturnsXItselfWhenNothingIsPadded) {
  const Tensor x = counting_input(2, 3, 4);
  const Tensor out = ops::zero_tail_frames(x, std::vector<int64_t>{3, 9});
  EXPECT_EQ(out.raw_data(), x.raw_data());
  EXPECT_EQ(out.storage(), x.storage());
}

TEST(ZeroTailFrames, KeepsExactBitsOfKeptFramesAndWritesPositiveZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector<float>({-0.0f, nan, inf, -inf, 1e-45f, -3.5f}, {1, 3, 2});
  const Tensor out = ops::zero_tail_frames(x, std::vector<int64_t>{2});
  EXPECT_EQ(float_bits(out.item_float({0, 0, 0})), float_bits(-0.0f));
  EXPECT_EQ(float_bits(out.item_float({0, 0, 1})), float_bits(nan));
  EXPECT_EQ(out.item_float({0, 1, 0}), inf);
  EXPECT_EQ(out.item_float({0, 1, 1}), -inf);
  EXPECT_EQ(float_bits(out.item_float({0, 2, 0})), 0u);  // a denormal becomes +0
  EXPECT_EQ(float_bits(out.item_float({0, 2, 1})), 0u);  // -3.5 becomes +0, not -0
}

TEST(ZeroTailFrames, ServesANonContiguousView) {
  // [T, B, C] transposed to a [B, T, C] view.
  const Tensor base = counting_input(4, 2, 3);
  const Tensor x = base.transpose(0, 1);
  ASSERT_FALSE(x.is_contiguous());
  const std::vector<int64_t> lengths = {2, 4};
  const Tensor out = ops::zero_tail_frames(x, lengths);
  EXPECT_TRUE(out.is_contiguous());
  expect_masked(out, x, lengths);
  EXPECT_EQ(out.item_float({1, 1, 2}), base.item_float({1, 1, 2}));
  EXPECT_EQ(out.item_float({0, 2, 0}), 0.0f);
}

template <typename Fn>
void expect_error(Fn&& fn, ErrorCode code, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected an oasr::Error (" << error_code_name(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message '" << e.what() << "' lacks '" << fragment << "'";
    }
  }
}

TEST(ZeroTailFrames, Refusals) {
  const Tensor x = counting_input(2, 4, 3);
  expect_error(
      [&] {
        ops::zero_tail_frames(x, std::vector<int64_t>{1, 2, 3});
      },
      ErrorCode::kInvalidArgument,
      {"zero_tail_frames", "lengths", "3 entries", "[2, 4, 3]", "2 rows"});
  expect_error([&] { ops::zero_tail_frames(x, std::vector<int64_t>{}); },
               ErrorCode::kInvalidArgument, {"zero_tail_frames", "0 entries"});
  expect_error(
      [&] {
        ops::zero_tail_frames(x.view({8, 3}), std::vector<int64_t>{1, 2});
      },
      ErrorCode::kInvalidArgument, {"zero_tail_frames", "'x'", "3-d", "[8, 3]"});
  expect_error(
      [&] {
        ops::zero_tail_frames(x.to(DType::kBF16), std::vector<int64_t>{1, 2});
      },
      ErrorCode::kUnsupported, {"zero_tail_frames", "bfloat16", "float32"});
  expect_error(
      [&] {
        ops::zero_tail_frames(x.to(DType::kI32), std::vector<int64_t>{1, 2});
      },
      ErrorCode::kInvalidArgument, {"zero_tail_frames", "int32"});
  expect_error([&] { ops::zero_tail_frames(Tensor(), std::vector<int64_t>{}); },
               ErrorCode::kInvalidArgument, {"zero_tail_frames", "'x'", "undefined"});
}

// The CUDA body against the CPU body, bit for bit, for every dtype it serves
// (skipped where no GPU is visible).
TEST(ZeroTailFrames, CudaBodyMatchesCpuBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor x = counting_input(3, 5, 7);
  const std::vector<int64_t> lengths = {5, 2, 0};
  const Tensor expected = ops::zero_tail_frames(x, lengths);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const Tensor on_device = x.to(dtype).to(Device::cuda());
    const Tensor out = ops::zero_tail_frames(on_device, lengths);
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_TRUE(out.device().is_cuda());
    // Masking commutes with the dtype conversion (+0 is +0 in every dtype).
    EXPECT_TRUE(testing::bit_equal(out.to(Device::cpu()), expected.to(dtype))) << dtype_name(dtype);
    const Tensor unpadded = ops::zero_tail_frames(on_device, std::vector<int64_t>{5, 5, 5});
    EXPECT_EQ(unpadded.raw_data(), on_device.raw_data());
  }
}

// The lengths-as-a-tensor overload (what a recorded device graph replays)
// masks exactly as the span overload, clamping out-of-range lengths itself,
// and always returns a copy.
TEST(ZeroTailFrames, TensorLengthsMaskLikeTheSpan) {
  const Tensor x = counting_input(4, 5, 3);
  const std::vector<int64_t> lengths = {5, 2, 0, 9};
  const Tensor out = ops::zero_tail_frames(x, Tensor::from_vector<int64_t>({5, 2, -3, 9}, {4}));
  EXPECT_NE(out.raw_data(), x.raw_data());
  expect_masked(out, x, {5, 2, 0, 5});
  EXPECT_TRUE(testing::bit_equal(out, ops::zero_tail_frames(x, lengths)));
  const Tensor full = ops::zero_tail_frames(x, Tensor::from_vector<int64_t>({5, 5, 5, 5}, {4}));
  EXPECT_NE(full.raw_data(), x.raw_data());
  EXPECT_TRUE(testing::bit_equal(full, x));
}

TEST(ZeroTailFrames, TensorLengthsRefusals) {
  const Tensor x = counting_input(2, 4, 3);
  expect_error(
      [&] {
        ops::zero_tail_frames(x, Tensor::from_vector<int32_t>({1, 2}, {2}));
      },
      ErrorCode::kInvalidArgument, {"zero_tail_frames", "lengths", "int64 [2]", "int32"});
  expect_error(
      [&] {
        ops::zero_tail_frames(x, Tensor::from_vector<int64_t>({1, 2, 3}, {3}));
      },
      ErrorCode::kInvalidArgument, {"zero_tail_frames", "int64 [2]", "[3]"});
  expect_error([&] { ops::zero_tail_frames(x, Tensor()); }, ErrorCode::kInvalidArgument,
               {"zero_tail_frames", "'lengths'", "undefined"});
}

TEST(ZeroTailFrames, CudaTensorLengthsMatchCpuBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor x = counting_input(3, 5, 7);
  const std::vector<int64_t> lengths = {5, 2, -1};
  const Tensor expected = ops::zero_tail_frames(x, std::vector<int64_t>{5, 2, 0});
  const Tensor device_lengths = Tensor::from_vector(lengths, {3}).to(Device::cuda());
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const Tensor out = ops::zero_tail_frames(x.to(dtype).to(Device::cuda()), device_lengths);
    EXPECT_TRUE(testing::bit_equal(out.to(Device::cpu()), expected.to(dtype))) << dtype_name(dtype);
  }
  expect_error(
      [&] { ops::zero_tail_frames(x.to(Device::cuda()), Tensor::from_vector(lengths, {3})); },
      ErrorCode::kInvalidArgument, {"zero_tail_frames", "lengths"});
}

}  // namespace
}  // namespace oasr
