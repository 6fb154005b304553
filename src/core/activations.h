// The activations shared by host and device code (GEMM epilogues, the
// elementwise activation op). DESIGN.md §3: host and device must agree
// bitwise, so everything here is built from operations both sides round the
// same way -- IEEE +, -, *, / rounded to nearest even, explicit fma, rint,
// comparisons and bit manipulation -- and fixed polynomials whose
// coefficients come from tools/fit_activation_polynomials.py. The platform's
// expf/erff/tanhf (which differ between glibc and CUDA) are never called.
//
// Products and quotients go through mul_rn/div_rn so that nvcc can neither
// contract a product into a following add (whatever -fmad says) nor use an
// approximate division; on the host the build already has -ffp-contract=off.
//
// Accuracy against the exact functions, in float32 ulps of the exact result:
// the largest error seen over tests/unit/test_activations.cc's sweeps (tens
// of millions of inputs, every float around each branch point) / the bound
// that test enforces:
//   exp_f32 0.95 / 1 (subnormal results: within 1 ulp of the subnormal
//   spacing);  erf_f32 0.99 / 1.5;  tanh_f32 1.33 / 1.5;  gelu_erf (x >= 0)
//   1.57 / 2. In their negative tails gelu_erf and gelu_tanh have an absolute
//   error up to |x| 2^-23 (see there). sigmoid and swish were measured over
//   all 2^32 inputs with x >= -86 (the rest are their limits, see there):
//   sigmoid 1.340 ulp, swish 1.368 ulp; bound 2, enforced over every input
//   by tests/cuda/test_cuda_activations.cu on the device.
// Host and device results were compared bit for bit over all 2^32 inputs of
// every function here on an H200 (nvcc 13.0, -fmad=true and -fmad=false):
// no difference; tests/cuda/test_cuda_activations.cu compares GPU and host
// on every build (sigmoid and swish over all 2^32 inputs).
// NaN inputs come back unchanged (same payload bits on both sides).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#include "core/error.h"
#include "core/hd.h"

namespace oasr {
namespace act {
namespace detail {

// fma rounded once, identically on both sides (glibc's fmaf and __fmaf_rn are
// both the IEEE fusedMultiplyAdd).
OASR_HD inline float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// A product that is never fused with a neighbouring add.
OASR_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// A sum and a difference rounded once, never fused with a neighbouring product.
OASR_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
OASR_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// A correctly rounded quotient even under -prec-div=false.
OASR_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// Round to the nearest integer, ties to even (exact, so both sides agree).
OASR_HD inline float rint_f32(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::rint(x);
#endif
}

OASR_HD inline bool is_nan(float x) {
  return (float_bits(x) & 0x7fffffffu) > 0x7f800000u;
}
OASR_HD inline float abs_f32(float x) {
  return bits_float(float_bits(x) & 0x7fffffffu);
}
OASR_HD inline uint32_t sign_bit(float x) {
  return float_bits(x) & 0x80000000u;
}
// |magnitude| with the sign bit of `sign_source`.
OASR_HD inline float with_sign(float magnitude, uint32_t sign) {
  return bits_float(float_bits(magnitude) | sign);
}
OASR_HD inline float positive_infinity() {
  return bits_float(0x7f800000u);
}
// 2^n for n in [-126, 127] (a normal float).
OASR_HD inline float pow2_normal(int n) {
  return bits_float(static_cast<uint32_t>(n + 127) << 23);
}

// ---- polynomials from tools/fit_activation_polynomials.py -------------------
// Each comment: the formula it serves and the script's max error over its
// interval, float32 ulps of the exact result, as approximation (float64
// arithmetic) / formula evaluated in float32.

// exp(r) = 1 + (r + r^2 Q(r)), |r| <= ln2/2: 0.0134 / 0.793 ulp
OASR_HD inline float exp_q(float r) {
  float q = 0x1.9f0728p-13f;
  q = fma_rn(q, r, 0x1.6d8e44p-10f);
  q = fma_rn(q, r, 0x1.111274p-7f);
  q = fma_rn(q, r, 0x1.55548cp-5f);
  q = fma_rn(q, r, 0x1.555554p-3f);
  return fma_rn(q, r, 0x1p-1f);
}

// erf(x) = x + x P(x^2), |x| <= 1: 0.0255 / 0.907 ulp
OASR_HD inline float erf_small_p(float u) {
  float p = 0x1.496f8cp-14f;
  p = fma_rn(p, u, -0x1.a3f8e2p-11f);
  p = fma_rn(p, u, 0x1.5405f2p-8f);
  p = fma_rn(p, u, -0x1.b7f916p-6f);
  p = fma_rn(p, u, 0x1.ce2cf8p-4f);
  p = fma_rn(p, u, -0x1.81273ep-2f);
  return fma_rn(p, u, 0x1.06eba8p-3f);
}

// erf(x) = 1 - exp(fma(-x, x, R(x - 2.5))), 1 <= |x| < kErfOneThreshold:
// 0.0375 / 0.861 ulp (with a correctly rounded exp). R = log(erfc(x)) + x^2.
OASR_HD inline float erf_mid_r(float t) {
  float r = 0x1.86d558p-13f;
  r = fma_rn(r, t, -0x1.3edbf8p-13f);
  r = fma_rn(r, t, 0x1.432026p-9f);
  r = fma_rn(r, t, -0x1.5efd74p-7f);
  r = fma_rn(r, t, 0x1.cbb584p-5f);
  r = fma_rn(r, t, -0x1.69289ap-2f);
  return fma_rn(r, t, -0x1.8e8b9ep0f);
}
// Beyond this |x|, erfc(x) < 2^-25 and erf(x) rounds to ±1 (3.91920614).
inline constexpr float kErfOneThreshold = 0x1.f5a88cp1f;

// tanh(x) = x + x^3 T(x^2), |x| <= 0.625: 0.0315 / 0.654 ulp
OASR_HD inline float tanh_small_t(float u) {
  float t = 0x1.18e734p-9f;
  t = fma_rn(t, u, -0x1.0bf66ap-7f);
  t = fma_rn(t, u, 0x1.638bap-6f);
  t = fma_rn(t, u, -0x1.b9ee96p-5f);
  t = fma_rn(t, u, 0x1.111066p-3f);
  return fma_rn(t, u, -0x1.555554p-2f);
}
inline constexpr float kTanhPolyLimit = 0.625f;

}  // namespace detail

namespace detail {
// exp_f32's arithmetic without its guards, for x in [-104, kMaxArg]: no
// branch, so a caller can evaluate many of them side by side (a GEMM
// epilogue's fragment) and select its own edge cases around them.
OASR_HD inline float exp_f32_in_range(float x) {
  constexpr float kLog2e = 0x1.715476p0f;
  constexpr float kLn2Hi = 0x1.62ep-1f;
  constexpr float kLn2Lo = 0x1.0bfbe8p-15f;
  // n = rint(x log2e) in [-150, 128]: adding 1.5 * 2^23 rounds to an integer
  // (ties to even, as rint) and leaves it in the low bits, so neither rint
  // nor a float-to-int conversion (slow GPU ops) is needed; same n bit for bit.
  constexpr float kRoundShift = 0x1.8p23f;
  const float shifted = add_rn(mul_rn(x, kLog2e), kRoundShift);
  const float n = sub_rn(shifted, kRoundShift);  // exact
  float r = fma_rn(-n, kLn2Hi, x);               // exact
  r = fma_rn(-n, kLn2Lo, r);
  const float p = 1.0f + fma_rn(mul_rn(r, r), exp_q(r), r);
  const int n_int =
      static_cast<int>(float_bits(shifted)) - static_cast<int>(float_bits(kRoundShift));
  const int n_half = n_int / 2;  // both halves in [-75, 64]: normal powers
  return mul_rn(mul_rn(p, pow2_normal(n_half)), pow2_normal(n_int - n_half));
}
}  // namespace detail

// e^x. Cody–Waite reduction x = n ln2 + r with ln2 = kLn2Hi + kLn2Lo, where
// kLn2Hi has 13 significant bits so n * kLn2Hi is exact for |n| <= 2^11 and
// x - n * kLn2Hi is exact (Sterbenz); one rounding remains in r. 2^n is
// applied as two normal powers of two so that subnormal results are rounded
// once and results near FLT_MAX do not overflow early.
OASR_HD inline float exp_f32(float x) {
  using namespace detail;
  // Largest float with a finite e^x; e^x of the next float exceeds FLT_MAX.
  constexpr float kMaxArg = 0x1.62e42ep6f;  // 88.7228317
  // Below -150 ln2 (-103.97) e^x rounds to +0; -104 is the float just below.
  constexpr float kMinArg = -104.0f;
  if (is_nan(x)) return x;
  if (x > kMaxArg) return positive_infinity();
  if (x < kMinArg) return 0.0f;
  return detail::exp_f32_in_range(x);
}

// erf(x), odd. |x| < 1: x + x P(x^2); 1 <= |x| < 3.92: 1 - e^(-x^2 + R(x)),
// where -x^2 + R is one fma; beyond: ±1.
OASR_HD inline float erf_f32(float x) {
  using namespace detail;
  if (is_nan(x)) return x;
  const float ax = abs_f32(x);
  float result;
  if (ax < 1.0f) {
    result = fma_rn(ax, erf_small_p(mul_rn(ax, ax)), ax);
  } else if (ax < kErfOneThreshold) {
    // ax - 2.5 is exact for ax in [1, 4).
    result = 1.0f - exp_f32(fma_rn(-ax, ax, erf_mid_r(ax - 2.5f)));
  } else {
    result = 1.0f;
  }
  return with_sign(result, sign_bit(x));
}

// tanh(x), odd. |x| <= 0.625: x + x^3 T(x^2); up to 9.5: 1 - 2 / (e^(2|x|) + 1);
// beyond, tanh rounds to ±1 (1 - tanh(9.5) < 2^-26).
OASR_HD inline float tanh_f32(float x) {
  using namespace detail;
  if (is_nan(x)) return x;
  const float ax = abs_f32(x);
  float result;
  if (ax <= kTanhPolyLimit) {
    const float u = mul_rn(ax, ax);
    result = fma_rn(mul_rn(ax, u), tanh_small_t(u), ax);
  } else if (ax < 9.5f) {
    result = 1.0f - div_rn(2.0f, exp_f32(ax + ax) + 1.0f);
  } else {
    result = 1.0f;
  }
  return with_sign(result, sign_bit(x));
}

namespace detail {

// sigmoid and swish are defined below by a fixed sequence of IEEE fma, mul,
// add and integer operations with no division and no branch: the same bits
// on host and device, and cheap in a GEMM epilogue (swish: 33 SASS
// instructions in a straight line, against 42 with a MUFU.RCP and a
// convergence region before; bench/README.md "Division-free swish and
// swish tuning rows"). Inputs whose magnitude exceeds kSigmoidArgLimit take
// their limits by a final select: there e^-|x| < 2^-124, so sigmoid is 0 or
// 1 and swish is -0 or x within 2^-117 absolute.
inline constexpr float kSigmoidArgLimit = 86.0f;

// e^r - 1 = r P(r), |r| <= ln2/2, Horner in fmas and one product:
// approximation 0.207 ulp of e^r (tools/fit_activation_polynomials.py
// "exp_minus_one").
// Returned apart from the 1 so that a caller can scale it exactly.
OASR_HD inline float exp_minus_one_small(float r) {
  float p = 0x1.6ae55cp-10f;
  p = fma_rn(p, r, 0x1.1268aap-7f);
  p = fma_rn(p, r, 0x1.555828p-5f);
  p = fma_rn(p, r, 0x1.555418p-3f);
  p = fma_rn(p, r, 0x1.fffffcp-2f);
  p = fma_rn(p, r, 1.0f);
  return mul_rn(p, r);
}

// e^-a = scale (1 + t) for a in [0, kSigmoidArgLimit], with scale = 2^n a
// normal power of two and t = e^r - 1, |r| <= ln2/2. n = rint(-a log2e) is
// the fma's own rounding against 1.5 * 2^23, and float_bits(shifted) << 23
// is n << 23 modulo 2^32 (the shift constant's bits vanish under it), so
// 2^n is one integer add to the bits of 1.
struct ExpNeg {
  float scale;
  float t;
};
OASR_HD inline ExpNeg exp_neg_bounded(float a) {
  constexpr float kLog2e = 0x1.715476p0f;
  constexpr float kLn2Hi = 0x1.62ep-1f;  // 13 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 0x1.0bfbe8p-15f;
  constexpr float kRoundShift = 0x1.8p23f;
  const float shifted = fma_rn(-a, kLog2e, kRoundShift);
  const float n = sub_rn(shifted, kRoundShift);  // exact, in [-124, 0]
  float r = fma_rn(n, -kLn2Hi, -a);
  r = fma_rn(n, -kLn2Lo, r);
  return {bits_float(float_bits(1.0f) + (float_bits(shifted) << 23)), exp_minus_one_small(r)};
}

// (num + num_lo) / (1 + e) for e in [0, 1] without a division, num_lo a
// correction below half an ulp of num (the rounding error of a numerator
// formed by one fma). A quadratic start y0 ~ 1 / (1 + e) (relative error
// 0.0102, "sigmoid_start" of the fit script) and one Newton step (1 - y0
// is exact, so the residual sees the unrounded 1 + e) give y1 within
// 1.1e-4; the quotient q0 = num y1 is then corrected once against the
// residual (num + num_lo) - q0 (1 + e), whose leading part is exact, which
// leaves q within about 2^-26 of the quotient before its final rounding.
// The residual is formed negated so that -0 / (1 + e) stays -0.
OASR_HD inline float div_one_plus(float num, float num_lo, float e) {
  float y = fma_rn(fma_rn(e, 0x1.4ae1a8p-2f, -0x1.9d9d9p-1f), e, 0x1.fac81ap-1f);
  const float eps = fma_rn(-e, y, sub_rn(1.0f, y));
  y = fma_rn(y, eps, y);
  const float q = mul_rn(num, y);
  const float minus_residual = sub_rn(fma_rn(q, e, sub_rn(q, num)), num_lo);
  return fma_rn(-minus_residual, y, q);
}

// |x| limited to kSigmoidArgLimit; NaN gives the limit (selected away by the
// callers), as the device's fminf does.
OASR_HD inline float sigmoid_arg(float x) {
  const float ax = abs_f32(x);
  return ax <= kSigmoidArgLimit ? ax : kSigmoidArgLimit;
}

}  // namespace detail

// 1 / (1 + e^-x), as (x >= 0 ? 1 : e) / (1 + e) with e = e^-|x| so that the
// result keeps its relative accuracy for x < 0. Below -kSigmoidArgLimit the
// result is +0 (the exact value is below 2^-124).
OASR_HD inline float sigmoid(float x) {
  using namespace detail;
  const ExpNeg parts = exp_neg_bounded(sigmoid_arg(x));
  // e = scale (1 + t) rounded once, and its rounding error (scale - e is
  // exact: e / scale is in [0.7, 1.42]).
  const float e = fma_rn(parts.scale, parts.t, parts.scale);
  const float e_lo = fma_rn(parts.scale, parts.t, sub_rn(parts.scale, e));
  const bool negative = x < 0.0f;
  const float q = div_one_plus(negative ? e : 1.0f, negative ? e_lo : 0.0f, e);
  const float tail = x < -kSigmoidArgLimit ? 0.0f : q;
  return is_nan(x) ? x : tail;
}

// PyTorch's relu: negative -> +0; NaN and -0 pass through unchanged.
OASR_HD inline float relu(float x) {
  return x < 0.0f ? 0.0f : x;
}

// x * sigmoid(x) (SiLU), as (x >= 0 ? x : x e) / (1 + e) with e = e^-|x|.
// Beyond |x| = kSigmoidArgLimit: x for x > 0 (the exact value rounds to x)
// and -0 for x < 0 (|exact| < 2^-117), so swish(-inf) is the limit -0.
OASR_HD inline float swish(float x) {
  using namespace detail;
  const ExpNeg parts = exp_neg_bounded(sigmoid_arg(x));
  const float e = fma_rn(parts.scale, parts.t, parts.scale);
  // For x < 0 the numerator x e = x 2^n (1 + t) as a rounded fma and its
  // rounding error (x 2^n is exact; x_scaled - num is exact as above).
  const float x_scaled = mul_rn(x, parts.scale);
  const float num = fma_rn(x_scaled, parts.t, x_scaled);
  const float num_lo = fma_rn(x_scaled, parts.t, sub_rn(x_scaled, num));
  const bool negative = x < 0.0f;
  const float q = div_one_plus(negative ? num : x, negative ? num_lo : 0.0f, e);
  const float beyond = x < 0.0f ? -0.0f : x;  // NaN: x
  return abs_f32(x) <= kSigmoidArgLimit ? q : beyond;
}

// GELU, PyTorch approximate='none': x * 0.5 * (1 + erf(x / sqrt(2))), in
// PyTorch's operation order. In the negative tail 1 + erf cancels, so the
// error there is absolute: up to |x| 2^-23 (PyTorch's own float32 GELU was
// measured up to |x| 2^-22); gelu(-inf) is the limit -0.
OASR_HD inline float gelu_erf(float x) {
  using namespace detail;
  constexpr float kSqrtHalf = 0x1.6a09e6p-1f;
  if (is_nan(x)) return x;
  if (x < -1e4f) return -0.0f;  // 1 + erf is 0 here: the formula's -0, minus -inf * 0
  return mul_rn(mul_rn(x, 0.5f), 1.0f + erf_f32(mul_rn(x, kSqrtHalf)));
}

// GELU, PyTorch approximate='tanh':
//   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), PyTorch's order.
// Same absolute error in the negative tail as gelu_erf; gelu_tanh(-inf) = -0.
OASR_HD inline float gelu_tanh(float x) {
  using namespace detail;
  constexpr float kSqrt2OverPi = 0x1.988454p-1f;
  constexpr float kKappa = 0x1.6e4e26p-5f;  // 0.044715
  if (is_nan(x)) return x;
  if (x < -1e4f) return -0.0f;  // 1 + tanh is 0 here: the formula's -0, minus -inf * 0
  const float cube = mul_rn(mul_rn(x, x), x);
  const float inner = mul_rn(kSqrt2OverPi, x + mul_rn(kKappa, cube));
  return mul_rn(mul_rn(0.5f, x), 1.0f + tanh_f32(inner));
}

}  // namespace act

// The activations an op or a GEMM epilogue can apply.
enum class Activation : uint8_t { kNone, kRelu, kSwish, kGeluErf, kGeluTanh, kSigmoid, kTanh };

namespace act {

OASR_HD inline float apply(Activation activation, float x) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return relu(x);
    case Activation::kSwish:
      return swish(x);
    case Activation::kGeluErf:
      return gelu_erf(x);
    case Activation::kGeluTanh:
      return gelu_tanh(x);
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kTanh:
      return tanh_f32(x);
  }
  return x;
}

}  // namespace act

// ---- host only: names -------------------------------------------------------

// The canonical name ("none", "relu", "swish", "gelu", "gelu_tanh", "sigmoid",
// "tanh"); parse_activation(activation_name(a)) == a.
inline const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kSwish:
      return "swish";
    case Activation::kGeluErf:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kTanh:
      return "tanh";
  }
  return "?";
}

// Parses an activation name as configs spell it ("silu" is "swish"; "gelu" is
// the exact, erf-based GELU). Unknown names are refused with the list.
inline Activation parse_activation(std::string_view name) {
  struct Entry {
    std::string_view name;
    Activation activation;
  };
  static constexpr Entry kNames[] = {
      {"none", Activation::kNone},       {"relu", Activation::kRelu},
      {"swish", Activation::kSwish},     {"silu", Activation::kSwish},
      {"gelu", Activation::kGeluErf},    {"gelu_tanh", Activation::kGeluTanh},
      {"sigmoid", Activation::kSigmoid}, {"tanh", Activation::kTanh},
  };
  for (const Entry& entry : kNames) {
    if (entry.name == name) return entry.activation;
  }
  std::string accepted;
  for (const Entry& entry : kNames) {
    accepted += accepted.empty() ? "" : ", ";
    accepted += entry.name;
  }
  OASR_THROW(kInvalidArgument, "unknown activation '", name, "'; accepted names: ", accepted);
}

}  // namespace oasr
