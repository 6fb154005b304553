// The 8-bit numerics against gen_quant_kernels.py, an independent PyTorch /
// NumPy re-computation of DESIGN.md §3 from its definition: per-token and
// static int8 quantize, the int8 scaled GEMM with its epilogue, e4m3
// quantize and GEMM, and whole quantized Linear / Conv2d layers. int8 results
// must match bit for bit on every CPU lane this machine runs (cpu_reference,
// cpu_avx2_int8); e4m3 on the reference lane, also bit for bit (the oracle
// sums in the same K order). Epilogues with swish / gelu compare within a few
// ulps: PyTorch's silu/gelu are not core/activations.h's polynomials.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/activations.h"
#include "io/safetensors.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "quant/format.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/methods/quant_method.h"
#include "quant/numerics.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using nlohmann::json;
using testing::all_close;
using testing::bit_equal;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

Tensor get(const std::string& name) {
  return oracle().file.get(name).contiguous();
}
Tensor get_optional(const std::string& name) {
  return oracle().file.contains(name) ? get(name) : Tensor();
}
std::vector<std::string> case_names(const std::string& group) {
  std::vector<std::string> names;
  for (const auto& [name, params] : oracle().cases.at(group).items()) names.push_back(name);
  EXPECT_FALSE(names.empty()) << group;
  return names;
}
const float* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

// Every lane available here that serves int8 (the reference at least).
std::vector<const ScaledMMLane*> int8_lanes() {
  std::vector<const ScaledMMLane*> lanes;
  for (const ScaledMMLane& lane : registered_lanes()) {
    if (lane.device == DeviceType::kCPU && lane.serves(QDType::kInt8) && lane.is_available()) {
      lanes.push_back(&lane);
    }
  }
  EXPECT_FALSE(lanes.empty());
  return lanes;
}

bool exact_activation(const std::string& act) {
  return act == "none" || act == "relu";
}

// Same values as the oracle, within a few float32 ulps (the non-exact
// activations only).
::testing::AssertionResult activation_close(const Tensor& actual, const Tensor& expected) {
  return all_close(actual, expected, 1e-6f, 4e-7f);
}

TEST(QuantKernelsOracle, PerTokenInt8QuantizeIsBitExactOnEveryLane) {
  for (const ScaledMMLane* lane : int8_lanes()) {
    for (const std::string& c : case_names("token")) {
      SCOPED_TRACE(lane->name + " " + c);
      const std::string p = "token/" + c + "/";
      const Tensor x = get(p + "x");
      const Tensor smooth = get_optional(p + "smooth_inv");
      const int64_t m = x.size(0), k = x.size(1);
      Tensor q = Tensor::empty({m, k}, DType::kI8);
      Tensor scale = Tensor::empty({m}, DType::kF32);
      lane->quantize_per_token_int8(x.data<float>(), data_or_null(smooth), m, k, q.data<int8_t>(),
                                    scale.data<float>());
      EXPECT_TRUE(bit_equal(q, get(p + "q")));
      EXPECT_TRUE(bit_equal(scale, get(p + "scale")));
    }
  }
}

TEST(QuantKernelsOracle, StaticInt8QuantizeIsBitExact) {
  for (const ScaledMMLane* lane : int8_lanes()) {
    for (const std::string& c : case_names("static")) {
      SCOPED_TRACE(lane->name + " " + c);
      const std::string p = "static/" + c + "/";
      const Tensor x = get(p + "x");
      const Tensor smooth = get_optional(p + "smooth_inv");
      const float input_scale = get(p + "input_scale").data<float>()[0];
      const int64_t m = x.size(0), k = x.size(1);
      std::vector<float> multiplier(static_cast<size_t>(k));
      for (int64_t j = 0; j < k; ++j) {
        multiplier[j] =
            static_multiplier(input_scale, smooth.defined() ? smooth.data<float>()[j] : 1.0f);
      }
      Tensor q = Tensor::empty({m, k}, DType::kI8);
      lane->quantize_static_int8(x.data<float>(), multiplier.data(), m, k, q.data<int8_t>());
      EXPECT_TRUE(bit_equal(q, get(p + "q")));
    }
  }
}

TEST(QuantKernelsOracle, Int8ScaledGemmIsBitExactOnEveryLane) {
  for (const ScaledMMLane* lane : int8_lanes()) {
    for (const std::string& c : case_names("gemm")) {
      SCOPED_TRACE(lane->name + " " + c);
      const std::string p = "gemm/" + c + "/";
      const std::string act = oracle().cases.at("gemm").at(c).at("activation");
      const Tensor a = get(p + "a"), w = get(p + "w");
      const Tensor bias = get_optional(p + "bias");
      const int64_t m = a.size(0), k = a.size(1), n = w.size(0);
      Tensor out = Tensor::empty({m, n}, DType::kF32);
      lane->scaled_mm_int8(a.data<int8_t>(), get(p + "a_scale").data<float>(), w.data<int8_t>(),
                           get(p + "w_scale").data<float>(), data_or_null(bias),
                           parse_activation(act), m, n, k, out.data<float>());
      if (exact_activation(act)) {
        EXPECT_TRUE(bit_equal(out, get(p + "out")));
      } else {
        EXPECT_TRUE(activation_close(out, get(p + "out")));
      }
    }
  }
}

TEST(QuantKernelsOracle, E4m3QuantizeAndGemmAreBitExactOnTheReference) {
  for (const std::string& c : case_names("e4m3_token")) {
    SCOPED_TRACE(c);
    const std::string p = "e4m3_token/" + c + "/";
    const Tensor x = get(p + "x");
    const int64_t m = x.size(0), k = x.size(1);
    Tensor q = Tensor::empty({m, k}, DType::kU8);
    Tensor scale = Tensor::empty({m}, DType::kF32);
    quantize_per_token_e4m3_reference(x.data<float>(), nullptr, m, k, q.data<uint8_t>(),
                                      scale.data<float>());
    EXPECT_TRUE(bit_equal(q, get(p + "q")));
    EXPECT_TRUE(bit_equal(scale, get(p + "scale")));
  }
  for (const std::string& c : case_names("e4m3_gemm")) {
    SCOPED_TRACE(c);
    const std::string p = "e4m3_gemm/" + c + "/";
    const Tensor a = get(p + "a"), w = get(p + "w");
    const Tensor bias = get_optional(p + "bias");
    const int64_t m = a.size(0), k = a.size(1), n = w.size(0);
    Tensor out = Tensor::empty({m, n}, DType::kF32);
    scaled_mm_e4m3_reference(
        a.data<uint8_t>(), get(p + "a_scale").data<float>(), w.data<uint8_t>(),
        get(p + "w_scale").data<float>(), data_or_null(bias),
        parse_activation(oracle().cases.at("e4m3_gemm").at(c).at("activation").get<std::string>()),
        m, n, k, out.data<float>());
    EXPECT_TRUE(bit_equal(out, get(p + "out")));
  }
}

// The whole layer: online weight quantization (stored tensors) and forward.
TEST(QuantKernelsOracle, QuantizedLinearMatchesTheOracleOnEveryLane) {
  for (const ScaledMMLane* lane : int8_lanes()) {
    for (const std::string& c : case_names("linear")) {
      SCOPED_TRACE(lane->name + " " + c);
      const std::string p = "linear/" + c + "/";
      const std::string act = oracle().cases.at("linear").at(c).at("activation");
      const Tensor weight = get(p + "weight");
      const Tensor bias = get_optional(p + "bias");
      layers::LinearActivation layer(weight.size(1), weight.size(0), parse_activation(act),
                                     bias.defined());
      layer.set_param("weight", weight.clone());
      if (bias.defined()) layer.set_param("bias", bias.clone());
      layer.quantize_weight_online(make_quant_method(scheme_preset("int8_w8a8")));
      EXPECT_TRUE(bit_equal(layer.param("weight"), get(p + "weight_q")));
      EXPECT_TRUE(bit_equal(layer.param("weight_scale"), get(p + "weight_scale")));
      layer.bind_quant(BindOptions{Device::cpu(), lane->name});
      ASSERT_EQ(layer.quant_method()->lane().name, lane->name);
      const Tensor y = layer.forward(get(p + "x"));
      if (exact_activation(act)) {
        EXPECT_TRUE(bit_equal(y, get(p + "y")));
      } else {
        EXPECT_TRUE(activation_close(y, get(p + "y")));
      }
    }
  }
}

// A Conv2d under int8_w8a8_static with a calibrated input_scale: KRSC
// weights, patches in (row, column, channel) order, zero padding.
TEST(QuantKernelsOracle, QuantizedConv2dMatchesTheOracle) {
  for (const std::string& c : case_names("conv2d")) {
    SCOPED_TRACE(c);
    const std::string p = "conv2d/" + c + "/";
    const json& params = oracle().cases.at("conv2d").at(c);
    const Tensor weight = get(p + "weight");
    const std::vector<int64_t> stride = params.at("stride");
    const std::vector<int64_t> padding = params.at("padding");
    layers::Conv2d conv(weight.size(1), weight.size(0), weight.size(2), weight.size(3), stride[0],
                        stride[1], /*bias=*/true, padding[0], padding[1]);
    conv.set_param("weight", weight.clone());
    conv.set_param("bias", get(p + "bias").clone());
    // Online quantization of the weight, then the calibrated scale as a
    // quantized checkpoint would carry it.
    auto method = make_quant_method(scheme_preset("int8_w8a8_static"));
    const QuantizedWeight q =
        method->quantize_weight([&] {  // KRSC matrix, written here from the definition
          const int64_t co = weight.size(0), ci = weight.size(1), kh = weight.size(2),
                        kw = weight.size(3);
          Tensor m = Tensor::empty({co, kh * kw * ci}, DType::kF32);
          for (int64_t o = 0; o < co; ++o)
            for (int64_t r = 0; r < kh; ++r)
              for (int64_t s = 0; s < kw; ++s)
                for (int64_t i = 0; i < ci; ++i)
                  m.data<float>()[((o * kh + r) * kw + s) * ci + i] =
                      weight.data<float>()[((o * ci + i) * kh + r) * kw + s];
          return m;
        }());
    EXPECT_TRUE(bit_equal(q.weight.view(get(p + "weight_q").shape()), get(p + "weight_q")));
    EXPECT_TRUE(bit_equal(q.weight_scale, get(p + "weight_scale")));
    conv.attach_quant_method(std::move(method));
    conv.set_param("weight", q.weight.view(get(p + "weight_q").shape()));
    conv.set_param("weight_scale", q.weight_scale);
    conv.set_param("input_scale", get(p + "input_scale").clone());
    conv.bind_quant(BindOptions{Device::cpu(), "auto"});
    EXPECT_TRUE(bit_equal(conv.forward(get(p + "x")), get(p + "y")));
  }
}

}  // namespace
}  // namespace oasr::quant
