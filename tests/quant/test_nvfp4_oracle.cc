// NVFP4 quantize / dequantize / 128x4 layout against tests/oracle/gen_nvfp4.py,
// a definition-level reimplementation (brute-force nearest-value rounding,
// numpy float32 arithmetic, the 128x4 layout as a torch view/permute). Every
// comparison is bitwise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "quant/nvfp4.h"
#include "support/test_support.h"

namespace oasr::quant::nvfp4 {
namespace {

// The same bytes, whatever the dtype label (the oracle stores e4m3 bits as uint8).
::testing::AssertionResult same_bytes(const Tensor& actual, const Tensor& expected) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << " vs " << shape_str(expected.shape());
  }
  const Tensor a = actual.contiguous();
  const Tensor e = expected.contiguous();
  if (a.nbytes() != e.nbytes()) return ::testing::AssertionFailure() << "byte sizes differ";
  const auto* pa = static_cast<const uint8_t*>(a.raw_data());
  const auto* pe = static_cast<const uint8_t*>(e.raw_data());
  for (size_t i = 0; i < a.nbytes(); ++i) {
    if (pa[i] != pe[i]) {
      return ::testing::AssertionFailure()
             << "byte " << i << ": " << int(pa[i]) << " vs " << int(pe[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

class Nvfp4Oracle : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::make_unique<io::SafeTensorsFile>(
        io::SafeTensorsFile::open(testing::oracle_dir() / "cases.safetensors"));
  }
  std::vector<std::string> cases(const char* key) const {
    return nlohmann::json::parse(file_->metadata().at(key)).get<std::vector<std::string>>();
  }
  std::unique_ptr<io::SafeTensorsFile> file_;
};

TEST_F(Nvfp4Oracle, QuantizeAndDequantizeMatchBitForBit) {
  const auto names = cases("quant_cases");
  ASSERT_GE(names.size(), 6u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Tensor weight = file_->get(name + "/weight");
    for (ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::k128x4}) {
      SCOPED_TRACE(std::string(to_string(layout)));
      const Nvfp4Weight q = quantize_weight(weight, layout);
      EXPECT_TRUE(same_bytes(q.packed, file_->get(name + "/packed")));
      const char* scale_name = layout == ScaleLayout::kLinear ? "/scale_linear" : "/scale_128x4";
      EXPECT_EQ(q.block_scale.dtype(), DType::kF8E4M3);
      EXPECT_TRUE(same_bytes(q.block_scale, file_->get(name + scale_name)));
      const float expected_global = file_->get(name + "/global_scale").data<float>()[0];
      EXPECT_EQ(float_bits(q.global_scale), float_bits(expected_global));
      EXPECT_TRUE(testing::bit_equal(dequantize_weight(q), file_->get(name + "/dequant")));
    }
  }
}

TEST_F(Nvfp4Oracle, SwizzleMatchesTheTorchPermutation) {
  const auto names = cases("layout_cases");
  ASSERT_GE(names.size(), 6u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const Tensor linear_bytes = file_->get(name + "/linear");
    Tensor linear = Tensor::empty(linear_bytes.shape(), DType::kF8E4M3);
    std::memcpy(linear.raw_data(), linear_bytes.contiguous().raw_data(), linear.nbytes());
    const Tensor swizzled = swizzle_block_scales(linear);
    EXPECT_TRUE(same_bytes(swizzled, file_->get(name + "/swizzled")));
    const Tensor back =
        unswizzle_block_scales(swizzled, linear.size(0), linear.size(1) * kBlockSize);
    EXPECT_TRUE(same_bytes(back, linear));
  }
}

}  // namespace
}  // namespace oasr::quant::nvfp4
