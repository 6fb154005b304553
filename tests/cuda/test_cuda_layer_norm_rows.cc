// The CUDA LayerNorm's warp rows (features 257 .. 1024: Whisper's 384 and
// 512; ops/cuda/layer_norm_row.cuh) against their definition, written here
// on the host, bit for bit: lane l sums its elements l, l + 32, ... in order
// from 0, the 32 lane sums meet by the xor butterfly (16, 8, 4, 2, 1), mean
// = sum / n; the squares of (v - mean) the same way; rstd = 1 / sqrt(var +
// eps); y = ((v - mean) * rstd) * w + b, rounded once to the dtype. With the
// residual add, v is the stored sum T(residual + alpha * x). Every operation
// is one float32 rounding (no contraction: this file builds without FMA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/float_types.h"
#include "core/tensor.h"
#include "ops/layer_norm.h"
#include "support/test_support.h"

namespace oasr {
namespace {

float round_to(float v, DType dtype) {
  if (dtype == DType::kF16) return f16_bits_to_f32(f32_to_f16_bits(v));
  if (dtype == DType::kBF16) return bf16_bits_to_f32(f32_to_bf16_bits(v));
  return v;
}

// The butterfly's result of 32 lane values (every lane ends with it).
float butterfly(std::vector<float> p) {
  for (size_t o = 16; o >= 1; o /= 2) {
    std::vector<float> next(32);
    for (size_t l = 0; l < 32; ++l) next[l] = p[l] + p[l ^ o];
    p = next;
  }
  return p[0];
}

struct Expected {
  std::vector<float> sum, y;
};

Expected definition(const std::vector<float>& x, const std::vector<float>& residual, float alpha,
                    const std::vector<float>& w, const std::vector<float>& b, int64_t rows,
                    int64_t n, DType dtype, float eps) {
  Expected out{std::vector<float>(x.size()), std::vector<float>(x.size())};
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t d = 0; d < n; ++d) {
      const size_t at = static_cast<size_t>(r * n + d);
      v[d] = residual.empty() ? x[at] : round_to(residual[at] + alpha * x[at], dtype);
      out.sum[at] = v[d];
    }
    std::vector<float> p(32, 0.0f);
    for (int64_t d = 0; d < n; ++d) p[d % 32] = p[d % 32] + v[d];
    const float mean = butterfly(p) / static_cast<float>(n);
    std::fill(p.begin(), p.end(), 0.0f);
    for (int64_t d = 0; d < n; ++d) {
      const float c = v[d] - mean;
      p[d % 32] = p[d % 32] + c * c;
    }
    const float variance = butterfly(p) / static_cast<float>(n);
    const float rstd = 1.0f / std::sqrt(variance + eps);
    for (int64_t d = 0; d < n; ++d) {
      out.y[static_cast<size_t>(r * n + d)] = round_to(((v[d] - mean) * rstd) * w[d] + b[d], dtype);
    }
  }
  return out;
}

std::vector<float> values_of(const Tensor& t) {
  const Tensor f = t.to(Device::cpu()).to(DType::kF32).contiguous();
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

std::vector<float> random_values(int64_t count, float scale, float shift, uint32_t seed,
                                 DType dtype) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(count));
  for (float& v : out) v = round_to(shift + scale * normal(rng), dtype);
  return out;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << where << ": element " << i << " is " << got[i] << ", the definition gives " << want[i];
  }
}

TEST(CudaLayerNormWarpRows, EqualTheirDefinitionBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  constexpr float kEps = 1e-5f;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [rows, n] : std::vector<std::pair<int64_t, int64_t>>{
             {16, 384}, {3, 257}, {2, 1000}, {5, 1024}, {1, 512}}) {
      const std::string where =
          std::string(dtype_name(dtype)) + " " + std::to_string(rows) + " x " + std::to_string(n);
      const auto seed = static_cast<uint32_t>(rows * 1000 + n);
      const std::vector<float> x = random_values(rows * n, 2.0f, 0.5f, seed, dtype);
      const std::vector<float> residual = random_values(rows * n, 3.0f, -1.0f, seed + 1, dtype);
      const std::vector<float> w = random_values(n, 0.2f, 1.0f, seed + 2, dtype);
      const std::vector<float> b = random_values(n, 0.5f, 0.0f, seed + 3, dtype);
      const auto on = [&](const std::vector<float>& v, const Shape& shape) {
        return Tensor::from_vector(v, shape).to(dtype).to(gpu);
      };
      const Tensor weight = on(w, {n});
      const Tensor bias = on(b, {n});
      const Expected plain = definition(x, {}, 1.0f, w, b, rows, n, dtype, kEps);
      expect_bits(values_of(ops::layer_norm(on(x, {rows, n}), weight, bias, kEps)), plain.y,
                  "layer_norm " + where);
      const Expected added = definition(x, residual, 0.5f, w, b, rows, n, dtype, kEps);
      const ops::AddLayerNormResult got = ops::add_scaled_layer_norm(
          on(x, {rows, n}), on(residual, {rows, n}), 0.5f, weight, bias, kEps);
      expect_bits(values_of(got.sum), added.sum, "add_scaled_layer_norm sum " + where);
      expect_bits(values_of(got.normalized), added.y, "add_scaled_layer_norm " + where);
    }
  }
}

}  // namespace
}  // namespace oasr
