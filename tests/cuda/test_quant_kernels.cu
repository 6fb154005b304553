// The CUDA quantize kernels (quant/kernels/cuda/quantize_cuda.h) against
// independent bodies: the CPU reference quantizers (scaled_mm_reference.h)
// applied to the same values widened to fp32 must give the same bits; the
// fused norm producers must give the bits of ops::cuda::layer_norm /
// add_scaled_layer_norm followed by quantize_per_token, and stay within one
// quantization step of the CPU fused reference (whose LayerNorm accumulates
// in double); im2col must match a host gather loop bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/float_types.h"
#include "core/tensor.h"
#include "ops/cuda/layer_norm.h"
#include "quant/kernels/cpu/fused_producers.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/numerics.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using quant::QDType;

constexpr DType kServedDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr QDType kFormats[] = {QDType::kInt8, QDType::kFp8E4M3};
constexpr int64_t kRowCounts[] = {1, 17, 4096};
constexpr int64_t kRowLengths[] = {16, 256, 272, 2048};

const char* format_name(QDType format) {
  return format == QDType::kInt8 ? "int8" : "e4m3";
}

// Host values on the device in `dtype` (rounded to it exactly), and the same
// values widened back to fp32 on the host: what the reference quantizes.
struct Served {
  Tensor device;
  std::vector<float> widened;
};
Served serve(const std::vector<float>& values, const Shape& shape, DType dtype) {
  const Tensor rounded = Tensor::from_vector(values, shape).to(dtype);
  const Tensor widened = rounded.to(DType::kF32);
  const float* begin = widened.data<float>();
  return {rounded.to(Device::cuda()), std::vector<float>(begin, begin + widened.numel())};
}

Tensor upload(const std::vector<float>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(Device::cuda());
}

std::vector<uint8_t> download_bytes(const void* device_ptr, size_t nbytes) {
  std::vector<uint8_t> bytes(nbytes);
  if (nbytes > 0) {
    EXPECT_EQ(cudaMemcpy(bytes.data(), device_ptr, nbytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return bytes;
}

std::vector<uint8_t> bytes_of(const void* host_ptr, size_t nbytes) {
  const auto* begin = static_cast<const uint8_t*>(host_ptr);
  return std::vector<uint8_t>(begin, begin + nbytes);
}

// The first differing byte, or success.
::testing::AssertionResult same_bytes(const std::vector<uint8_t>& actual,
                                      const std::vector<uint8_t>& expected, const char* what) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << actual.size() << " bytes, expected " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      return ::testing::AssertionFailure() << what << ": byte " << i << " is 0x" << std::hex
                                           << int(actual[i]) << ", expected 0x" << int(expected[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

// Every positive midpoint between consecutive finite e4m3 values: x * 1
// there is an exact rounding tie.
std::vector<float> e4m3_midpoints() {
  std::vector<float> midpoints;
  for (uint8_t bits = 0; bits < kE4M3MaxFinite; ++bits) {
    midpoints.push_back((e4m3_bits_to_f32(bits) + e4m3_bits_to_f32(bits + 1)) * 0.5f);
  }
  return midpoints;
}

// Random rows of varied magnitude, plus adversarial rows where m > 5:
// row 0 all zero, row 1 one huge value, row 2 int8 ties (amax 127 so the
// multiplier is 1 and x * m = n + 0.5), row 3 e4m3 ties (amax 448), row 4 a
// NaN (never the amax; quantizes to 0 / the e4m3 NaN).
std::vector<float> per_token_input(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (int64_t r = 0; r < m; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
    for (int64_t j = 0; j < k; ++j) x[r * k + j] = normal(rng) * row_scale;
  }
  if (m <= 5) return x;
  const std::vector<float> midpoints = e4m3_midpoints();
  for (int64_t j = 0; j < k; ++j) {
    x[0 * k + j] = 0.0f;
    x[1 * k + j] = j == k / 2 ? 30000.0f : normal(rng);
    x[2 * k + j] = j == 0 ? 127.0f : static_cast<float>(j % 253) - 126.0f + 0.5f;
    const float midpoint = midpoints[static_cast<size_t>(j) % midpoints.size()];
    x[3 * k + j] = j == 0 ? -448.0f : (j % 2 == 0 ? midpoint : -midpoint);
  }
  x[4 * k + k / 3] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

std::vector<float> positive_factors(int64_t k, uint32_t seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> factors(static_cast<size_t>(k));
  for (float& f : factors) f = uniform(rng);
  return factors;
}

void reference_per_token(QDType format, const std::vector<float>& x, const float* smooth_inv,
                         int64_t m, int64_t k, std::vector<uint8_t>& q, std::vector<float>& scale) {
  q.assign(static_cast<size_t>(m * k), 0);
  scale.assign(static_cast<size_t>(m), 0.0f);
  if (format == QDType::kInt8) {
    quant::quantize_per_token_int8_reference(x.data(), smooth_inv, m, k,
                                             reinterpret_cast<int8_t*>(q.data()), scale.data());
  } else {
    quant::quantize_per_token_e4m3_reference(x.data(), smooth_inv, m, k, q.data(), scale.data());
  }
}

TEST(CudaQuantKernels, PerTokenIsBitIdenticalToTheCpuReference) {
  OASR_SKIP_WITHOUT_CUDA();
  for (int64_t m : kRowCounts) {
    for (int64_t k : kRowLengths) {
      const std::vector<float> values = per_token_input(m, k, static_cast<uint32_t>(m * 7919 + k));
      const std::vector<float> smooth = positive_factors(k, static_cast<uint32_t>(k), 0.25f, 4.0f);
      const Tensor smooth_device = upload(smooth);
      for (DType dtype : kServedDTypes) {
        const Served x = serve(values, {m, k}, dtype);
        for (QDType format : kFormats) {
          for (bool smoothed : {false, true}) {
            SCOPED_TRACE(std::string(format_name(format)) + " " + dtype_name(dtype) +
                         " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                         (smoothed ? " smoothed" : ""));
            const float* smooth_inv_device =
                smoothed ? static_cast<const float*>(smooth_device.raw_data()) : nullptr;
            const Tensor q = Tensor::empty({m, k}, DType::kU8, Device::cuda());
            const Tensor scale = Tensor::empty({m}, DType::kF32, Device::cuda());
            quant::cuda::quantize_per_token(format, x.device.raw_data(), dtype, smooth_inv_device,
                                            m, k, q.raw_data(), scale.data<float>(), 0);
            std::vector<uint8_t> expected_q;
            std::vector<float> expected_scale;
            reference_per_token(format, x.widened, smoothed ? smooth.data() : nullptr, m, k,
                                expected_q, expected_scale);
            ASSERT_TRUE(same_bytes(download_bytes(q.raw_data(), q.nbytes()), expected_q, "q"));
            ASSERT_TRUE(same_bytes(download_bytes(scale.raw_data(), scale.nbytes()),
                                   bytes_of(expected_scale.data(), expected_scale.size() * 4),
                                   "scale"));
          }
        }
      }
    }
  }
}

// Pointers off the 16-byte vector alignment take the scalar path; rows too
// long for a warp take a block. Both must give the same bits.
TEST(CudaQuantKernels, PerTokenUnalignedAndLongRowsMatchTheCpuReference) {
  OASR_SKIP_WITHOUT_CUDA();
  for (int64_t k : {int64_t{17}, int64_t{272}, int64_t{1030}, int64_t{5000}}) {
    const int64_t m = 9;
    const std::vector<float> values = per_token_input(m, k + 1, static_cast<uint32_t>(k));
    const std::vector<float> smooth = positive_factors(k + 1, 99u, 0.25f, 4.0f);
    const Tensor smooth_device = upload(smooth);
    for (DType dtype : kServedDTypes) {
      // x starts one element in: misaligned for the vector loads.
      const Served x = serve(values, {m * (k + 1)}, dtype);
      std::vector<float> shifted(x.widened.begin() + 1, x.widened.begin() + 1 + m * k);
      for (QDType format : kFormats) {
        SCOPED_TRACE(std::string(format_name(format)) + " " + dtype_name(dtype) +
                     " k=" + std::to_string(k));
        const Tensor q = Tensor::empty({m * k + 1}, DType::kU8, Device::cuda());
        const Tensor scale = Tensor::empty({m}, DType::kF32, Device::cuda());
        const auto* x_ptr =
            static_cast<const uint8_t*>(x.device.raw_data()) + x.device.element_size();
        uint8_t* q_ptr = static_cast<uint8_t*>(q.raw_data()) + 1;
        const float* smooth_ptr = static_cast<const float*>(smooth_device.raw_data()) + 1;
        quant::cuda::quantize_per_token(format, x_ptr, dtype, smooth_ptr, m, k, q_ptr,
                                        scale.data<float>(), 0);
        std::vector<uint8_t> expected_q;
        std::vector<float> expected_scale;
        reference_per_token(format, shifted, smooth.data() + 1, m, k, expected_q, expected_scale);
        ASSERT_TRUE(same_bytes(download_bytes(q_ptr, static_cast<size_t>(m * k)), expected_q, "q"));
        ASSERT_TRUE(same_bytes(download_bytes(scale.raw_data(), scale.nbytes()),
                               bytes_of(expected_scale.data(), expected_scale.size() * 4),
                               "scale"));
      }
    }
  }
}

TEST(CudaQuantKernels, StaticIsBitIdenticalToTheCpuReference) {
  OASR_SKIP_WITHOUT_CUDA();
  for (int64_t m : kRowCounts) {
    for (int64_t k : kRowLengths) {
      // Magnitudes up to ~1000 after the multiplier: past both saturation
      // points (127, 448). Every fourth channel's multiplier is 1, so the tie
      // rows (2: n + 0.5, 3: e4m3 midpoints) land exactly on ties there.
      std::vector<float> values = per_token_input(m, k, static_cast<uint32_t>(m * 31 + k));
      for (int64_t r = m > 5 ? 5 : 0; r < m; ++r) {
        for (int64_t j = 0; j < k; ++j) values[r * k + j] *= 60.0f;
      }
      std::vector<float> multiplier = positive_factors(k, static_cast<uint32_t>(k + 1), 0.5f, 2.0f);
      for (int64_t j = 0; j < k; j += 4) multiplier[j] = 1.0f;
      const Tensor multiplier_device = upload(multiplier);
      for (DType dtype : kServedDTypes) {
        const Served x = serve(values, {m, k}, dtype);
        for (QDType format : kFormats) {
          SCOPED_TRACE(std::string(format_name(format)) + " " + dtype_name(dtype) +
                       " m=" + std::to_string(m) + " k=" + std::to_string(k));
          const Tensor q = Tensor::empty({m, k}, DType::kU8, Device::cuda());
          quant::cuda::quantize_static(format, x.device.raw_data(), dtype,
                                       multiplier_device.data<float>(), m, k, q.raw_data(), 0);
          std::vector<uint8_t> expected(static_cast<size_t>(m * k));
          if (format == QDType::kInt8) {
            quant::quantize_static_int8_reference(x.widened.data(), multiplier.data(), m, k,
                                                  reinterpret_cast<int8_t*>(expected.data()));
          } else {
            quant::quantize_static_e4m3_reference(x.widened.data(), multiplier.data(), m, k,
                                                  expected.data());
          }
          ASSERT_TRUE(same_bytes(download_bytes(q.raw_data(), q.nbytes()), expected, "q"));
        }
      }
    }
  }
}

TEST(CudaQuantKernels, ZeroSizeWorkIsNoWorkAndUnknownFormatsAreRefused) {
  OASR_SKIP_WITHOUT_CUDA();
  EXPECT_NO_THROW(quant::cuda::quantize_per_token(QDType::kInt8, nullptr, DType::kF32, nullptr, 0,
                                                  16, nullptr, nullptr, 0));
  EXPECT_NO_THROW(quant::cuda::quantize_static(QDType::kFp8E4M3, nullptr, DType::kBF16, nullptr, 4,
                                               0, nullptr, 0));
  EXPECT_NO_THROW(quant::cuda::layer_norm_quant(QDType::kInt8, nullptr, nullptr, nullptr,
                                                DType::kF16, 0, 64, 1e-5f, nullptr, nullptr, 0));
  EXPECT_NO_THROW(quant::cuda::im2col_quantize_int8(
      nullptr, DType::kF32, quant::cuda::Im2colGeometry{}, 1.0f, nullptr, 0));
  const Tensor x = Tensor::zeros({2, 16}, DType::kF32, Device::cuda());
  const Tensor q = Tensor::empty({2, 16}, DType::kU8, Device::cuda());
  const Tensor scale = Tensor::empty({2}, DType::kF32, Device::cuda());
  try {
    quant::cuda::quantize_per_token(QDType::kNvfp4, x.raw_data(), DType::kF32, nullptr, 2, 16,
                                    q.raw_data(), scale.data<float>(), 0);
    FAIL() << "nvfp4 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
  try {
    quant::cuda::quantize_per_token(QDType::kInt8, x.raw_data(), DType::kI32, nullptr, 2, 16,
                                    q.raw_data(), scale.data<float>(), 0);
    FAIL() << "an int32 input was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

// ---- fused norm producers ---------------------------------------------------

constexpr float kEps = 1e-5f;
constexpr float kAlpha = 0.5f;

// Rows of mean `offset` and varied spread; row 0 (where rows > 1) is the
// constant 1.5, whose mean is exact in any summation order (variance 0: the
// normalized row is 0, or the bias).
std::vector<float> norm_input(int64_t rows, int64_t features, uint32_t seed, float offset) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * features));
  for (int64_t r = 0; r < rows; ++r) {
    const float spread = std::ldexp(1.0f, static_cast<int>(r % 7) - 3);
    for (int64_t d = 0; d < features; ++d) {
      x[r * features + d] = rows > 1 && r == 0 ? 1.5f : offset + normal(rng) * spread;
    }
  }
  return x;
}

struct Quantized {
  std::vector<uint8_t> q;
  std::vector<uint8_t> scale;  // fp32 bits
};
Quantized download(const Tensor& q, const Tensor& scale) {
  return {download_bytes(q.raw_data(), q.nbytes()),
          download_bytes(scale.raw_data(), scale.nbytes())};
}
Quantized per_token_of(QDType format, const Tensor& served, int64_t rows, int64_t features) {
  const Tensor q = Tensor::empty({rows, features}, DType::kU8, Device::cuda());
  const Tensor scale = Tensor::empty({rows}, DType::kF32, Device::cuda());
  quant::cuda::quantize_per_token(format, served.raw_data(), served.dtype(), nullptr, rows,
                                  features, q.raw_data(), scale.data<float>(), 0);
  return download(q, scale);
}

const void* raw_or_null(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

// q within one step of the CPU fused reference, scales within 1e-5 relative:
// the CPU LayerNorm accumulates in double, so y differs by a few ulps.
void expect_near_cpu_int8(const Quantized& gpu, const std::vector<int8_t>& cpu_q,
                          const std::vector<float>& cpu_scale) {
  ASSERT_EQ(gpu.q.size(), cpu_q.size());
  int worst = 0;
  for (size_t i = 0; i < cpu_q.size(); ++i) {
    const int dq = std::abs(int(static_cast<int8_t>(gpu.q[i])) - int(cpu_q[i]));
    if (dq > worst) worst = dq;
  }
  EXPECT_LE(worst, 1) << "largest |q - q_cpu|";
  for (size_t r = 0; r < cpu_scale.size(); ++r) {
    float scale;
    std::memcpy(&scale, gpu.scale.data() + 4 * r, 4);
    EXPECT_NEAR(scale, cpu_scale[r], 1e-5f * cpu_scale[r]) << "row " << r;
  }
}

TEST(CudaQuantKernels, FusedNormsAreBitIdenticalToTheUnfusedPair) {
  OASR_SKIP_WITHOUT_CUDA();
  for (int64_t rows : kRowCounts) {
    for (int64_t features : kRowLengths) {
      const auto seed = static_cast<uint32_t>(rows * 131 + features);
      const std::vector<float> x_values = norm_input(rows, features, seed, 0.25f);
      const std::vector<float> residual_values = norm_input(rows, features, seed + 1, -2.0f);
      const std::vector<float> weight_values = norm_input(1, features, seed + 2, 1.0f);
      const std::vector<float> bias_values = norm_input(1, features, seed + 3, 0.0f);
      for (DType dtype : kServedDTypes) {
        const Served x = serve(x_values, {rows, features}, dtype);
        const Served residual = serve(residual_values, {rows, features}, dtype);
        const Served weight = serve(weight_values, {features}, dtype);
        const Served bias = serve(bias_values, {features}, dtype);
        for (bool affine : {false, true}) {
          const Tensor w = affine ? weight.device : Tensor();
          const Tensor b = affine ? bias.device : Tensor();
          const Tensor normalized = Tensor::empty({rows, features}, dtype, Device::cuda());
          ops::cuda::layer_norm(x.device, w, b, kEps, normalized);
          const Tensor sum = Tensor::empty({rows, features}, dtype, Device::cuda());
          const Tensor sum_normalized = Tensor::empty({rows, features}, dtype, Device::cuda());
          ops::cuda::add_scaled_layer_norm(x.device, residual.device, kAlpha, w, b, kEps, sum,
                                           sum_normalized);
          for (QDType format : kFormats) {
            SCOPED_TRACE(std::string(format_name(format)) + " " + dtype_name(dtype) +
                         " rows=" + std::to_string(rows) + " features=" + std::to_string(features) +
                         (affine ? " affine" : ""));
            const Tensor q = Tensor::empty({rows, features}, DType::kU8, Device::cuda());
            const Tensor scale = Tensor::empty({rows}, DType::kF32, Device::cuda());
            quant::cuda::layer_norm_quant(format, x.device.raw_data(), raw_or_null(w),
                                          raw_or_null(b), dtype, rows, features, kEps, q.raw_data(),
                                          scale.data<float>(), 0);
            const Quantized fused = download(q, scale);
            const Quantized unfused = per_token_of(format, normalized, rows, features);
            ASSERT_TRUE(same_bytes(fused.q, unfused.q, "layer_norm_quant q"));
            ASSERT_TRUE(same_bytes(fused.scale, unfused.scale, "layer_norm_quant scale"));

            const Tensor fused_sum = Tensor::empty({rows, features}, dtype, Device::cuda());
            quant::cuda::add_layer_norm_residual_quant(
                format, x.device.raw_data(), residual.device.raw_data(), kAlpha, raw_or_null(w),
                raw_or_null(b), dtype, rows, features, kEps, fused_sum.raw_data(), q.raw_data(),
                scale.data<float>(), 0);
            const Quantized fused_add = download(q, scale);
            const Quantized unfused_add = per_token_of(format, sum_normalized, rows, features);
            ASSERT_TRUE(same_bytes(fused_add.q, unfused_add.q, "add_layer_norm_residual_quant q"));
            ASSERT_TRUE(same_bytes(fused_add.scale, unfused_add.scale,
                                   "add_layer_norm_residual_quant scale"));
            ASSERT_TRUE(same_bytes(download_bytes(fused_sum.raw_data(), fused_sum.nbytes()),
                                   download_bytes(sum.raw_data(), sum.nbytes()), "sum"));

            if (dtype != DType::kF32 || format != QDType::kInt8) continue;
            // Against the CPU fused reference (float32 is the CPU's served dtype).
            const float* cpu_w = affine ? weight.widened.data() : nullptr;
            const float* cpu_b = affine ? bias.widened.data() : nullptr;
            std::vector<int8_t> cpu_q(static_cast<size_t>(rows * features));
            std::vector<float> cpu_scale(static_cast<size_t>(rows));
            quant::cpu::layer_norm_quant_int8(x.widened.data(), cpu_w, cpu_b, rows, features, kEps,
                                              cpu_q.data(), cpu_scale.data());
            expect_near_cpu_int8(fused, cpu_q, cpu_scale);
            std::vector<float> cpu_sum(static_cast<size_t>(rows * features));
            quant::cpu::add_layer_norm_residual_quant_int8(
                x.widened.data(), residual.widened.data(), kAlpha, cpu_w, cpu_b, rows, features,
                kEps, cpu_sum.data(), cpu_q.data(), cpu_scale.data());
            expect_near_cpu_int8(fused_add, cpu_q, cpu_scale);
            // float32 sums: residual + alpha * x with two roundings on both sides.
            EXPECT_TRUE(same_bytes(download_bytes(fused_sum.raw_data(), fused_sum.nbytes()),
                                   bytes_of(cpu_sum.data(), cpu_sum.size() * 4), "sum vs CPU"));
          }
        }
      }
    }
  }
}

// ---- im2col -----------------------------------------------------------------

// The patches by the header's formula, gathered on the host.
std::vector<uint8_t> im2col_on_host(const std::vector<float>& x,
                                    const quant::cuda::Im2colGeometry& g, float multiplier) {
  const int64_t columns = g.kernel_h * g.kernel_w * g.channels;
  std::vector<uint8_t> patches(static_cast<size_t>(g.batch * g.out_h * g.out_w * columns));
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const int64_t patch = (b * g.out_h + oy) * g.out_w + ox;
        for (int64_t r = 0; r < g.kernel_h; ++r) {
          for (int64_t s = 0; s < g.kernel_w; ++s) {
            for (int64_t c = 0; c < g.channels; ++c) {
              const int64_t iy = oy * g.stride_h - g.pad_h + r;
              const int64_t ix = ox * g.stride_w - g.pad_w + s;
              int8_t value = 0;
              if (iy >= 0 && iy < g.height && ix >= 0 && ix < g.width) {
                const float element = x[((b * g.channels + c) * g.height + iy) * g.width + ix];
                value = quant::quantize_int8(act::detail::mul_rn(element, multiplier));
              }
              patches[patch * columns + (r * g.kernel_w + s) * g.channels + c] =
                  static_cast<uint8_t>(value);
            }
          }
        }
      }
    }
  }
  return patches;
}

quant::cuda::Im2colGeometry geometry(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                     int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                                     int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  quant::cuda::Im2colGeometry g;
  g.batch = batch;
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  g.out_h = (height + 2 * pad_h - kernel_h) / stride_h + 1;
  g.out_w = (width + 2 * pad_w - kernel_w) / stride_w + 1;
  return g;
}

TEST(CudaQuantKernels, Im2colQuantizeMatchesAHostGather) {
  OASR_SKIP_WITHOUT_CUDA();
  const quant::cuda::Im2colGeometry geometries[] = {
      geometry(2, 3, 9, 11, 3, 3, 2, 2, 1, 1),     // Conformer subsampling conv
      geometry(3, 40, 1, 50, 1, 15, 1, 1, 0, 7),   // a Conv1d (height 1), "same" padding
      geometry(1, 17, 5, 6, 1, 1, 1, 1, 0, 0),     // 1x1
      geometry(2, 5, 8, 13, 2, 3, 1, 2, 0, 2),     // uneven kernel and stride
      geometry(1, 64, 33, 80, 3, 3, 2, 2, 0, 0)};  // larger, no padding
  // multiplier 2: x = (n + 0.5) / 2 lands on ties, |x| = 100 saturates.
  constexpr float kMultiplier = 2.0f;
  for (const quant::cuda::Im2colGeometry& g : geometries) {
    const int64_t count = g.batch * g.channels * g.height * g.width;
    std::mt19937 rng(static_cast<uint32_t>(count));
    std::normal_distribution<float> normal(0.0f, 20.0f);
    std::vector<float> values(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      values[i] = i % 5 == 0   ? (static_cast<float>(i % 200) - 100.0f + 0.5f) / 2.0f
                  : i % 7 == 0 ? (i % 2 == 0 ? 100.0f : -100.0f)
                               : normal(rng);
    }
    for (DType dtype : kServedDTypes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " channels=" + std::to_string(g.channels) +
                   " kernel=" + std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w));
      const Served x = serve(values, {g.batch, g.channels, g.height, g.width}, dtype);
      const std::vector<uint8_t> expected = im2col_on_host(x.widened, g, kMultiplier);
      const Tensor patches =
          Tensor::empty({static_cast<int64_t>(expected.size())}, DType::kI8, Device::cuda());
      quant::cuda::im2col_quantize_int8(x.device.raw_data(), dtype, g, kMultiplier,
                                        patches.data<int8_t>(), 0);
      ASSERT_TRUE(
          same_bytes(download_bytes(patches.raw_data(), patches.nbytes()), expected, "patches"));
    }
  }
}

}  // namespace
}  // namespace oasr
