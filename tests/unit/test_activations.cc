// core/activations.h against independent references: glibc's double-precision
// exp/erf/erfc/tanh (errors ~1e-16, far below a float32 ulp), evaluated at
// tens of millions of float32 inputs, plus special values and monotonicity.
#include "core/activations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace oasr {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Monotone map float -> uint32 (−inf .. −0, +0 .. +inf in increasing order).
uint32_t order_key(float x) {
  const uint32_t bits = float_bits(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
float from_order_key(uint32_t key) {
  return bits_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Spacing of float32 numbers at |exact| (2^-149 in the subnormal range).
double ulp32(double exact) {
  const double a = std::fabs(exact);
  if (a < 0x1p-126) return 0x1p-149;
  int exponent;
  std::frexp(a, &exponent);  // a = m 2^exponent, m in [0.5, 1)
  return std::ldexp(1.0, exponent - 24);
}

struct SweepResult {
  double max_ulp = 0;
  float worst_x = 0;
  int64_t points = 0;
};

// Up to about `max_points` floats spread evenly (in bit order) over [lo, hi]:
// every float when the interval holds fewer. The stride is odd so that it
// does not alias with the low mantissa bits. `approx` and `exact` take the
// same float input; the error is in ulps of the exact result.
template <typename Approx, typename Exact>
SweepResult sweep(float lo, float hi, uint64_t max_points, Approx approx, Exact exact) {
  SweepResult result;
  const uint64_t begin = order_key(lo);
  const uint64_t end = order_key(hi);
  const uint64_t stride = (end - begin) / max_points | 1;
  for (uint64_t key = begin; key <= end; key += stride) {
    const float x = from_order_key(static_cast<uint32_t>(key));
    const double want = exact(x);
    const double error = std::fabs(static_cast<double>(approx(x)) - want) / ulp32(want);
    ++result.points;
    if (!(error <= result.max_ulp)) {  // also records a NaN error
      result.max_ulp = error;
      result.worst_x = x;
    }
  }
  return result;
}

// Floats in [lo, hi], for intervals meant to be swept exhaustively.
uint64_t floats_in(float lo, float hi) {
  return order_key(hi) - order_key(lo) + 1;
}

// The largest drop f(x_i) - f(x_{i+1}) over consecutive floats in [lo, hi],
// in float32 ulps of f(x_i); 0 when f is non-decreasing there. Functions
// whose error is near 1 ulp can dip by one ulp where the exact function rises
// by less than that per input step; more would be a real defect.
template <typename F>
double largest_drop_ulps(float lo, float hi, F f) {
  double largest = 0;
  float previous = f(lo);
  for (uint32_t key = order_key(lo) + 1; key <= order_key(hi); ++key) {
    const float value = f(from_order_key(key));
    if (value < previous) {
      largest = std::max(largest, (static_cast<double>(previous) - value) / ulp32(previous));
    }
    previous = value;
  }
  return largest;
}

// f(x) <= f(y) for the floats just below, at and just above a branch point.
template <typename F>
void expect_ordered_around(float point, F f) {
  const float below = std::nextafter(point, -kInf);
  const float above = std::nextafter(point, kInf);
  EXPECT_LE(f(below), f(point)) << "at " << std::hexfloat << point;
  EXPECT_LE(f(point), f(above)) << "at " << std::hexfloat << point;
}

#define EXPECT_SWEEP_WITHIN(result, bound)                                               \
  do {                                                                                   \
    const SweepResult r_ = (result);                                                     \
    EXPECT_LE(r_.max_ulp, bound) << "worst at x=" << r_.worst_x << " (" << std::hexfloat \
                                 << r_.worst_x << std::defaultfloat << ")";              \
    std::printf("  %-40s %10lld points, max %.3f ulp at %a\n", #result,                  \
                static_cast<long long>(r_.points), r_.max_ulp, r_.worst_x);              \
  } while (0)

double exact_exp(float x) {
  return std::exp(static_cast<double>(x));
}
double exact_erf(float x) {
  return std::erf(static_cast<double>(x));
}
double exact_tanh(float x) {
  return std::tanh(static_cast<double>(x));
}
double exact_sigmoid(float x) {
  const double v = x;
  return v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
}
double exact_swish(float x) {
  return static_cast<double>(x) * exact_sigmoid(x);
}
// 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2), without cancellation.
double exact_gelu_erf(float x) {
  const double v = x;
  return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
}
double exact_gelu_tanh(float x) {
  const double v = x;
  const double inner = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
  return 0.5 * v * (1.0 + std::tanh(inner));
}

// ---- exp --------------------------------------------------------------------

TEST(Activations, ExpWithinOneUlpOverItsWholeRange) {
  // The whole range with a finite, nonzero result; then every float near the
  // overflow and underflow thresholds and around the reduction boundary
  // |r| = ln2/2 (x = 0.3466).
  EXPECT_SWEEP_WITHIN(sweep(-104.0f, 0x1.62e42ep6f, 8'000'000, act::exp_f32, exact_exp), 1.0);
  EXPECT_SWEEP_WITHIN(sweep(-1.0f, 1.0f, 4'000'000, act::exp_f32, exact_exp), 1.0);
  EXPECT_SWEEP_WITHIN(sweep(88.0f, 0x1.62e42ep6f, floats_in(88.0f, 88.8f), act::exp_f32, exact_exp),
                      1.0);
  EXPECT_SWEEP_WITHIN(sweep(-104.0f, -87.0f, floats_in(-104.0f, -87.0f), act::exp_f32, exact_exp),
                      1.0);
  EXPECT_SWEEP_WITHIN(sweep(0.34f, 0.35f, floats_in(0.34f, 0.35f), act::exp_f32, exact_exp), 1.0);
}

TEST(Activations, ExpSpecialValuesAndThresholds) {
  EXPECT_EQ(act::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(act::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(act::exp_f32(kInf), kInf);
  EXPECT_EQ(float_bits(act::exp_f32(-kInf)), 0u);
  EXPECT_EQ(act::exp_f32(1.0f), 0x1.5bf0a8p1f);  // e, correctly rounded
  // The largest float with a finite exp, and the next one.
  EXPECT_TRUE(std::isfinite(act::exp_f32(0x1.62e42ep6f)));
  EXPECT_EQ(act::exp_f32(std::nextafter(0x1.62e42ep6f, kInf)), kInf);
  EXPECT_EQ(act::exp_f32(1000.0f), kInf);
  // Subnormal results down to the smallest one, then 0.
  EXPECT_EQ(act::exp_f32(-103.9f), 0x1p-149f);
  EXPECT_EQ(act::exp_f32(-104.0f), 0.0f);
  EXPECT_EQ(act::exp_f32(-1000.0f), 0.0f);
  EXPECT_GT(act::exp_f32(-100.0f), 0.0f);
  EXPECT_LT(act::exp_f32(-100.0f), 0x1p-126f);
}

// ---- erf --------------------------------------------------------------------

TEST(Activations, ErfWithinOneAndAHalfUlp) {
  EXPECT_SWEEP_WITHIN(sweep(-8.0f, 8.0f, 8'000'000, act::erf_f32, exact_erf), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(0.0625f, 4.0f, 4'000'000, act::erf_f32, exact_erf), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(0x1p-149f, 0.0625f, 2'000'000, act::erf_f32, exact_erf), 1.5);
  // Every float around the branch points 1 and 3.92.
  EXPECT_SWEEP_WITHIN(sweep(0.95f, 1.05f, floats_in(0.95f, 1.05f), act::erf_f32, exact_erf), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(-3.95f, -3.85f, floats_in(-3.95f, -3.85f), act::erf_f32, exact_erf),
                      1.5);
}

TEST(Activations, ErfSpecialValues) {
  EXPECT_EQ(float_bits(act::erf_f32(0.0f)), float_bits(0.0f));
  EXPECT_EQ(float_bits(act::erf_f32(-0.0f)), float_bits(-0.0f));
  EXPECT_EQ(act::erf_f32(kInf), 1.0f);
  EXPECT_EQ(act::erf_f32(-kInf), -1.0f);
  EXPECT_EQ(act::erf_f32(5.0f), 1.0f);
  EXPECT_LT(act::erf_f32(3.9f), 1.0f);  // 1 - erf(3.9) = 3.5e-8 > 2^-25
  EXPECT_EQ(act::erf_f32(0x1p-140f), static_cast<float>(0x1p-140 * 2 / std::sqrt(M_PI)));
}

// ---- tanh -------------------------------------------------------------------

TEST(Activations, TanhWithinOneAndAHalfUlp) {
  EXPECT_SWEEP_WITHIN(sweep(-12.0f, 12.0f, 8'000'000, act::tanh_f32, exact_tanh), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(0.0625f, 4.0f, 4'000'000, act::tanh_f32, exact_tanh), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(0x1p-149f, 0.0625f, 2'000'000, act::tanh_f32, exact_tanh), 1.5);
  // Every float around the branch points 0.625 and 9.5.
  EXPECT_SWEEP_WITHIN(sweep(0.6f, 0.65f, floats_in(0.6f, 0.65f), act::tanh_f32, exact_tanh), 1.5);
  EXPECT_SWEEP_WITHIN(sweep(-9.6f, -9.4f, floats_in(-9.6f, -9.4f), act::tanh_f32, exact_tanh), 1.5);
}

TEST(Activations, TanhSpecialValues) {
  EXPECT_EQ(float_bits(act::tanh_f32(0.0f)), float_bits(0.0f));
  EXPECT_EQ(float_bits(act::tanh_f32(-0.0f)), float_bits(-0.0f));
  EXPECT_EQ(act::tanh_f32(kInf), 1.0f);
  EXPECT_EQ(act::tanh_f32(-kInf), -1.0f);
  EXPECT_EQ(act::tanh_f32(-20.0f), -1.0f);
  EXPECT_EQ(act::tanh_f32(0x1p-100f), 0x1p-100f);
  EXPECT_EQ(act::tanh_f32(0x1p-149f), 0x1p-149f);
}

// ---- sigmoid, swish, relu ---------------------------------------------------

TEST(Activations, SigmoidAndSwishWithinTwoUlp) {
  // The served range, x >= -kSigmoidArgLimit (normal results). The device
  // test tests/cuda/test_cuda_activations.cu checks all 2^32 inputs.
  const float limit = act::detail::kSigmoidArgLimit;
  EXPECT_SWEEP_WITHIN(sweep(-limit, 30.0f, 8'000'000, act::sigmoid, exact_sigmoid), 2.0);
  EXPECT_SWEEP_WITHIN(sweep(-limit, 1e30f, 8'000'000, act::swish, exact_swish), 2.0);
  EXPECT_SWEEP_WITHIN(sweep(-1.0f, 1.0f, 4'000'000, act::swish, exact_swish), 2.0);
}

TEST(Activations, SigmoidAndSwishTailsBeyondTheLimitAreTheirLimits) {
  // Beyond |x| = 86 e^-|x| < 2^-124: sigmoid is +0 or 1, swish -0 or x.
  const float limit = act::detail::kSigmoidArgLimit;
  const float beyond = std::nextafter(-limit, -kInf);
  EXPECT_EQ(float_bits(act::sigmoid(beyond)), 0u);
  EXPECT_EQ(float_bits(act::sigmoid(-100.0f)), 0u);
  EXPECT_GT(act::sigmoid(-limit), 0x1p-125f);  // the last served input: normal, not flushed
  EXPECT_EQ(float_bits(act::swish(beyond)), float_bits(-0.0f));
  EXPECT_LT(act::swish(-limit), -0x1p-120f);
  EXPECT_EQ(act::sigmoid(std::nextafter(limit, kInf)), 1.0f);
  EXPECT_EQ(act::swish(100.0f), 100.0f);
}

TEST(Activations, SigmoidSwishReluSpecialValues) {
  EXPECT_EQ(act::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(act::sigmoid(-0.0f), 0.5f);
  EXPECT_EQ(act::sigmoid(kInf), 1.0f);
  EXPECT_EQ(float_bits(act::sigmoid(-kInf)), 0u);
  EXPECT_EQ(act::sigmoid(20.0f), 1.0f);  // 1 - 2e-9 rounds to 1

  EXPECT_EQ(act::swish(kInf), kInf);
  EXPECT_EQ(float_bits(act::swish(-kInf)), float_bits(-0.0f));  // limit, not inf*0
  EXPECT_EQ(float_bits(act::swish(-0.0f)), float_bits(-0.0f));
  EXPECT_EQ(act::swish(1e30f), 1e30f);

  EXPECT_EQ(act::relu(3.5f), 3.5f);
  EXPECT_EQ(float_bits(act::relu(-3.5f)), float_bits(0.0f));
  EXPECT_EQ(float_bits(act::relu(-kInf)), float_bits(0.0f));
  EXPECT_EQ(act::relu(kInf), kInf);
  EXPECT_EQ(float_bits(act::relu(-0.0f)), float_bits(-0.0f));  // as torch.relu
}

// ---- gelu -------------------------------------------------------------------

// GELU's contract: a few ulps of the exact value, plus an absolute |x| 2^-23
// where 1 + erf (1 + tanh) cancels in the negative tail.
template <typename Approx, typename Exact>
void expect_gelu_close(float lo, float hi, uint64_t max_points, Approx approx, Exact exact,
                       double ulps) {
  int64_t failures = 0;
  float worst_x = 0;
  double worst_excess = 0;
  const uint64_t stride = (order_key(hi) - order_key(lo)) / max_points | 1;
  for (uint64_t key = order_key(lo); key <= order_key(hi); key += stride) {
    const float x = from_order_key(static_cast<uint32_t>(key));
    const double want = exact(x);
    const double allowed = ulps * ulp32(want) + std::fabs(static_cast<double>(x)) * 0x1p-23;
    const double excess = std::fabs(static_cast<double>(approx(x)) - want) - allowed;
    if (!(excess <= 0)) {
      ++failures;
      if (!(excess <= worst_excess)) {
        worst_excess = excess;
        worst_x = x;
      }
    }
  }
  EXPECT_EQ(failures, 0) << "worst at x=" << std::hexfloat << worst_x;
}

TEST(Activations, GeluErfWithinUlpsPlusTailCancellation) {
  expect_gelu_close(-20.0f, 20.0f, 4'000'000, act::gelu_erf, exact_gelu_erf, 3.0);
  expect_gelu_close(-1e30f, 1e30f, 1'000'000, act::gelu_erf, exact_gelu_erf, 3.0);
}

TEST(Activations, GeluErfPositiveSideIsUlpAccurate) {
  // No cancellation for x >= 0: pure ulp bound.
  EXPECT_SWEEP_WITHIN(sweep(0.0f, 20.0f, 4'000'000, act::gelu_erf, exact_gelu_erf), 2.0);
}

TEST(Activations, GeluTanhMatchesItsDefinition) {
  expect_gelu_close(-20.0f, 20.0f, 4'000'000, act::gelu_tanh, exact_gelu_tanh, 4.0);
  expect_gelu_close(-1e12f, 1e12f, 1'000'000, act::gelu_tanh, exact_gelu_tanh, 4.0);
}

TEST(Activations, GeluSpecialValues) {
  for (auto gelu : {act::gelu_erf, act::gelu_tanh}) {
    EXPECT_EQ(gelu(kInf), kInf);
    EXPECT_EQ(float_bits(gelu(-kInf)), float_bits(-0.0f));
    EXPECT_EQ(float_bits(gelu(0.0f)), float_bits(0.0f));
    EXPECT_EQ(gelu(1e30f), 1e30f);
    EXPECT_EQ(gelu(-30.0f), 0.0f);
  }
}

// ---- all functions -----------------------------------------------------------

TEST(Activations, NanPassesThroughWithItsPayload) {
  const float nans[] = {bits_float(0x7fc00000u), bits_float(0xffc12345u), bits_float(0x7f800001u)};
  for (float nan : nans) {
    for (Activation a :
         {Activation::kNone, Activation::kRelu, Activation::kSwish, Activation::kGeluErf,
          Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh}) {
      EXPECT_EQ(float_bits(act::apply(a, nan)), float_bits(nan)) << activation_name(a);
    }
    EXPECT_EQ(float_bits(act::exp_f32(nan)), float_bits(nan));
    EXPECT_EQ(float_bits(act::erf_f32(nan)), float_bits(nan));
  }
}

TEST(Activations, MonotoneUpToOneUlpAndAcrossBranchPoints) {
  // Every float in each interval: the polynomial switches of erf and tanh,
  // exp's reduction boundary and overflow end, sigmoid's two formulas.
  EXPECT_LE(largest_drop_ulps(0.95f, 1.05f, act::erf_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(3.85f, 3.95f, act::erf_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(0.6f, 0.65f, act::tanh_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(9.4f, 9.6f, act::tanh_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(0.34f, 0.35f, act::exp_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(88.0f, 0x1.62e42ep6f, act::exp_f32), 1.0);
  EXPECT_LE(largest_drop_ulps(-0.5f, -0.25f, act::sigmoid), 1.0);
  EXPECT_LE(largest_drop_ulps(0.25f, 0.5f, act::sigmoid), 1.0);
  // Strictly ordered where the formula changes.
  expect_ordered_around(1.0f, act::erf_f32);
  expect_ordered_around(act::detail::kErfOneThreshold, act::erf_f32);
  expect_ordered_around(act::detail::kTanhPolyLimit, act::tanh_f32);
  expect_ordered_around(9.5f, act::tanh_f32);
  expect_ordered_around(0.0f, act::sigmoid);
  expect_ordered_around(0.0f, act::swish);
  EXPECT_LT(act::sigmoid(-0x1p-20f), 0.5f);
  EXPECT_GT(act::sigmoid(0x1p-20f), 0.5f);
}

TEST(Activations, ApplyDispatchesToEachFunction) {
  for (float x : {-3.25f, -0.5f, 0.0f, 0.75f, 2.0f}) {
    EXPECT_EQ(act::apply(Activation::kNone, x), x);
    EXPECT_EQ(act::apply(Activation::kRelu, x), act::relu(x));
    EXPECT_EQ(act::apply(Activation::kSwish, x), act::swish(x));
    EXPECT_EQ(act::apply(Activation::kGeluErf, x), act::gelu_erf(x));
    EXPECT_EQ(act::apply(Activation::kGeluTanh, x), act::gelu_tanh(x));
    EXPECT_EQ(act::apply(Activation::kSigmoid, x), act::sigmoid(x));
    EXPECT_EQ(act::apply(Activation::kTanh, x), act::tanh_f32(x));
  }
}

TEST(Activations, ParseNamesAndAliases) {
  EXPECT_EQ(parse_activation("relu"), Activation::kRelu);
  EXPECT_EQ(parse_activation("swish"), Activation::kSwish);
  EXPECT_EQ(parse_activation("silu"), Activation::kSwish);
  EXPECT_EQ(parse_activation("gelu"), Activation::kGeluErf);
  EXPECT_EQ(parse_activation("gelu_tanh"), Activation::kGeluTanh);
  EXPECT_EQ(parse_activation("sigmoid"), Activation::kSigmoid);
  EXPECT_EQ(parse_activation("tanh"), Activation::kTanh);
  EXPECT_EQ(parse_activation("none"), Activation::kNone);
  for (Activation a :
       {Activation::kNone, Activation::kRelu, Activation::kSwish, Activation::kGeluErf,
        Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh}) {
    EXPECT_EQ(parse_activation(activation_name(a)), a);
  }
}

TEST(Activations, ParseRefusesUnknownNamesListingTheAccepted) {
  try {
    parse_activation("Relu");
    FAIL() << "expected oasr::Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    const std::string message = error.what();
    EXPECT_NE(message.find("'Relu'"), std::string::npos) << message;
    for (const char* name : {"relu", "swish", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh"}) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace oasr
