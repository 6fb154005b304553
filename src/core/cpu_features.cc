#include "core/cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include <atomic>
#include <string>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/env.h"
#include "core/error.h"

namespace oasr {
namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// CPUID leaf 1, ECX bit 29. Asked of cpuid directly because clang before 16
// does not know "f16c" as a __builtin_cpu_supports feature (the fuzz build
// is clang 14).
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

// CPUID leaf 7 subleaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports has no
// "avxvnni").
bool detect_avx_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
}

// CPUID leaf 7 subleaf 0, EDX bits 24 (AMX-TILE) and 25 (AMX-INT8), and the
// kernel's permission for the tile data state: Linux enables AMX per process
// on request (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, 18);
// without it the first tile instruction faults. A kernel without AMX support
// (before 5.16, or AMX disabled) refuses the request, and the level stays
// below.
bool detect_amx_int8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
#if defined(__linux__)
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXtiledata) != 0) return false;
  unsigned long permitted = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted) == 0 &&
         (permitted & (1ul << kXtiledata)) != 0;
#else
  return false;
#endif
}
#else
bool detect_avx_vnni() {
  return false;
}
bool detect_amx_int8() {
  return false;
}
#endif

CpuIsa detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c()) {
    const bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vnni");
    if (vnni) return detect_amx_int8() ? CpuIsa::kAmxInt8 : CpuIsa::kAvx512Vnni;
    return detect_avx_vnni() ? CpuIsa::kAvxVnni : CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kScalar;
}

CpuIsa from_env(CpuIsa detected) {
  const std::string choice = env::get_choice(
      "OASR_CPU_ISA", {"auto", "amx_int8", "avx512_vnni", "avx_vnni", "avx2", "scalar"}, "auto");
  if (choice == "auto") return detected;
  for (CpuIsa level :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvxVnni, CpuIsa::kAvx512Vnni, CpuIsa::kAmxInt8}) {
    if (choice != cpu_isa_name(level)) continue;
    OASR_CHECK(detected >= level && (level != CpuIsa::kAvxVnni || cpu_reports_avx_vnni()),
               kUnsupported, "OASR_CPU_ISA=", choice, ", but this CPU reports only ",
               cpu_isa_name(detected), level == CpuIsa::kAvxVnni ? " (without AVX-VNNI)" : "",
               "; unset OASR_CPU_ISA or name a lower level");
    return level;
  }
  return detected;
}

std::atomic<int>& level() {
  static std::atomic<int> value{static_cast<int>(from_env(cpu_isa_detected()))};
  return value;
}

}  // namespace

CpuIsa cpu_isa_detected() {
  static const CpuIsa detected = detect();
  return detected;
}

bool cpu_reports_avx_vnni() {
  static const bool reported = detect_avx_vnni();
  return reported;
}

CpuIsa cpu_isa() {
  return static_cast<CpuIsa>(level().load(std::memory_order_relaxed));
}

void cap_cpu_isa(CpuIsa cap) {
  // avx_vnni is not implied by avx512_vnni (Zen 4, Ice Lake): asked itself.
  OASR_CHECK(static_cast<int>(cap) <= static_cast<int>(cpu_isa_detected()) &&
                 (cap != CpuIsa::kAvxVnni || cpu_reports_avx_vnni()),
             kUnsupported, "cannot dispatch to ", cpu_isa_name(cap), ": this CPU reports ",
             cpu_isa_name(cpu_isa_detected()), cap == CpuIsa::kAvxVnni ? " without AVX-VNNI" : "");
  level().store(static_cast<int>(cap), std::memory_order_relaxed);
}

const char* cpu_isa_name(CpuIsa level) {
  switch (level) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvxVnni:
      return "avx_vnni";
    case CpuIsa::kAvx512Vnni:
      return "avx512_vnni";
    case CpuIsa::kAmxInt8:
      return "amx_int8";
  }
  return "?";
}

}  // namespace oasr
