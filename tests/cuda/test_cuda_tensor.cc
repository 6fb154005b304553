// Tensor storage on the GPU: allocation, host<->device round trips, views,
// zero-fill and the caching allocator's reuse. Runs on the GPU machine.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace oasr {
namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t.to(dtype);
}

TEST(CudaTensor, RoundTripIsBitExactForEveryDType) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : {Shape{0}, Shape{1}, Shape{3, 5}, Shape{17, 129, 3}}) {
      Tensor host = random_tensor(shape, dtype, 7);
      Tensor device = host.to(Device::cuda());
      EXPECT_TRUE(device.device().is_cuda());
      EXPECT_EQ(device.shape(), shape);
      Tensor back = device.to(Device::cpu());
      EXPECT_TRUE(testing::bit_equal(back, host)) << dtype_name(dtype) << shape_str(shape);
    }
  }
}

TEST(CudaTensor, SlicedViewCopiesTheRightElements) {
  OASR_SKIP_WITHOUT_CUDA();
  Tensor host = random_tensor({8, 16}, DType::kF32, 3);
  Tensor rows = host.slice(0, 2, 5);  // contiguous view with an offset
  Tensor back = rows.to(Device::cuda()).to(Device::cpu());
  EXPECT_TRUE(testing::bit_equal(back, rows.clone()));
  Tensor cols = host.slice(1, 3, 9);  // strided view: to() makes it contiguous first
  EXPECT_TRUE(testing::bit_equal(cols.to(Device::cuda()).to(Device::cpu()), cols.clone()));
  // A device-side slice of a device tensor reads at the right offset.
  Tensor on_device = host.to(Device::cuda());
  EXPECT_TRUE(
      testing::bit_equal(on_device.slice(0, 6, 8).to(Device::cpu()), host.slice(0, 6, 8).clone()));
}

TEST(CudaTensor, ZerosAndDeviceToDeviceCopy) {
  OASR_SKIP_WITHOUT_CUDA();
  Tensor z = Tensor::zeros({1000}, DType::kBF16, Device::cuda());
  Tensor host = z.to(Device::cpu());
  for (int64_t i = 0; i < host.numel(); ++i) ASSERT_EQ(host.data<BFloat16>()[i].bits, 0);
  Tensor a = random_tensor({64, 64}, DType::kF16, 11).to(Device::cuda());
  Tensor b = a.clone();  // device -> device
  EXPECT_NE(a.raw_data(), b.raw_data());
  EXPECT_TRUE(testing::bit_equal(b.to(Device::cpu()), a.to(Device::cpu())));
}

TEST(CudaTensor, AllocationsAreAlignedAndReused) {
  OASR_SKIP_WITHOUT_CUDA();
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::kF32, Device::cuda());
    first = t.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  // Stream-ordered free then alloc of the same size reuses the pool block.
  Tensor again = Tensor::empty({1 << 20}, DType::kF32, Device::cuda());
  EXPECT_EQ(again.raw_data(), first);
}

// Every bit pattern of each 8/16-bit dtype, and random float32/int bit
// patterns, as raw bytes of `dtype`.
Tensor all_patterns(DType dtype) {
  const size_t size = dtype_size(dtype);
  const int64_t n = size == 1 ? 256 : size == 2 ? 65536 : 1 << 20;
  Tensor t = Tensor::empty({n}, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw_data());
  std::mt19937_64 rng(42);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t pattern = size <= 2 ? static_cast<uint64_t>(i) : rng();
    if (size > 2 && i < 64) pattern = static_cast<uint64_t>(i) << 20;  // tiny/subnormal values
    std::memcpy(bytes + i * size, &pattern, size);
  }
  return t;
}

TEST(CudaTensor, DTypeConversionIsBitIdenticalToCpu) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType from : kAllDTypes) {
    Tensor host = all_patterns(from);
    Tensor device = host.to(Device::cuda());
    for (DType to : kAllDTypes) {
      Tensor on_cpu = host.to(to);
      Tensor on_gpu = device.to(to);
      ASSERT_TRUE(on_gpu.device().is_cuda());
      EXPECT_TRUE(testing::bit_equal(on_gpu.to(Device::cpu()), on_cpu))
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(CudaTensor, BadDeviceIndexIsRefused) {
  OASR_SKIP_WITHOUT_CUDA();
  try {
    Tensor::empty({4}, DType::kF32, Device::cuda(cuda_device_count()));
    FAIL() << "allocation on a non-existent device succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(CudaTensor, SkipsOrRunsCleanlyWithoutGpu) {
  // Documents the CI contract: without a GPU the CUDA build reports none.
  if (!cuda_available()) {
    EXPECT_EQ(cuda_device_count(), 0);
    EXPECT_THROW(Tensor::empty({4}, DType::kF32, Device::cuda()), Error);
  } else {
    EXPECT_GT(cuda_device_count(), 0);
  }
}

}  // namespace
}  // namespace oasr
