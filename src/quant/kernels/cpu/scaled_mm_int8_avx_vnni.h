// The AVX-VNNI int8 lane's GEMM: the 256-bit, VEX-encoded vpdpbusd of Intel
// cores without AVX-512 (Alder Lake and later), on the AVX-512 VNNI lane's
// packed weights (PackedInt8WeightVnni) and with its exactness argument
// (scaled_mm_int8_vnni.h: a + 128 against the signed weight, the channel's
// 128 * sum_k w subtracted, exact for K <= kVnniMaxK; a longer K runs the
// AVX2 kernel on the packing's fallback). It returns the reference lane's
// bits; tests/quant/test_vnni_scaled_mm.cc compares them.
//
// Call it only where cpu_has_avx_vnni() is true (the lane checks once, at
// bind time).
#pragma once

#include <cstdint>

#include "core/activations.h"
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"

namespace oasr::quant {

// True when the dispatch level includes AVX-VNNI (core/cpu_features.h's
// kAvxVnni or above) and cpuid reports it: an AVX-512 VNNI CPU need not
// have the 256-bit form.
bool cpu_has_avx_vnni();

// DESIGN.md §3's int8 GEMM, as scaled_mm_int8_vnni, on ops::cpu_threads()
// threads.
void scaled_mm_int8_avx_vnni(const int8_t* a, const float* a_scale, const PackedInt8WeightVnni& w,
                             const float* w_scale, const float* bias, Activation act, int64_t m,
                             float* out);

// The same from an unpacked weight (packs it on every call; tests).
void scaled_mm_int8_avx_vnni(const int8_t* a, const float* a_scale, const int8_t* w,
                             const float* w_scale, const float* bias, Activation act, int64_t m,
                             int64_t n, int64_t k, float* out);

}  // namespace oasr::quant
