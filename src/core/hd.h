// OASR_HD marks functions shared by host and device code (DESIGN.md §1: math
// both sides need lives header-only in core/ so they run one implementation).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define OASR_HD __host__ __device__
#else
#define OASR_HD
#endif

namespace oasr {

OASR_HD inline uint32_t float_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

OASR_HD inline float bits_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace oasr
