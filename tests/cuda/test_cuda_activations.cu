// DESIGN.md §3: the epilogue activations come from one implementation
// (core/activations.h) and host and device must agree bit for bit. This runs
// every function on the GPU over a strided sweep of all 2^32 float bit
// patterns plus every float near the branch points, and compares each
// result's bits with the host's.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "support/test_support.h"

namespace oasr {
namespace {

enum Function : int { kExp, kErf, kTanhDirect, kFirstApply };
constexpr int kNumFunctions = kFirstApply + 7;  // + every Activation enum value

__host__ __device__ float evaluate(int function, float x) {
  switch (function) {
    case kExp:
      return act::exp_f32(x);
    case kErf:
      return act::erf_f32(x);
    case kTanhDirect:
      return act::tanh_f32(x);
    default:
      return act::apply(static_cast<Activation>(function - kFirstApply), x);
  }
}

__global__ void evaluate_kernel(int function, const uint32_t* inputs, uint32_t* outputs,
                                int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    outputs[i] = float_bits(evaluate(function, bits_float(inputs[i])));
  }
}

std::vector<uint32_t> sweep_inputs() {
  std::vector<uint32_t> inputs;
  // Every 251st bit pattern: ~17M inputs spread over all exponents and signs.
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 251)
    inputs.push_back(static_cast<uint32_t>(bits));
  // Every float within 4096 ulps of each branch point of the implementations.
  for (float point : {0.0f, 0.3466f, 0.625f, 1.0f, 3.92f, 9.5f, 88.72f, -87.33f, -103.97f}) {
    for (float sign : {1.0f, -1.0f}) {
      const uint32_t center = float_bits(sign * point);
      for (int64_t d = -4096; d <= 4096; ++d) inputs.push_back(static_cast<uint32_t>(center + d));
    }
  }
  return inputs;
}

TEST(CudaActivations, EveryFunctionIsBitIdenticalToTheHost) {
  OASR_SKIP_WITHOUT_CUDA();
  const std::vector<uint32_t> inputs = sweep_inputs();
  const int64_t n = static_cast<int64_t>(inputs.size());
  uint32_t* d_in = nullptr;
  uint32_t* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, n * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, inputs.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<uint32_t> device_bits(n);
  for (int function = 0; function < kNumFunctions; ++function) {
    evaluate_kernel<<<1024, 256>>>(function, d_in, d_out, n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(device_bits.data(), d_out, n * sizeof(uint32_t), cudaMemcpyDeviceToHost),
              cudaSuccess);
    int64_t mismatches = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t host = float_bits(evaluate(function, bits_float(inputs[i])));
      if (host != device_bits[i]) {
        if (first < 0) first = i;
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << "function " << function << ": first mismatch at input "
                             << (first >= 0 ? bits_float(inputs[first]) : 0.0f);
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

}  // namespace
}  // namespace oasr
