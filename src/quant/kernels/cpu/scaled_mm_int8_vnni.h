// The AVX-512 VNNI int8 lane's GEMM: vpdpbusd (u8 x s8, four products
// summed into each int32 lane) with the DESIGN.md §3 epilogue fused in. It
// returns the same bits as the reference lane (scaled_mm_reference.h);
// tests/quant/test_vnni_scaled_mm.cc compares bits.
//
// Exactness. vpdpbusd multiplies an unsigned byte by a signed byte, so the
// signed activation a is stored as a + 128 (1..255) and the kernel computes
// sum_k (a_k + 128) w_k = sum_k a_k w_k + 128 sum_k w_k; the second term,
// 128 * sum_k w[n, k], is computed once per channel when the weight is
// packed and subtracted from the accumulator. Every partial sum is bounded
// by K * 255 * 128, below 2^31 for K <= kVnniMaxK, and vpdpbusd adds in
// int32 without saturating, so the accumulator is the exact dot product
// plus the exact compensation, whatever the order. A weight with larger K
// is packed for the AVX2 kernel instead (exact to its own bound).
//
// Call these only where cpu_has_avx512_vnni() is true (the lane checks once,
// at bind time).
#pragma once

#include <cstdint>
#include <memory>

#include "core/activations.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"

namespace oasr::quant {

// The largest K whose u8 x s8 int32 accumulation is exact (see above).
inline constexpr int64_t kVnniMaxK = 2147483647LL / (255 * 128);

// True when the dispatch level (core/cpu_features.h) includes AVX-512
// F/BW/VL + VNNI; OASR_CPU_ISA=avx_vnni, avx2 or scalar makes it false.
bool cpu_has_avx512_vnni();

// A weight [N, K] repacked once (at bind time): panels of kPanelColumns
// output channels; inside a panel, for each group of four K indices, the
// channels' four int8 weights side by side (one 64-byte vector per 16
// channels). N and K are padded with zeros. `compensation` holds
// 128 * sum_k w[n, k] per channel. K > kVnniMaxK keeps an AVX2 packing.
class PackedInt8WeightVnni {
 public:
  static constexpr int64_t kPanelColumns = 32;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  // Groups of four K per channel, padded with zero weights to the packing's
  // multiple (1 for vpdpbusd; 16 for the AMX lane's 64-byte tile rows).
  int64_t k_quads() const { return k_quads_; }
  int64_t panel_count() const { return (n_ + kPanelColumns - 1) / kPanelColumns; }
  const int8_t* panel(int64_t p) const { return data_.get() + p * k_quads() * kPanelColumns * 4; }
  const int32_t* compensation() const { return compensation_.get(); }
  // Set when K > kVnniMaxK: the GEMM runs the AVX2 kernel on this packing.
  const PackedInt8Weight* avx2_fallback() const { return avx2_.get(); }

 private:
  friend PackedInt8WeightVnni pack_int8_weight_vnni(const int8_t* w, int64_t n, int64_t k,
                                                    int64_t k_quad_multiple);
  struct AlignedFree {
    void operator()(void* p) const;
  };
  int64_t n_ = 0, k_ = 0, k_quads_ = 0;
  std::unique_ptr<int8_t[], AlignedFree> data_;
  std::unique_ptr<int32_t[], AlignedFree> compensation_;
  std::unique_ptr<PackedInt8Weight> avx2_;
};

// Packs w [N, K] row-major (PyTorch's Linear layout); the K groups are
// padded to a multiple of k_quad_multiple (the zero weights add nothing).
PackedInt8WeightVnni pack_int8_weight_vnni(const int8_t* w, int64_t n, int64_t k,
                                           int64_t k_quad_multiple = 1);

// out[m, n] = epilogue(sum_k a[m, k] * w[n, k]) per DESIGN.md §3:
//   t = w_scale[n] * float(acc); t = a_scale[m] * t; t = t + bias[n]; y = act(t).
// a [M, K] int8 row-major, a_scale [M], w_scale [N], bias [N] or nullptr,
// out [M, N] fp32 row-major; on ops::cpu_threads() threads.
void scaled_mm_int8_vnni(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         float* out);

// The same from an unpacked weight (packs it on every call; tests and
// one-off products).
void scaled_mm_int8_vnni(const int8_t* a, const float* a_scale, const int8_t* w,
                         const float* w_scale, const float* bias, Activation act, int64_t m,
                         int64_t n, int64_t k, float* out);

}  // namespace oasr::quant
