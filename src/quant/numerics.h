// The one implementation of DESIGN.md §3's rounding rules, shared by host and
// device code (OASR_HD, header-only). Every CPU reference kernel, CUDA lane
// and host-side weight quantization goes through these functions, so they
// agree bit for bit.
//
// All arithmetic is fp32 with each operation rounded to nearest even: products
// and quotients go through act::detail::mul_rn / div_rn so nvcc can neither
// contract them into fmas nor approximate the division (the host build has
// -ffp-contract=off). No platform expf/erff here or in the epilogue
// activations (core/activations.h).
#pragma once

#include <cstdint>

#include "core/activations.h"
#include "core/float_types.h"
#include "core/hd.h"

namespace oasr::quant {

inline constexpr float kInt8Max = 127.f;    // Q for int8
inline constexpr float kE4m3Max = 448.f;    // Q for float8_e4m3fn
inline constexpr float kAmaxFloor = 1e-8f;  // an all-zero row still gets a finite scale
// The bias of a layer without one: -0 is the additive identity (t + -0 == t
// for every t, -0 included), so the epilogue has no branch for it.
inline constexpr float kNoBias = -0.0f;

// clamp(rne(v), -127, 127). NaN (only from a NaN input) becomes 0.
OASR_HD inline int8_t quantize_int8(float x_times_m) {
  const float rounded = act::detail::rint_f32(x_times_m);
  if (rounded >= kInt8Max) return 127;
  if (rounded <= -kInt8Max) return -127;
  if (!(rounded == rounded)) return 0;
  return static_cast<int8_t>(static_cast<int32_t>(rounded));
}

// Round to nearest even e4m3, saturating to ±448 (cvt.rn.satfinite); bits.
OASR_HD inline uint8_t quantize_e4m3(float x_times_m) {
  return f32_to_e4m3_bits(x_times_m);
}

namespace detail {

OASR_HD inline float smoothed(const float* x, const float* smooth_inv, int64_t j) {
  return smooth_inv != nullptr ? act::detail::mul_rn(x[j], smooth_inv[j]) : x[j];
}

// amax = max(max_j |x'_j|, 1e-8), x' = x * smooth_inv when given.
OASR_HD inline float row_amax(const float* x, const float* smooth_inv, int64_t k) {
  float amax = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const float magnitude = act::detail::abs_f32(smoothed(x, smooth_inv, j));
    if (magnitude > amax) amax = magnitude;
  }
  return amax > kAmaxFloor ? amax : kAmaxFloor;
}

}  // namespace detail

// Per-token dynamic quantization of one row of k values (§3 "per token"):
//   x' = x * smooth_inv (when smooth_inv != nullptr); amax = max(max|x'|, 1e-8);
//   m = Q / amax;  q_j = quantize(x'_j * m);  *scale = amax / Q.
// The same rule quantizes each output channel of a weight (smooth_inv = null).
OASR_HD inline void quantize_row_dynamic_int8(const float* x, const float* smooth_inv, int64_t k,
                                              int8_t* out, float* scale) {
  const float amax = detail::row_amax(x, smooth_inv, k);
  const float multiplier = act::detail::div_rn(kInt8Max, amax);
  for (int64_t j = 0; j < k; ++j) {
    out[j] = quantize_int8(act::detail::mul_rn(detail::smoothed(x, smooth_inv, j), multiplier));
  }
  *scale = act::detail::div_rn(amax, kInt8Max);
}

OASR_HD inline void quantize_row_dynamic_e4m3(const float* x, const float* smooth_inv, int64_t k,
                                              uint8_t* out, float* scale) {
  const float amax = detail::row_amax(x, smooth_inv, k);
  const float multiplier = act::detail::div_rn(kE4m3Max, amax);
  for (int64_t j = 0; j < k; ++j) {
    out[j] = quantize_e4m3(act::detail::mul_rn(detail::smoothed(x, smooth_inv, j), multiplier));
  }
  *scale = act::detail::div_rn(amax, kE4m3Max);
}

// The static per-channel multiplier m_j = smooth_inv_j * (1 / input_scale)
// (smooth_inv_j = 1 when the layer has no runtime smoother), precomputed once
// per layer so the static quantize is one multiply per element.
OASR_HD inline float static_multiplier(float input_scale, float smooth_inv_j) {
  return act::detail::mul_rn(smooth_inv_j, act::detail::div_rn(1.0f, input_scale));
}

// Static quantization of one row: q_j = quantize(x_j * m_j).
OASR_HD inline void quantize_row_static_int8(const float* x, const float* multiplier, int64_t k,
                                             int8_t* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = quantize_int8(act::detail::mul_rn(x[j], multiplier[j]));
}

OASR_HD inline void quantize_row_static_e4m3(const float* x, const float* multiplier, int64_t k,
                                             uint8_t* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = quantize_e4m3(act::detail::mul_rn(x[j], multiplier[j]));
}

// The scaled-GEMM epilogue, fp32 (§3 "int8 GEMM"):
//   t = w_scale * float(acc); t = a_scale * t; t = t + bias; y = act(t).
// The caller rounds y once to the served dtype.
OASR_HD inline float int8_epilogue(int32_t acc, float a_scale, float w_scale, float bias,
                                   Activation act) {
  float t = act::detail::mul_rn(w_scale, static_cast<float>(acc));
  t = act::detail::mul_rn(a_scale, t);
  t = t + bias;
  return act::apply(act, t);
}

// The same epilogue on an fp8 GEMM's fp32 accumulator (summed in K order).
OASR_HD inline float fp8_epilogue(float acc, float a_scale, float w_scale, float bias,
                                  Activation act) {
  float t = act::detail::mul_rn(w_scale, acc);
  t = act::detail::mul_rn(a_scale, t);
  t = t + bias;
  return act::apply(act, t);
}

// One fp8 product-accumulate step: e4m3 x e4m3 products are exact in fp32
// (4-bit significands), so only the add rounds, in K order.
OASR_HD inline float fp8_accumulate(float acc, uint8_t a_bits, uint8_t w_bits) {
  return acc + act::detail::mul_rn(e4m3_bits_to_f32(a_bits), e4m3_bits_to_f32(w_bits));
}

}  // namespace oasr::quant
