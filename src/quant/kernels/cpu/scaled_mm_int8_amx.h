// The AMX int8 lane's GEMM (cpu_amx_int8): tdpbssd on 16 x 64-byte tiles,
// signed int8 times signed int8 summed into int32, with DESIGN.md §3's
// epilogue fused in. It returns the reference lane's bits
// (scaled_mm_reference.h); tests/quant/test_vnni_scaled_mm.cc compares bits.
//
// Exactness. tdpbssd multiplies signed bytes by signed bytes, so unlike
// vpdpbusd there is no +128 offset and no compensation: each int32
// accumulator is the dot product itself. Every partial sum is bounded by
// K * 128 * 128, below 2^31 for K <= kVnniMaxK (the VNNI bound is the smaller
// one), so in any order the accumulator is exact.
//
// The weight is the VNNI lane's packing (panels of 32 channels, four K
// bytes of a channel side by side) with the K groups padded to whole tiles
// (16 groups, 64 bytes): a B tile is 16 groups of 16 channels read with a
// 128-byte row stride, so both halves of a panel come from the one packing.
// A product of fewer than kAmxMinRows rows runs the AVX-512 VNNI kernel on
// that packing (the same bits; a tile of 16 rows would be mostly padding).
//
// Call these only where cpu_has_amx_int8() is true (the lane checks once,
// at bind time).
#pragma once

#include <cstdint>

#include "core/activations.h"
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"

namespace oasr::quant {

// The K groups of one 64-byte tile row.
inline constexpr int64_t kAmxQuadsPerTile = 16;
// Below this many rows the VNNI kernel runs (bench/README.md, "The AMX
// int8 lane").
inline constexpr int64_t kAmxMinRows = 16;

// True when the dispatch level (core/cpu_features.h) includes AMX-INT8 with
// the kernel's permission for tile data; OASR_CPU_ISA=avx512_vnni or lower
// makes it false.
bool cpu_has_amx_int8();

// The VNNI packing with the K groups padded to whole tiles.
PackedInt8WeightVnni pack_int8_weight_amx(const int8_t* w, int64_t n, int64_t k);

// out[m, n] = epilogue(sum_k a[m, k] * w[n, k]) per DESIGN.md §3, as
// scaled_mm_int8_vnni; w from pack_int8_weight_amx.
void scaled_mm_int8_amx(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                        const float* w_scale, const float* bias, Activation act, int64_t m,
                        float* out);

// The same from an unpacked weight (packs it on every call; tests and
// one-off products).
void scaled_mm_int8_amx(const int8_t* a, const float* a_scale, const int8_t* w,
                        const float* w_scale, const float* bias, Activation act, int64_t m,
                        int64_t n, int64_t k, float* out);

}  // namespace oasr::quant
