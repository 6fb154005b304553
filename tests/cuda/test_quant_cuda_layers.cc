// Quantized layers on a CUDA device against the same layers on the CPU
// (DESIGN.md §3): an int8 layer's output is a function of exact integers and
// numerics.h's fp32 rules, so the CUDA lanes (native, mma_sync, cublaslt) return the
// CPU reference's bits -- for a float32 model bit for bit, and for a
// float16/bfloat16 model bit for bit against the CPU computing on the same
// (rounded) input and rounding its float32 result once. fp8 agrees within a
// tolerance (the GPU sums K blocks on the tensor core) and is bitwise
// batch-invariant. Also: lane choice (auto -> native on sm_90, else
// mma_sync), the named lanes,
// the refusals of lanes that do not exist, and the kernel the report names.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "quant/kernels/cuda/native/scaled_mm_native.h"
#include "quant/methods/quant_method.h"
#include "quant/numerics.h"
#include "quant/spec.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using testing::bit_equal;
using testing::normal_tensor;

// Whether this GPU runs the native sm90 lane (which auto then serves).
bool hopper() {
  std::string why;
  return cuda::native_supported(QDType::kInt8, 0, &why);
}
std::string auto_lane() {
  return hopper() ? "native" : "mma_sync";
}

class CudaQuantLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  }
};

// A quantized Linear [k -> n] (optionally static with a smoother), loaded on
// the CPU; `copy` makes the same layer for another device.
struct QuantLinear {
  std::shared_ptr<layers::Linear> layer;

  QuantLinear(int64_t k, int64_t n, Activation act, const std::string& scheme, uint32_t seed) {
    std::mt19937 rng(seed);
    layer = act == Activation::kNone ? std::make_shared<layers::Linear>(k, n)
                                     : std::make_shared<layers::LinearActivation>(k, n, act);
    layer->set_param("weight", normal_tensor({n, k}, rng, 0.2f));
    layer->set_param("bias", normal_tensor({n}, rng, 0.5f));
    auto method = make_quant_method(scheme_preset(scheme));
    const bool static_input = method->has_static_input();
    if (!static_input) {
      layer->quantize_weight_online(std::move(method));
      return;
    }
    const QuantizedWeight q = method->quantize_weight(layer->param("weight"));
    layer->attach_quant_method(std::move(method), /*runtime_smoothed=*/true);
    Tensor smooth_inv = Tensor::empty({k}, DType::kF32);
    std::uniform_real_distribution<float> smooth(0.5f, 2.0f);
    for (int64_t j = 0; j < k; ++j) smooth_inv.data<float>()[j] = smooth(rng);
    layer->set_param("weight", q.weight);
    layer->set_param("weight_scale", q.weight_scale);
    layer->set_param("smooth_inv", smooth_inv);
    layer->set_param("input_scale", Tensor::full({1}, 0.02f, DType::kF32));
  }

  void serve(Device device, DType dtype, const std::string& backend) {
    layer->to(dtype);
    layer->to(device);
    layer->bind_quant(BindOptions{device, backend});
  }
};

// The CPU result for a model served in `dtype`: the float32 CPU layer, its
// bias rounded to dtype as the served model holds it, on the input rounded
// to dtype, its float32 output rounded once to dtype.
Tensor cpu_expected(const QuantLinear& cpu, const Tensor& x, DType dtype) {
  const Tensor bias = cpu.layer->param("bias");
  cpu.layer->set_param("bias", bias.to(dtype).to(DType::kF32));
  cpu.layer->bind_quant(BindOptions{Device::cpu(), "cpu_reference"});
  const Tensor y = cpu.layer->forward(x.to(dtype).to(DType::kF32)).to(dtype);
  cpu.layer->set_param("bias", bias);
  cpu.layer->bind_quant(BindOptions{Device::cpu(), "cpu_reference"});
  return y;
}

TEST_F(CudaQuantLayers, Int8LinearEqualsTheCpuReferenceBitwise) {
  std::mt19937 rng(5);
  for (const char* scheme : {"int8_w8a8", "int8_w8a8_static"}) {
    for (const Activation act : {Activation::kNone, Activation::kSwish, Activation::kRelu}) {
      for (const char* backend : {"auto", "native", "mma_sync", "cublaslt"}) {
        if (std::string(backend) == "native" && !hopper()) continue;
        for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          QuantLinear cpu(256, 136, act, scheme, 9);
          cpu.serve(Device::cpu(), DType::kF32, "cpu_reference");
          QuantLinear gpu(256, 136, act, scheme, 9);
          gpu.serve(Device::cuda(0), dtype, backend);
          EXPECT_EQ(gpu.layer->quant_method()->lane().name,
                    std::string(backend) == "auto" ? auto_lane() : backend);
          // 1 and 5 rows: the GEMV with the quantize folded in (auto, native,
          // mma_sync); 16 its last row count; 17 and 300 the tiled kernels.
          for (const int64_t rows : {1, 5, 16, 17, 300}) {
            const Tensor x = normal_tensor({rows, 256}, rng, 1.5f);
            const Tensor got = gpu.layer->forward(x.to(dtype).to(Device::cuda(0)));
            EXPECT_EQ(got.dtype(), dtype);
            EXPECT_TRUE(bit_equal(got.to(Device::cpu()), cpu_expected(cpu, x, dtype)))
                << scheme << " act " << static_cast<int>(act) << " " << backend << " "
                << dtype_name(dtype) << " rows " << rows;
          }
        }
      }
    }
  }
}

// A row's result does not depend on the rows around it: each row alone
// equals the same row inside a batch of 4096 (int8 exactly by construction;
// fp8 because each output sums its k32 blocks in K order whatever the tile).
TEST_F(CudaQuantLayers, RowsAreBatchInvariant) {
  std::mt19937 rng(6);
  for (const char* scheme : {"int8_w8a8", "fp8_w8a8"}) {
    QuantLinear gpu(2048, 256, Activation::kNone, scheme, 3);
    gpu.serve(Device::cuda(0), DType::kF16, "auto");
    const Tensor x = normal_tensor({4096, 2048}, rng, 1.0f).to(DType::kF16).to(Device::cuda(0));
    const Tensor batch = gpu.layer->forward(x).to(Device::cpu());
    for (const int64_t row : {0, 1, 17, 4095}) {
      const Tensor alone = gpu.layer->forward(x.narrow(0, row, 1).contiguous()).to(Device::cpu());
      EXPECT_TRUE(bit_equal(alone, batch.narrow(0, row, 1).contiguous()))
          << scheme << " row " << row;
    }
    const Tensor middle = gpu.layer->forward(x.narrow(0, 100, 37).contiguous()).to(Device::cpu());
    EXPECT_TRUE(bit_equal(middle, batch.narrow(0, 100, 37).contiguous())) << scheme;
  }
}

// fp8 on the GPU against the CPU reference (one product at a time in K
// order), per lane:
//   mma_sync adds k32 block sums from the tensor core, so the two differ by
//   fp32 reassociation only: within 1e-5 of the row's largest output for
//   K = 512 (about 512 roundings of 2^-24 relative, with margin).
//   native sums 128-deep K steps on the tensor core (wgmma keeps >= 13
//   fraction bits per k32 step): the kernel test's bound
//   (QuantScaledMMNative.E4m3WithinBoundOfReference), 2^-5.9 S + 2 K 2^-24 S
//   with S = sum_k |a_k w_k| of the dequantized operands. e4m3 rounds each
//   operand within 2^-4 relative (these scales saturate nothing), so
//   S <= (1 + 2^-4)^2 sum_k |x_k| |w_k| of the float input and weight, and
//   2^-5 sum_k |x_k| |w_k| covers both factors.
TEST_F(CudaQuantLayers, Fp8LinearIsCloseToTheCpuReference) {
  constexpr int64_t kK = 512, kN = 128, kRows = 33;
  constexpr uint32_t kSeed = 4;
  std::vector<std::string> lanes = {"mma_sync"};
  if (hopper()) lanes.push_back("native");
  std::mt19937 weight_rng(kSeed);  // QuantLinear draws its float weight first
  const Tensor weight = normal_tensor({kN, kK}, weight_rng, 0.2f);
  for (const std::string& lane : lanes) {
    std::mt19937 rng(8);
    QuantLinear cpu(kK, kN, Activation::kNone, "fp8_w8a8", kSeed);
    cpu.serve(Device::cpu(), DType::kF32, "cpu_reference");
    QuantLinear gpu(kK, kN, Activation::kNone, "fp8_w8a8", kSeed);
    gpu.serve(Device::cuda(0), DType::kF32, lane);
    EXPECT_EQ(gpu.layer->quant_method()->lane().name, lane);
    const Tensor x = normal_tensor({kRows, kK}, rng, 1.0f);
    const Tensor want = cpu.layer->forward(x);
    const Tensor got = gpu.layer->forward(x.to(Device::cuda(0))).to(Device::cpu());
    int64_t differing = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      float row_max = 0.0f;
      for (int64_t j = 0; j < kN; ++j) {
        row_max = std::max(row_max, std::abs(want.data<float>()[r * kN + j]));
      }
      for (int64_t j = 0; j < kN; ++j) {
        const float g = got.data<float>()[r * kN + j];
        const float w = want.data<float>()[r * kN + j];
        differing += g != w;
        double bound = 1e-5 * row_max;
        if (lane == "native") {
          double s = 0.0;
          for (int64_t c = 0; c < kK; ++c) {
            s += std::fabs(static_cast<double>(x.data<float>()[r * kK + c]) *
                           weight.data<float>()[j * kK + c]);
          }
          bound = std::ldexp(s, -5);
        }
        EXPECT_LE(std::abs(g - w), bound) << lane << " row " << r << " col " << j;
      }
    }
    // Most outputs agree exactly anyway; the count is reported, not asserted.
    RecordProperty("fp8_outputs_differing_from_cpu_" + lane, static_cast<int>(differing));
  }
}

TEST_F(CudaQuantLayers, Int8Conv2dEqualsTheCpuReferenceBitwise) {
  std::mt19937 rng(12);
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    auto make = [&](uint32_t seed) {
      std::mt19937 r(seed);
      auto conv = std::make_shared<layers::Conv2d>(32, 24, 3, 3, 2, 2, /*bias=*/true);
      conv->set_param("weight", normal_tensor({24, 32, 3, 3}, r, 0.2f));
      conv->set_param("bias", normal_tensor({24}, r, 0.3f));
      auto method = make_quant_method(scheme_preset("int8_w8a8_static"));
      // The KRSC weight matrix [N, kh * kw * C] the quantized conv multiplies.
      const Tensor w = conv->param("weight");
      Tensor krsc = Tensor::empty({24, 3 * 3 * 32}, DType::kF32);
      for (int64_t o = 0; o < 24; ++o)
        for (int64_t c = 0; c < 32; ++c)
          for (int64_t r2 = 0; r2 < 9; ++r2)
            krsc.data<float>()[o * 288 + r2 * 32 + c] = w.data<float>()[(o * 32 + c) * 9 + r2];
      const QuantizedWeight q = method->quantize_weight(krsc);
      conv->attach_quant_method(std::move(method));
      conv->set_param("weight", q.weight.view({24, 3, 3, 32}));
      conv->set_param("weight_scale", q.weight_scale);
      conv->set_param("input_scale", Tensor::full({1}, 0.03f, DType::kF32));
      return conv;
    };
    auto cpu = make(1);
    cpu->set_param("bias", cpu->param("bias").to(dtype).to(DType::kF32));  // as served
    cpu->bind_quant(BindOptions{Device::cpu(), "cpu_reference"});
    auto gpu = make(1);
    gpu->to(dtype);
    gpu->to(Device::cuda(0));
    gpu->bind_quant(BindOptions{Device::cuda(0), "auto"});
    const Tensor x = normal_tensor({3, 32, 19, 11}, rng, 2.0f);
    const Tensor want = cpu->forward(x.to(dtype).to(DType::kF32)).to(dtype);
    const Tensor got = gpu->forward(x.to(dtype).to(Device::cuda(0))).to(Device::cpu());
    EXPECT_TRUE(bit_equal(got, want)) << dtype_name(dtype);
  }
}

TEST_F(CudaQuantLayers, LanesAndRefusals) {
  // auto: the native sm90 kernels on Hopper (a build with them), else mma_sync.
  const bool on_hopper = hopper();
  QuantLinear a(64, 32, Activation::kNone, "int8_w8a8", 1);
  a.serve(Device::cuda(0), DType::kF16, "auto");
  EXPECT_EQ(a.layer->quant_method()->lane().name, auto_lane());
  EXPECT_NE(a.layer->quant_method()->kernel_name(64).find(on_hopper ? "sm90_s8_" : "mma_sync"),
            std::string::npos)
      << a.layer->quant_method()->kernel_name(64);
  // Up to 16 rows: the GEMV, on either lane (unless OASR_QUANT_GEMV=0).
  if (env::quant_gemv_enabled()) {
    EXPECT_EQ(a.layer->quant_method()->kernel_name(1), "gemv_s8_r1");
    EXPECT_EQ(a.layer->quant_method()->kernel_name(16), "gemv_s8_r16");
  }
  // mma_sync stays the A/B arm on Hopper.
  QuantLinear ab(64, 32, Activation::kNone, "int8_w8a8", 1);
  ab.serve(Device::cuda(0), DType::kF16, "mma_sync");
  EXPECT_EQ(ab.layer->quant_method()->lane().name, "mma_sync");
  // native named off Hopper: refused with the reason.
  if (!on_hopper) {
    QuantLinear b(64, 32, Activation::kNone, "int8_w8a8", 1);
    try {
      b.serve(Device::cuda(0), DType::kF16, "native");
      ADD_FAILURE() << "native was not refused off sm_90";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("OASR_SCALED_MM_BACKEND=native"), std::string::npos)
          << e.what();
    }
  }
  for (const char* missing : {"cutlass", "torch"}) {
    QuantLinear b(64, 32, Activation::kNone, "int8_w8a8", 1);
    try {
      b.serve(Device::cuda(0), DType::kF16, missing);
      ADD_FAILURE() << missing << " was not refused";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("OASR_SCALED_MM_BACKEND=") + missing), std::string::npos)
          << message;
      EXPECT_NE(message.find("use auto"), std::string::npos) << message;
    }
  }
  // A CPU lane named for a CUDA model.
  QuantLinear c(64, 32, Activation::kNone, "int8_w8a8", 1);
  try {
    c.serve(Device::cuda(0), DType::kF16, "cpu_reference");
    ADD_FAILURE() << "cpu_reference on cuda was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names a CPU lane"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oasr::quant
