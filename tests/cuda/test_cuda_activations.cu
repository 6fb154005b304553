// DESIGN.md §3: the epilogue activations come from one implementation
// (core/activations.h) and host and device must agree bit for bit. This runs
// every function on the GPU over a strided sweep of all 2^32 float bit
// patterns plus every float near the branch points, and compares each
// result's bits with the host's. The 16-bit activation passes that look
// their results up in a table (ops/cuda/activation.cu) are checked against
// the elementwise kernel for every one of the 65536 inputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "core/tensor.h"
#include "ops/activation.h"
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

// sigmoid and swish, the epilogue activations of the U2++ FFN and conv
// module, over every one of the 2^32 inputs: the device's bits against the
// host's, and the error against the exact function (float64 libm) within 2
// ulps wherever the result is a normal float (x >= -kSigmoidArgLimit).
__global__ void every_input_kernel(bool swish, uint64_t first, uint32_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = bits_float(static_cast<uint32_t>(first + i));
    out[i] = float_bits(swish ? act::swish(x) : act::sigmoid(x));
  }
}

double exact_sigmoid(double v) {
  return v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
}
double ulp32_of(double exact) {
  int exponent = 0;
  std::frexp(std::max(std::fabs(exact), 0x1p-126), &exponent);
  return std::ldexp(1.0, exponent - 24);
}

struct ChunkCheck {
  int64_t mismatches = 0;
  uint32_t first_mismatch = 0;
  double max_ulp = 0;
  float worst_x = 0;
};

TEST(CudaActivations, SwishAndSigmoidOverAllInputsMatchTheHostWithinTwoUlp) {
  OASR_SKIP_WITHOUT_CUDA();
  constexpr int64_t kChunk = int64_t{1} << 28;
  uint32_t* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_out, kChunk * sizeof(uint32_t)), cudaSuccess);
  std::vector<uint32_t> device_bits(kChunk);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  for (bool swish : {true, false}) {
    ChunkCheck total;
    for (uint64_t first = 0; first < (uint64_t{1} << 32); first += kChunk) {
      every_input_kernel<<<4096, 256>>>(swish, first, d_out, kChunk);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(
          cudaMemcpy(device_bits.data(), d_out, kChunk * sizeof(uint32_t), cudaMemcpyDeviceToHost),
          cudaSuccess);
      std::vector<ChunkCheck> parts(threads);
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          ChunkCheck& part = parts[t];
          for (int64_t i = kChunk * t / threads; i < kChunk * (t + 1) / threads; ++i) {
            const uint32_t bits = static_cast<uint32_t>(first + i);
            const float x = bits_float(bits);
            const float host = swish ? act::swish(x) : act::sigmoid(x);
            if (float_bits(host) != device_bits[i] && part.mismatches++ == 0)
              part.first_mismatch = bits;
            if (std::isnan(x) || x < -act::detail::kSigmoidArgLimit) continue;
            const double exact = swish ? x * exact_sigmoid(x) : exact_sigmoid(x);
            if (std::isinf(exact)) continue;  // swish(+inf): checked bit for bit above
            const double error = std::fabs(host - exact) / ulp32_of(exact);
            if (error > part.max_ulp) {
              part.max_ulp = error;
              part.worst_x = x;
            }
          }
        });
      }
      for (std::thread& thread : pool) thread.join();
      for (const ChunkCheck& part : parts) {
        if (part.mismatches > 0 && total.mismatches == 0)
          total.first_mismatch = part.first_mismatch;
        total.mismatches += part.mismatches;
        if (part.max_ulp > total.max_ulp) {
          total.max_ulp = part.max_ulp;
          total.worst_x = part.worst_x;
        }
      }
    }
    const char* name = swish ? "swish" : "sigmoid";
    EXPECT_EQ(total.mismatches, 0)
        << name << ": first input 0x" << std::hex << total.first_mismatch;
    EXPECT_LE(total.max_ulp, 2.0) << name << " worst at " << std::hexfloat << total.worst_x;
    std::printf("  %s over all 2^32 inputs: %lld host/device differences, max %.3f ulp at %a\n",
                name, static_cast<long long>(total.mismatches), total.max_ulp, total.worst_x);
  }
  cudaFree(d_out);
}

// Every float16 / bfloat16 bit pattern, 16 times in 16 orders (2^20
// elements: large enough for the table path), through ops::activation, against
// the same patterns in one 65536-element pass (the elementwise kernel).
TEST(CudaActivations, SixteenBitTablesMatchTheElementwiseKernelForEveryInput) {
  OASR_SKIP_WITHOUT_CUDA();
  constexpr int64_t kPatterns = 1 << 16;
  constexpr int64_t kCopies = 16;
  std::vector<uint16_t> patterns(kPatterns * kCopies);
  for (int64_t k = 0; k < kCopies; ++k) {
    for (int64_t i = 0; i < kPatterns; ++i) {
      patterns[k * kPatterns + i] = static_cast<uint16_t>((i * 40503 + k * 7919) % kPatterns);
    }
  }
  const Activation kinds[] = {Activation::kRelu,     Activation::kSwish,   Activation::kGeluErf,
                              Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh};
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    Tensor all = Tensor::empty({kCopies * kPatterns}, dtype);
    std::memcpy(all.raw_data(), patterns.data(), patterns.size() * 2);
    const Tensor all_device = all.to(Device::cuda());
    // Copies: a narrow of a contiguous tensor is already contiguous, and the
    // in-place pass below must not rewrite the inputs of the next activation.
    const Tensor first_device = all_device.narrow(0, 0, kPatterns).clone();
    for (Activation kind : kinds) {
      const Tensor table = ops::activation(all_device, kind).to(Device::cpu());
      const Tensor elementwise = ops::activation(first_device, kind).to(Device::cpu());
      const auto* t = static_cast<const uint16_t*>(table.raw_data());
      const auto* e = static_cast<const uint16_t*>(elementwise.raw_data());
      std::vector<uint16_t> expected(kPatterns);  // by input pattern
      for (int64_t i = 0; i < kPatterns; ++i) expected[patterns[i]] = e[i];
      int64_t mismatches = 0;
      for (int64_t i = 0; i < kCopies * kPatterns; ++i) {
        if (t[i] != expected[patterns[i]]) ++mismatches;
      }
      EXPECT_EQ(mismatches, 0) << dtype_name(dtype) << " " << activation_name(kind);
      // In place, on an odd-sized tail too.
      Tensor in_place = all_device.narrow(0, 0, kCopies * kPatterns - 3).clone();
      ops::activation_inplace(in_place, kind);
      const Tensor back = in_place.to(Device::cpu());
      const auto* b = static_cast<const uint16_t*>(back.raw_data());
      mismatches = 0;
      for (int64_t i = 0; i < kCopies * kPatterns - 3; ++i) {
        if (b[i] != expected[patterns[i]]) ++mismatches;
      }
      EXPECT_EQ(mismatches, 0) << "in place " << dtype_name(dtype) << " " << activation_name(kind);
    }
  }
}

}  // namespace
}  // namespace oasr
