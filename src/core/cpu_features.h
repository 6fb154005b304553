// The one place oasr asks the CPU what it can run (cpuid, once) and decides
// which SIMD bodies the CPU kernels dispatch to. Every vectorized CPU body
// (activations, softmax, the int8 GEMM lanes) asks cpu_isa() rather than
// querying the CPU itself, so one switch moves them all: OASR_CPU_ISA
// (core/env.cc) or cap_cpu_isa() lowers the level for A/B runs and for the
// tests that force each lower body. A cap never raises the level above what
// the CPU reports.
//
// Every body of a level returns the bits of the scalar reference (the
// numerics contract, DESIGN.md §3), so the level changes speed only.
#pragma once

namespace oasr {

// Ordered: a level includes the ones below it.
enum class CpuIsa : int {
  kScalar = 0,  // the portable reference loops
  kAvx2 = 1,    // AVX2 + FMA + F16C (x86-64-v3)
  // AVX2 plus AVX-VNNI (the 256-bit, VEX-encoded vpdpbusd): Intel Alder
  // Lake and later cores without AVX-512. The AVX2 bodies, and the int8 lane
  // of that width (quant/kernels/cpu/scaled_mm_int8_avx_vnni.h), which asks
  // cpu_reports_avx_vnni() too: an AVX-512 VNNI CPU need not have AVX-VNNI
  // (AMD Zen 4, Intel Ice Lake), so this level does not imply it.
  kAvxVnni = 2,
  // AVX-512 F/BW/VL/DQ + VNNI (x86-64-v4 with vpdpbusd): Intel Cascade Lake
  // and later, AMD Zen 4 and later.
  kAvx512Vnni = 3,
  // AVX-512 VNNI plus AMX-TILE and AMX-INT8 (tdpbssd on 16 x 64-byte tiles):
  // Intel Sapphire Rapids and later. Detected only where the kernel grants
  // this process the tile data state (Linux 5.16+, arch_prctl
  // ARCH_REQ_XCOMP_PERM), which detection asks for once.
  kAmxInt8 = 4,
};

// The level this process dispatches to: the CPU's, capped by OASR_CPU_ISA
// and by cap_cpu_isa().
CpuIsa cpu_isa();
// What cpuid reports (and, for amx_int8, what the kernel grants), without
// any cap. Detection asks the kernel for the AMX tile state even where a cap
// will keep the level lower: the grant is per process and enlarges signal
// frames by the tile data (8 KB).
CpuIsa cpu_isa_detected();
// Lowers (or restores, with the detected level) the dispatch level for this
// process; a level above the detected one is refused naming both, and so is
// avx_vnni where cpuid does not report AVX-VNNI.
void cap_cpu_isa(CpuIsa level);
inline bool cpu_has(CpuIsa level) {
  return static_cast<int>(cpu_isa()) >= static_cast<int>(level);
}

// Whether cpuid reports AVX-VNNI (the 256-bit form), whatever the level.
bool cpu_reports_avx_vnni();

const char* cpu_isa_name(CpuIsa level);  // "scalar", "avx2", "avx_vnni", "avx512_vnni", "amx_int8"

}  // namespace oasr
