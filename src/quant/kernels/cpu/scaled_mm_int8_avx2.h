// The fast CPU int8 lane: an AVX2 W8A8 GEMM with the DESIGN.md §3 epilogue
// fused in, and the AVX2 per-token quantize that feeds it. Both return the
// same bits as the reference lane (scaled_mm_reference.h); the tests in
// tests/quant/test_avx2_*.cc compare bits.
//
// Exactness: operands are sign-extended to int16 and multiplied with
// _mm256_madd_epi16, which forms a[2i]*b[2i] + a[2i+1]*b[2i+1] in int32 (at
// most 2 * 128 * 128 = 32768 in magnitude, never saturating), and the pairs are
// summed in int32. With |a|, |w| <= 128 every partial sum is bounded by
// K * 16384, which stays below 2^31 for K <= kAvx2MaxK = 2^17 - 1, so the
// int32 accumulator is the exact dot product whatever the summation order;
// larger K is refused.
//
// Call these only where cpu_has_avx2() is true (the lane checks once, at
// bind time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/activations.h"

namespace oasr::quant {

// The largest K whose exact int32 accumulation is guaranteed (see above).
inline constexpr int64_t kAvx2MaxK = (int64_t{1} << 17) - 1;

// True when the dispatch level (core/cpu_features.h) includes AVX2 + FMA
// (the vector epilogue activations use the IEEE fma the scalar ones use);
// OASR_CPU_ISA=scalar makes it false, so auto picks cpu_reference.
bool cpu_has_avx2();

// A weight [N, K] repacked once (at bind time) into the layout the kernel
// streams: panels of kAvx2PanelColumns output channels; inside a panel, for
// each pair of K indices, the channels' (w[n, 2p], w[n, 2p+1]) int16 pairs side
// by side. N and odd K are padded with zeros (which add nothing to a sum).
class PackedInt8Weight {
 public:
  static constexpr int64_t kPanelColumns = 16;

  PackedInt8Weight() = default;
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t k_pairs() const { return (k_ + 1) / 2; }
  int64_t panel_count() const { return (n_ + kPanelColumns - 1) / kPanelColumns; }
  // The int16 data of panel p: k_pairs() * kPanelColumns * 2 values.
  const int16_t* panel(int64_t p) const { return data_.get() + p * k_pairs() * kPanelColumns * 2; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend PackedInt8Weight pack_int8_weight(const int8_t* w, int64_t n, int64_t k);
  struct AlignedFree {
    void operator()(int16_t* p) const;
  };
  int64_t n_ = 0, k_ = 0;
  std::unique_ptr<int16_t[], AlignedFree> data_;
};

// Packs w [N, K] row-major (PyTorch's Linear layout). K <= kAvx2MaxK.
PackedInt8Weight pack_int8_weight(const int8_t* w, int64_t n, int64_t k);

// out[m, n] = epilogue(sum_k a[m, k] * w[n, k]) per DESIGN.md §3:
//   t = w_scale[n] * float(acc); t = a_scale[m] * t; t = t + bias[n]; y = act(t).
// a [M, K] int8 row-major, a_scale [M], w_scale [N], bias [N] or nullptr,
// out [M, N] fp32 row-major. Runs on ops::cpu_threads() threads (ops/cpu_threads.h); a
// call that finds the shared pool busy runs on its own thread instead of waiting.
void scaled_mm_int8_avx2(const int8_t* a, const float* a_scale, const PackedInt8Weight& w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         float* out);

// The same from an unpacked weight (packs it on every call; for tests and
// one-off products -- a layer packs once and calls the overload above).
void scaled_mm_int8_avx2(const int8_t* a, const float* a_scale, const int8_t* w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         int64_t n, int64_t k, float* out);

// Per-token dynamic quantization of x [M, K] (§3 "per token"): per row,
// x' = x * smooth_inv (when not null), amax = max(max |x'|, 1e-8),
// q = clamp(rne(x' * (127 / amax)), -127, 127), scale = amax / 127.
void quantize_per_token_int8_avx2(const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                  int8_t* q, float* scale);
// One row of quantize_per_token_int8_avx2 on the calling thread (for callers
// already inside a pool task, such as the fused norm producers).
void quantize_row_per_token_int8_avx2(const float* x, const float* smooth_inv, int64_t k, int8_t* q,
                                      float* scale);

// numerics.h's quantize_row_static_int8 per row (multiplier fp32 [k]), the
// same bits, rows over the worker pool.
void quantize_static_int8_avx2(const float* x, const float* multiplier, int64_t m, int64_t k,
                               int8_t* q);

}  // namespace oasr::quant
