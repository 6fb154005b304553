// layers::Conv1d (src/layers/conv1d.h), the Whisper front-end's convolution:
// full precision against the convolution's definition written here (sums in
// double), with stride, padding and the GELU it owns; and its int8 static
// path (the conv1d kind) against the numerics contract (DESIGN.md §3)
// evaluated here on a KSC weight: q = clamp(rne(x * (1 / input_scale))),
// exact int32 sums, t = w_scale * acc, t = input_scale * t, + bias, act --
// which the CPU lane reproduces bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/activations.h"
#include "core/error.h"
#include "layers/conv1d.h"
#include "quant/format.h"
#include "quant/methods/quant_method.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using layers::Conv1d;

Tensor random_tensor(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

struct Case {
  int64_t cin, cout, kernel, stride, padding, length;
  Activation act;
};

TEST(WhisperConv1d, FullPrecisionMatchesTheDefinition) {
  for (const Case& c : {Case{5, 7, 3, 1, 1, 11, Activation::kGeluErf},
                        Case{6, 4, 3, 2, 1, 12, Activation::kGeluErf},
                        Case{3, 2, 4, 3, 0, 13, Activation::kNone}}) {
    Module root("Root");
    auto conv = root.register_module(
        "conv",
        std::make_shared<Conv1d>(c.cin, c.cout, c.kernel, c.stride, c.padding, true, c.act));
    const Tensor w = random_tensor({c.cout, c.cin, c.kernel}, 1);
    const Tensor b = random_tensor({c.cout}, 2);
    conv->set_param("weight", w);
    conv->set_param("bias", b);
    const Tensor x = random_tensor({2, c.cin, c.length}, 3);
    const Tensor y = conv->forward(x);
    const int64_t out_t = (c.length + 2 * c.padding - c.kernel) / c.stride + 1;
    ASSERT_EQ(y.shape(), (Shape{2, c.cout, out_t}));
    Tensor expected = Tensor::empty(y.shape(), DType::kF32);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t o = 0; o < c.cout; ++o) {
        for (int64_t t = 0; t < out_t; ++t) {
          double sum = b.item_float({o});
          for (int64_t ci = 0; ci < c.cin; ++ci) {
            for (int64_t k = 0; k < c.kernel; ++k) {
              const int64_t it = t * c.stride - c.padding + k;
              if (it < 0 || it >= c.length) continue;
              sum += static_cast<double>(w.item_float({o, ci, k})) * x.item_float({n, ci, it});
            }
          }
          const double gelu = 0.5 * sum * (1.0 + std::erf(sum / std::sqrt(2.0)));
          expected.data<float>()[(n * c.cout + o) * out_t + t] =
              static_cast<float>(c.act == Activation::kGeluErf ? gelu : sum);
        }
      }
    }
    EXPECT_TRUE(testing::all_close(y, expected, 2e-6f, 2e-6f));
  }
}

TEST(WhisperConv1d, Int8StaticFollowsTheNumericsContract) {
  const int64_t cin = 16, cout = 8, kernel = 3, stride = 2, padding = 1, length = 9;
  for (Activation act : {Activation::kNone, Activation::kGeluErf}) {
    Module root("Root");
    auto conv = root.register_module(
        "conv", std::make_shared<Conv1d>(cin, cout, kernel, stride, padding, true, act));
    EXPECT_EQ(conv->quant_geometry().kind, quant::LayerKind::kConv1d);
    conv->attach_quant_method(quant::make_quant_method(quant::scheme_preset("int8_w8a8_static")));
    // The KSC int8 weight [Cout, K, Cin] and the scales, written directly.
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> qdist(-127, 127);
    Tensor w = Tensor::empty({cout, kernel, cin}, DType::kI8);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(qdist(rng));
    Tensor w_scale = random_tensor({cout}, 8, 0.01f);
    for (int64_t i = 0; i < cout; ++i) w_scale.data<float>()[i] += 0.011f;
    const float input_scale = 0.0123f;
    const Tensor bias = random_tensor({cout}, 9);
    conv->set_param("weight", w);
    conv->set_param("weight_scale", w_scale);
    conv->set_param("input_scale", Tensor::full({1}, input_scale));
    conv->set_param("bias", bias);
    conv->bind_quant(quant::BindOptions{});

    const Tensor x = random_tensor({2, cin, length}, 10, 2.0f);
    const Tensor y = conv->forward(x);
    const int64_t out_t = (length + 2 * padding - kernel) / stride + 1;
    ASSERT_EQ(y.shape(), (Shape{2, cout, out_t}));
    const float m = 1.0f / input_scale;
    auto quantize = [&](float v) {
      return static_cast<int32_t>(std::clamp(std::rint(v * m), -127.0f, 127.0f));
    };
    Tensor expected = Tensor::empty(y.shape(), DType::kF32);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t o = 0; o < cout; ++o) {
        for (int64_t t = 0; t < out_t; ++t) {
          int32_t acc = 0;
          for (int64_t k = 0; k < kernel; ++k) {
            const int64_t it = t * stride - padding + k;
            if (it < 0 || it >= length) continue;
            for (int64_t ci = 0; ci < cin; ++ci) {
              acc += quantize(x.item_float({n, ci, it})) *
                     w.data<int8_t>()[(o * kernel + k) * cin + ci];
            }
          }
          float v = w_scale.item_float({o}) * static_cast<float>(acc);
          v = input_scale * v;
          v = v + bias.item_float({o});
          expected.data<float>()[(n * cout + o) * out_t + t] = act::apply(act, v);
        }
      }
    }
    EXPECT_TRUE(testing::bit_equal(y, expected)) << activation_name(act);
  }
}

TEST(WhisperConv1d, RefusalsAndFullPrecisionWeightOrder) {
  Conv1d unaligned(80 + 1, 64, 3);
  EXPECT_NE(
      unaligned.quant_refusal(quant::scheme_preset("int8_w8a8_static")).find("in_channels 81"),
      std::string::npos);
  Conv1d conv(16, 8, 3);
  EXPECT_EQ(conv.quant_refusal(quant::scheme_preset("int8_w8a8_static")), "");
  EXPECT_NE(conv.quant_refusal(quant::scheme_preset("fp8_w8a8_static")).find("int8 only"),
            std::string::npos);
  EXPECT_THROW(conv.forward(Tensor::zeros({1, 15, 10}, DType::kF32)), Error);
  EXPECT_THROW(Conv1d(16, 8, 3, 0), Error);

  // Quantizing a loaded [Cout, Cin, K] weight stores it KSC [Cout, K, Cin],
  // each output channel by the per-token rule (m = 127 / amax, rne, clamp).
  const Tensor w = random_tensor({8, 16, 3}, 21);
  conv.set_param("weight", w);
  conv.set_param("bias", random_tensor({8}, 22));
  conv.quantize_weight_online(quant::make_quant_method(quant::scheme_preset("int8_w8a8_static")));
  const Tensor q = conv.param("weight");
  ASSERT_EQ(q.shape(), (Shape{8, 3, 16}));
  ASSERT_EQ(q.dtype(), DType::kI8);
  for (int64_t o = 0; o < 8; ++o) {
    float amax = 1e-8f;
    for (int64_t i = 0; i < 16 * 3; ++i)
      amax = std::max(amax, std::fabs(w.data<float>()[o * 48 + i]));
    const float m = 127.0f / amax;
    EXPECT_EQ(conv.param("weight_scale").item_float({o}), amax / 127.0f);
    for (int64_t c = 0; c < 16; ++c) {
      for (int64_t k = 0; k < 3; ++k) {
        const float expected = std::clamp(std::rint(w.item_float({o, c, k}) * m), -127.0f, 127.0f);
        ASSERT_EQ(q.item_float({o, k, c}), expected) << o << " " << c << " " << k;
      }
    }
  }
}

}  // namespace
}  // namespace oasr
