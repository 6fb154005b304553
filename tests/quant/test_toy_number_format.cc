// The number-format traits table is open: this binary registers a format of
// its own -- int8 storage with a power-of-two scale rule ("int8_pow2",
// scale = the smallest power of two >= amax / 127) -- and a Linear layer
// quantizes to it and serves it on the reference lane, with no edit outside
// this file. The expected output is written out here from the rule, not
// taken from oasr's kernels: with power-of-two scales every product of the
// epilogue is exact, so the layer's float32 output must match bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "layers/linear.h"
#include "quant/format.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/methods/quant_method.h"
#include "quant/number_format.h"
#include "quant/physical.h"

namespace oasr::quant {
namespace {

constexpr const char* kToyName = "int8_pow2";

// The toy scale rule: the smallest power of two >= amax / 127 (amax floored
// at 1e-8 as the built-ins do).
float pow2_scale(float amax) {
  const float floored = amax > 1e-8f ? amax : 1e-8f;
  return std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(floored / 127.0f))));
}

int8_t round_clamp(float v) {
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(r > 127.f ? 127.f : (r < -127.f ? -127.f : r));
}

void pow2_quantize_row(const float* x, const float* smooth_inv, int64_t k, void* q, float* scale) {
  float amax = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    amax = std::fmax(amax, std::fabs(smooth_inv != nullptr ? x[j] * smooth_inv[j] : x[j]));
  }
  *scale = pow2_scale(amax);
  auto* out = static_cast<int8_t*>(q);
  for (int64_t j = 0; j < k; ++j) {
    const float v = smooth_inv != nullptr ? x[j] * smooth_inv[j] : x[j];
    out[j] = round_clamp(v / *scale);  // exact: the scale is a power of two
  }
}

// The reference lane's int8 GEMM over the toy's storage, the toy's own
// quantizers; no other lane serves it.
FormatKernels pow2_kernels(const ScaledMMLane& lane) {
  FormatKernels kernels;
  if (lane.name != "cpu_reference") return kernels;
  kernels.quantize_per_token = [](const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                  void* q, float* scale) {
    for (int64_t row = 0; row < m; ++row) {
      pow2_quantize_row(x + row * k, smooth_inv, k, static_cast<int8_t*>(q) + row * k, scale + row);
    }
  };
  kernels.quantize_static = [f = lane.quantize_static_int8](const float* x, const float* multiplier,
                                                            int64_t m, int64_t k, void* q) {
    f(x, multiplier, m, k, static_cast<int8_t*>(q));
  };
  kernels.scaled_mm = [f = lane.scaled_mm_int8](const void* a, const float* a_scale, const void* w,
                                                const float* w_scale, const float* bias,
                                                Activation act, int64_t m, int64_t n, int64_t k,
                                                float* out) {
    f(static_cast<const int8_t*>(a), a_scale, static_cast<const int8_t*>(w), w_scale, bias, act, m,
      n, k, out);
  };
  return kernels;
}

QDType toy_format() {
  static const QDType id = [] {
    NumberFormat row;
    row.name = kToyName;
    row.method = kToyName;
    row.storage = DType::kI8;
    row.max_value = 127.0f;
    row.max_exact_k = 2147483647LL / (127 * 127);
    row.scale_of_amax = pow2_scale;
    row.quantize_row = pow2_quantize_row;
    row.round_to_grid = [](float v) { return static_cast<float>(round_clamp(v)); };
    row.dequantize = [](const void* q, int64_t i) {
      return static_cast<float>(static_cast<const int8_t*>(q)[i]);
    };
    row.cpu_kernels = pow2_kernels;
    row.physical = [](const QuantScheme& scheme, int) {
      PhysicalSpec spec;
      spec.kind = PhysicalKind::kInt8;
      spec.spec_id = "int8_pow2_per_channel";
      spec.weight_dtype = DType::kI8;
      spec.weight_granularity = scheme.weight.granularity;
      spec.needs_activation_quant = scheme.input.has_value();
      return spec;
    };
    return register_number_format(std::move(row));
  }();
  return id;
}

QuantScheme toy_scheme() {
  QuantScheme scheme;
  scheme.name = "int8_pow2_w8a8";
  scheme.weight = TensorQuant{.dtype = toy_format(), .granularity = Granularity::kPerChannel};
  scheme.input =
      TensorQuant{.dtype = toy_format(), .granularity = Granularity::kPerToken, .dynamic = true};
  return scheme;
}

std::vector<float> random_values(size_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(count);
  for (float& v : out) v = normal(rng);
  return out;
}

TEST(ToyNumberFormat, RegisteredFromTheTestItIsNamedAndLookedUp) {
  const QDType id = toy_format();
  EXPECT_EQ(to_string(id), kToyName);
  EXPECT_EQ(number_format(id).name, kToyName);
  ASSERT_NE(find_number_format(kToyName), nullptr);
  EXPECT_EQ(find_number_format(kToyName)->id, id);
  EXPECT_EQ(materialize(toy_scheme(), 90).spec_id, "int8_pow2_per_channel");
  NumberFormat again;
  again.name = kToyName;
  EXPECT_THROW(register_number_format(again), Error);  // a name is registered once
  // An unregistered id is refused naming it.
  try {
    number_format(static_cast<QDType>(250));
    ADD_FAILURE() << "an unregistered format was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("#250"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(kToyName), std::string::npos) << e.what();
  }
}

TEST(ToyNumberFormat, OnlyTheReferenceLaneServesIt) {
  const QDType id = toy_format();
  ASSERT_NE(find_lane("cpu_reference"), nullptr);
  EXPECT_TRUE(find_lane("cpu_reference")->serves(id));
  for (const ScaledMMLane& lane : registered_lanes()) {
    if (lane.name != "cpu_reference") {
      EXPECT_FALSE(lane.serves(id)) << lane.name;
    }
  }
  // auto picks the reference lane for it, even where a faster int8 lane runs.
  EXPECT_EQ(choose_lane(id, Device::cpu(), "auto").name, "cpu_reference");
  const ScaledMMLane* avx2 = find_lane("cpu_avx2_int8");
  if (avx2 != nullptr) {
    EXPECT_THROW(choose_lane(id, Device::cpu(), "cpu_avx2_int8"), Error);
  }
  EXPECT_THROW(choose_lane(id, Device::cuda(0), "auto"), Error);  // no CUDA lane takes it
}

TEST(ToyNumberFormat, ALinearLayerServesItBitForBitAgainstTheWrittenOutRule) {
  constexpr int64_t kIn = 64, kOut = 24, kRows = 5;
  Module root("Root");
  auto lin = root.register_module("lin", std::make_shared<layers::Linear>(kIn, kOut));
  const std::vector<float> w = random_values(kIn * kOut, 3, 0.2f);
  const std::vector<float> b = random_values(kOut, 4, 1.0f);
  const std::vector<float> x = random_values(kIn * kRows, 5, 1.5f);
  lin->set_param("weight", Tensor::from_vector(w, {kOut, kIn}));
  lin->set_param("bias", Tensor::from_vector(b, {kOut}));

  std::unique_ptr<QuantMethod> method = make_quant_method(toy_scheme());
  EXPECT_EQ(method->name(), kToyName);
  lin->quantize_weight_online(std::move(method));
  lin->bind_quant(BindOptions{Device::cpu(), "auto"});
  EXPECT_EQ(lin->quant_method()->lane().name, "cpu_reference");
  const Tensor y = lin->forward(Tensor::from_vector(x, {kRows, kIn}));
  ASSERT_EQ(y.shape(), (Shape{kRows, kOut}));

  // The rule written out: per-channel weight and per-token input scales are
  // powers of two, q = rne(v / scale) clamped to ±127, and
  // y = (w_scale * acc) * a_scale + bias.
  std::vector<int8_t> wq(w.size()), xq(x.size());
  std::vector<float> w_scale(kOut), x_scale(kRows);
  for (int64_t n = 0; n < kOut; ++n) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kIn; ++j) amax = std::fmax(amax, std::fabs(w[n * kIn + j]));
    w_scale[n] = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / 127.0f))));
    for (int64_t j = 0; j < kIn; ++j) wq[n * kIn + j] = round_clamp(w[n * kIn + j] / w_scale[n]);
  }
  for (int64_t m = 0; m < kRows; ++m) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kIn; ++j) amax = std::fmax(amax, std::fabs(x[m * kIn + j]));
    x_scale[m] = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / 127.0f))));
    for (int64_t j = 0; j < kIn; ++j) xq[m * kIn + j] = round_clamp(x[m * kIn + j] / x_scale[m]);
  }
  const Tensor stored_scale = lin->param("weight_scale");
  for (int64_t n = 0; n < kOut; ++n) {
    EXPECT_EQ(stored_scale.data<float>()[n], w_scale[n]) << "channel " << n;
    int exponent = 0;
    EXPECT_EQ(std::frexp(stored_scale.data<float>()[n], &exponent), 0.5f);  // a power of two
  }
  EXPECT_EQ(std::memcmp(lin->param("weight").raw_data(), wq.data(), wq.size()), 0);
  for (int64_t m = 0; m < kRows; ++m) {
    for (int64_t n = 0; n < kOut; ++n) {
      int32_t acc = 0;
      for (int64_t j = 0; j < kIn; ++j) acc += int32_t{xq[m * kIn + j]} * wq[n * kIn + j];
      const float expected = (w_scale[n] * static_cast<float>(acc)) * x_scale[m] + b[n];
      const float got = y.data<float>()[m * kOut + n];
      EXPECT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
          << "row " << m << " col " << n << ": " << got << " vs " << expected;
    }
  }
  // And it is not the built-in int8 rule: amax / 127 scales are not all
  // powers of two for these weights.
  int non_pow2_int8_scales = 0;
  for (int64_t n = 0; n < kOut; ++n) {
    float amax = 0.0f;
    for (int64_t j = 0; j < kIn; ++j) amax = std::fmax(amax, std::fabs(w[n * kIn + j]));
    int exponent = 0;
    non_pow2_int8_scales += std::frexp(amax / 127.0f, &exponent) != 0.5f;
  }
  EXPECT_GT(non_pow2_int8_scales, 0);
}

}  // namespace
}  // namespace oasr::quant
