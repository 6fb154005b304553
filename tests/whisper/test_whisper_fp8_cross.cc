// Under kv_cache=fp8_e4m3 Whisper's cross-attention memory is stored as e4m3
// codes with one power-of-two scale per (frame, head), like the self-attention
// cache (README "Quantization": the decoder's self- and cross-attention). The
// spec's test, at the model: decoding over the fp8 memory gives the bits of
// decoding over the served-dtype memory that holds its dequantized values
// (ops/kv_fp8.h's definition, whose own bits test_kv_cache checks), on the
// CPU and, where a GPU is visible, through the CUDA kernel that reads the
// codes in place (float32 / float16 / bfloat16; beams reading one memory row).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/device.h"
#include "ops/kv_fp8.h"
#include "random_whisper_model.h"

namespace oasr::models {
namespace {

// The served-dtype memory holding the fp8 memory's dequantized values.
WhisperModel::CrossKv dequantized(const WhisperModel::CrossKv& fp8, DType served) {
  WhisperModel::CrossKv out;
  const auto expand = [&](const Tensor& codes, const Tensor& scales) {
    const int64_t d = codes.size(3);
    return ops::dequantize_pow2_e4m3(codes.contiguous().view({codes.numel() / d, d}),
                                     scales.contiguous().view({scales.numel()}), served)
        .view(codes.shape());
  };
  for (size_t l = 0; l < fp8.keys.size(); ++l) {
    out.keys.push_back(expand(fp8.keys[l], fp8.key_scales[l]));
    out.values.push_back(expand(fp8.values[l], fp8.value_scales[l]));
  }
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).contiguous();
  const Tensor y = b.to(Device::cpu()).contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.numel() * dtype_size(x.dtype())) == 0;
}

// 3 decode steps of `rows` rows (beams of one utterance: every row reads
// memory row 0) over the fp8 memory and over its dequantized copy.
void expect_fp8_cross_equals_dequantized(DType dtype, Device device, int64_t rows) {
  const WhisperConfig config = testing::small_whisper_config(/*d_model=*/128, /*heads=*/2);
  auto model = testing::random_whisper_model(config);
  model->set_fp8_kv_cache(true);
  model->to(dtype);
  model->to(device);
  const WhisperModel::CrossKv fp8 =
      model->cross_kv(model->encode(testing::random_whisper_mel(config)));
  ASSERT_EQ(fp8.key_scales.size(), 2u);
  ASSERT_EQ(fp8.keys[0].dtype(), DType::kU8);
  ASSERT_EQ(fp8.key_scales[0].shape(), (Shape{1, 2, 24, 1}));
  const WhisperModel::CrossKv served = dequantized(fp8, dtype);
  ASSERT_TRUE(served.key_scales.empty());
  const std::vector<int64_t> cross_rows(static_cast<size_t>(rows), 0);
  layers::KvCache a = model->make_cache(rows, 8);
  layers::KvCache b = model->make_cache(rows, 8);
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < rows; ++r) ids.push_back((7 * step + 3 * r + 1) % config.vocab_size);
    const Tensor tokens = Tensor::from_vector<int64_t>(ids, {rows, 1});
    const Tensor over_fp8 = model->decode(tokens, fp8, cross_rows, a);
    const Tensor over_served = model->decode(tokens, served, cross_rows, b);
    EXPECT_TRUE(same_bits(over_fp8, over_served))
        << dtype_name(dtype) << " on " << device.str() << ", " << rows << " rows, step " << step;
  }
}

TEST(WhisperFp8Cross, MemoryIsStoredAsE4m3WithPowerOfTwoScales) {
  const WhisperConfig config = testing::small_whisper_config();
  auto model = testing::random_whisper_model(config);
  const WhisperModel::CrossKv plain =
      model->cross_kv(model->encode(testing::random_whisper_mel(config)));
  EXPECT_TRUE(plain.key_scales.empty());
  EXPECT_EQ(plain.keys[0].dtype(), DType::kF32);
  model->set_fp8_kv_cache(true);
  const WhisperModel::CrossKv fp8 =
      model->cross_kv(model->encode(testing::random_whisper_mel(config)));
  ASSERT_EQ(fp8.values.size(), 2u);
  EXPECT_EQ(fp8.values[1].dtype(), DType::kU8);
  EXPECT_EQ(fp8.values[1].shape(), plain.values[1].shape());
  const Tensor scales = fp8.value_scales[1].contiguous();
  for (int64_t i = 0; i < scales.numel(); ++i) {
    int exponent = 0;
    EXPECT_EQ(std::frexp(scales.data<float>()[i], &exponent), 0.5f) << i;  // a power of two
  }
}

TEST(WhisperFp8Cross, CpuDecodeEqualsTheDequantizedMemoryBitForBit) {
  expect_fp8_cross_equals_dequantized(DType::kF32, Device::cpu(), 1);
  expect_fp8_cross_equals_dequantized(DType::kF32, Device::cpu(), 3);
}

TEST(WhisperFp8Cross, CudaDecodeEqualsTheDequantizedMemoryBitForBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    expect_fp8_cross_equals_dequantized(dtype, Device::cuda(0), 1);
    expect_fp8_cross_equals_dequantized(dtype, Device::cuda(0), 5);
  }
}

}  // namespace
}  // namespace oasr::models
