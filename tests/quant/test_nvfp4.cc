// NVFP4 at the format level (src/quant/nvfp4.h), against references written
// here from the format's definition: the E2M1 value table of the OCP MX
// specification, brute-force nearest-value rounding, the documented nibble
// order, and the 128x4 scale layout rebuilt as an index permutation of the
// padded scale matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/float_types.h"
#include "quant/nvfp4.h"

namespace oasr::quant::nvfp4 {
namespace {

// E2M1 magnitudes for codes 0..7 (OCP Microscaling Formats spec, FP4 E2M1).
constexpr std::array<float, 8> kE2m1Table = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Nearest code by brute force: smallest distance, ties to the even code,
// anything beyond 6 saturates to 6; the sign is taken from the sign bit.
uint8_t brute_force_e2m1(float value) {
  // Saturation first: beyond 6 (infinity included) the result is 6, and
  // distances to far-away huge values would tie in double precision.
  const double magnitude = std::fmin(std::fabs(static_cast<double>(value)), 6.0);
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 8; ++code) {
    const double distance = std::fabs(magnitude - kE2m1Table[code]);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
      best = code;
      best_distance = distance;
    }
  }
  return static_cast<uint8_t>((std::signbit(value) ? 8 : 0) | best);
}

TEST(Nvfp4E2m1, DecodesEveryCodeToTheSpecTable) {
  for (uint8_t code = 0; code < 16; ++code) {
    const float magnitude = kE2m1Table[code & 7];
    const float expected = (code & 8) != 0 ? -magnitude : magnitude;
    EXPECT_EQ(float_bits(e2m1_to_float(code)), float_bits(expected)) << "code " << int(code);
  }
  EXPECT_TRUE(std::signbit(e2m1_to_float(8)));  // code 8 is -0
}

TEST(Nvfp4E2m1, EncodesEveryRepresentableValueToItsCode) {
  for (uint8_t code = 0; code < 16; ++code) {
    EXPECT_EQ(float_to_e2m1(e2m1_to_float(code)), code) << "code " << int(code);
  }
}

TEST(Nvfp4E2m1, RoundsToNearestTiesToEvenAndSaturates) {
  std::vector<float> probes;
  // Every multiple of 1/256 in [-8, 8] (includes every midpoint), then the
  // float neighbours of each midpoint and a few extremes.
  for (int i = -2048; i <= 2048; ++i) probes.push_back(static_cast<float>(i) / 256.0f);
  for (float midpoint : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f}) {
    for (float sign : {1.0f, -1.0f}) {
      const float m = sign * midpoint;
      probes.push_back(std::nextafter(m, 0.0f));
      probes.push_back(std::nextafter(m, 100.0f * m));
    }
  }
  for (float extreme : {1e-30f, 6.5f, 7.0f, 1e30f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::denorm_min()}) {
    probes.push_back(extreme);
    probes.push_back(-extreme);
  }
  for (float value : probes) {
    EXPECT_EQ(float_to_e2m1(value), brute_force_e2m1(value)) << "value " << value;
  }
  EXPECT_EQ(float_to_e2m1(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(Nvfp4Packing, EvenElementInTheLowNibbleForEveryByte) {
  for (int byte = 0; byte < 256; ++byte) {
    const uint8_t even = unpack_e2m1(static_cast<uint8_t>(byte), 0);
    const uint8_t odd = unpack_e2m1(static_cast<uint8_t>(byte), 1);
    EXPECT_EQ(even, byte & 0xf);
    EXPECT_EQ(odd, byte >> 4);
    EXPECT_EQ(pack_e2m1_pair(even, odd), byte);
  }
}

// One row holding all 16 codes in order. Its largest value is 6, so the
// block step is 1 up to an ulp and every value keeps its own code.
TEST(Nvfp4Packing, QuantizedRowPacksEveryCodeInOrder) {
  std::vector<float> row;
  for (uint8_t code = 0; code < 16; ++code) row.push_back(e2m1_to_float(code));
  const Nvfp4Weight q = quantize_weight(Tensor::from_vector(row, {1, 16}));
  ASSERT_EQ(q.packed.shape(), Shape({1, 8}));
  const uint8_t* bytes = q.packed.data<uint8_t>();
  for (int j = 0; j < 8; ++j) {
    const uint8_t expected_even = brute_force_e2m1(row[2 * j]);
    const uint8_t expected_odd = brute_force_e2m1(row[2 * j + 1]);
    EXPECT_EQ(bytes[j], expected_even | (expected_odd << 4)) << "byte " << j;
  }
  // Decoded back: the values themselves (every code is representable).
  const Tensor back = dequantize_weight(q);
  for (int i = 0; i < 16; ++i) {
    EXPECT_NEAR(back.data<float>()[i], row[i], 1e-6f * std::fabs(row[i])) << i;
  }
}

// The 128x4 layout rebuilt as a permutation: the padded [R, C] matrix viewed
// as [R/128][4][32][C/4][4] (row = tile*128 + quarter*32 + lane, col =
// group*4 + c) and stored in the order [tile][group][lane][quarter][c].
std::vector<int64_t> permuted_offsets(int64_t rows, int64_t cols) {
  const int64_t padded_rows = (rows + 127) / 128 * 128;
  const int64_t padded_cols = (cols + 3) / 4 * 4;
  std::vector<int64_t> offset_of(padded_rows * padded_cols);
  int64_t position = 0;
  for (int64_t tile = 0; tile < padded_rows / 128; ++tile) {
    for (int64_t group = 0; group < padded_cols / 4; ++group) {
      for (int64_t lane = 0; lane < 32; ++lane) {
        for (int64_t quarter = 0; quarter < 4; ++quarter) {
          for (int64_t c = 0; c < 4; ++c) {
            const int64_t row = tile * 128 + quarter * 32 + lane;
            offset_of[row * padded_cols + group * 4 + c] = position++;
          }
        }
      }
    }
  }
  return offset_of;
}

TEST(Nvfp4Layout, Offset128x4IsThePermutationOfThePaddedMatrix) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {32, 4}, {127, 5}, {128, 4}, {129, 8}, {300, 7}, {256, 12}}) {
    const std::vector<int64_t> expected = permuted_offsets(rows, cols);
    const int64_t padded_cols = (cols + 3) / 4 * 4;
    for (int64_t row = 0; row < (rows + 127) / 128 * 128; ++row) {
      for (int64_t col = 0; col < padded_cols; ++col) {
        ASSERT_EQ(scale_offset_128x4(row, col, padded_cols), expected[row * padded_cols + col])
            << rows << "x" << cols << " at (" << row << ", " << col << ")";
      }
    }
  }
}

Tensor random_scales(int64_t rows, int64_t cols, std::mt19937& rng) {
  Tensor scales = Tensor::empty({rows, cols}, DType::kF8E4M3);
  auto* bits = reinterpret_cast<uint8_t*>(scales.raw_data());
  for (int64_t i = 0; i < rows * cols; ++i) bits[i] = static_cast<uint8_t>(1 + rng() % 0x7e);
  return scales;
}

TEST(Nvfp4Layout, SwizzlePadsWithZerosAndRoundTrips) {
  std::mt19937 rng(7);
  for (auto [n, blocks] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 3}, {128, 4}, {200, 9}}) {
    const Tensor linear = random_scales(n, blocks, rng);
    const Tensor swizzled = swizzle_block_scales(linear);
    const Shape shape = block_scale_shape(ScaleLayout::k128x4, n, blocks * kBlockSize);
    ASSERT_EQ(swizzled.shape(), shape);
    EXPECT_EQ(shape[0] % 128, 0);
    EXPECT_EQ(shape[1] % 4, 0);
    const std::vector<int64_t> offsets = permuted_offsets(n, blocks);
    const auto* in = reinterpret_cast<const uint8_t*>(linear.raw_data());
    const auto* out = reinterpret_cast<const uint8_t*>(swizzled.raw_data());
    for (int64_t row = 0; row < shape[0]; ++row) {
      for (int64_t col = 0; col < shape[1]; ++col) {
        const uint8_t expected = row < n && col < blocks ? in[row * blocks + col] : 0;
        ASSERT_EQ(out[offsets[row * shape[1] + col]], expected) << row << ", " << col;
      }
    }
    const Tensor back = unswizzle_block_scales(swizzled, n, blocks * kBlockSize);
    ASSERT_EQ(back.shape(), linear.shape());
    EXPECT_EQ(std::memcmp(back.raw_data(), linear.raw_data(), linear.nbytes()), 0);
  }
}

// Round trip on random weights: every element decodes to e2m1(code) * step,
// the code is the nearest value to w / step, and where the block scale is a
// normal e4m3 number the error is at most one block step (the E2M1 spacing
// is 2 at the top of the range, and the scale's rounding (2^-4 relative)
// can push the largest value to 6.375 steps, 0.375 beyond saturation).
TEST(Nvfp4RoundTrip, ErrorWithinOneBlockStepAndCodesAreNearest) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::k128x4}) {
    const int64_t n = 37, k = 96;
    std::vector<float> values(n * k);
    for (float& v : values) v = normal(rng) * (rng() % 10 == 0 ? 8.0f : 1.0f);
    const Tensor weight = Tensor::from_vector(values, {n, k});
    const Nvfp4Weight q = quantize_weight(weight, layout);
    EXPECT_EQ(q.block_scale.shape(), block_scale_shape(layout, n, k));
    const Tensor back = dequantize_weight(q);
    const Tensor scales = layout == ScaleLayout::kLinear
                              ? q.block_scale
                              : unswizzle_block_scales(q.block_scale, n, k);
    const auto* scale_bits = reinterpret_cast<const uint8_t*>(scales.raw_data());
    float amax = 0.0f;
    for (float v : values) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(q.global_scale, amax / 2688.0f);
    double worst_ratio = 0.0;
    for (int64_t row = 0; row < n; ++row) {
      for (int64_t block = 0; block < k / kBlockSize; ++block) {
        const uint8_t scale = scale_bits[row * (k / kBlockSize) + block];
        ASSERT_GE(scale, 0x08) << "a subnormal scale: this data should not produce one";
        const float step = e4m3_bits_to_f32(scale) * q.global_scale;
        for (int64_t i = block * kBlockSize; i < (block + 1) * kBlockSize; ++i) {
          const float w = values[row * k + i];
          const uint8_t code = unpack_e2m1(q.packed.data<uint8_t>()[row * k / 2 + i / 2], i);
          EXPECT_EQ(code, brute_force_e2m1(w / step)) << row << ", " << i;
          const float decoded = back.data<float>()[row * k + i];
          EXPECT_EQ(decoded, e2m1_to_float(code) * step);
          worst_ratio = std::max(worst_ratio, std::fabs(double(w) - decoded) / step);
        }
      }
    }
    EXPECT_LE(worst_ratio, 1.0);
    EXPECT_GT(worst_ratio, 0.1);  // the data does exercise rounding
  }
}

TEST(Nvfp4RoundTrip, AllZeroWeightGivesZeroCodesAndZeroOutput) {
  const Nvfp4Weight q = quantize_weight(Tensor::zeros({2, 32}, DType::kF32));
  const Tensor back = dequantize_weight(q);
  for (int64_t i = 0; i < back.numel(); ++i) EXPECT_EQ(back.data<float>()[i], 0.0f);
  for (int64_t i = 0; i < q.packed.numel(); ++i) EXPECT_EQ(q.packed.data<uint8_t>()[i], 0);
}

TEST(Nvfp4Refusals, NameTheProblem) {
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message_of([] {
              quantize_weight(Tensor::zeros({2, 24}, DType::kF32));
            }).find("multiple of 16"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              quantize_weight(Tensor::full({1, 16}, std::numeric_limits<float>::infinity()));
            }).find("non-finite"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              quantize_weight(Tensor::zeros({2, 32}, DType::kF16));
            }).find("float32 [N, K]"),
            std::string::npos);
  EXPECT_NE(message_of([] { parse_scale_layout("swizzled"); }).find("linear, 128x4"),
            std::string::npos);
  EXPECT_EQ(parse_scale_layout("128x4"), ScaleLayout::k128x4);
  EXPECT_EQ(to_string(ScaleLayout::kLinear), "linear");
}

}  // namespace
}  // namespace oasr::quant::nvfp4
