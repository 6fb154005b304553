// What the CPU SIMD op tests share (test_cpu_simd_ops.cc,
// test_cpu_softmax_ops.cc): the fixture that skips without AVX2 and restores
// the dispatch level and thread count, the levels to run, and a bit compare.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "core/cpu_features.h"
#include "core/float_types.h"
#include "ops/cpu_threads.h"

namespace oasr::testing {

class CpuSimdOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu_isa_detected() < CpuIsa::kAvx2) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  }
  void TearDown() override {
    cap_cpu_isa(cpu_isa_detected());
    ops::set_cpu_threads(0);
  }
};

// Every dispatch level this CPU runs (AVX2 is there: SetUp skips otherwise).
inline std::vector<CpuIsa> dispatch_levels() {
  std::vector<CpuIsa> levels = {CpuIsa::kScalar, CpuIsa::kAvx2};
  if (cpu_isa_detected() >= CpuIsa::kAvx512Vnni) levels.push_back(CpuIsa::kAvx512Vnni);
  // amx_int8 has no float bodies of its own: its run checks that the level
  // above AVX-512 VNNI keeps the AVX-512 ones.
  if (cpu_isa_detected() >= CpuIsa::kAmxInt8) levels.push_back(CpuIsa::kAmxInt8);
  return levels;
}

inline bool same_bits(float a, float b) {
  return float_bits(a) == float_bits(b);
}

}  // namespace oasr::testing
