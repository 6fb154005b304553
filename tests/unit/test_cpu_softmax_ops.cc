// The softmax and log-softmax bodies against the scalar ones, bit for bit,
// at every dispatch level (cap_cpu_isa), and softmax's exact quotient
// (ops/cpu/exact_quotient.h) against the division; the definitions
// themselves against float64 arithmetic written here (and against PyTorch
// in tests/oracle/test_ops_basic.cc and test_ops_log_softmax.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/float_types.h"
#include "ops/cpu/exact_quotient.h"
#include "ops/cpu/log_softmax.h"
#include "ops/cpu/softmax.h"
#include "ops/cpu_threads.h"
#include "unit/cpu_simd_test_util.h"

namespace oasr {
namespace {

using testing::CpuSimdOps;
using testing::dispatch_levels;
using testing::same_bits;

std::vector<float> run_softmax(CpuIsa level, const std::vector<float>& x,
                               const std::vector<uint8_t>* keep, int64_t rows, int64_t length) {
  cap_cpu_isa(level);
  std::vector<float> out(x.size(), -1.0f);
  ops::cpu::softmax_f32(x.data(), keep == nullptr ? nullptr : keep->data(), out.data(), rows,
                        length, 1);
  return out;
}

TEST_F(CpuSimdOps, SoftmaxVectorEqualsScalarBits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t length : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 250, 1500}) {
    const int64_t rows = 12;
    std::vector<float> x(rows * length);
    for (float& v : x) v = normal(rng);
    // Rows with special values: a NaN with a payload, -inf entries, +inf, all -inf.
    x[1 * length + length / 2] = bits_float(0x7fc01234u);
    x[2 * length] = -inf;
    x[3 * length + length - 1] = inf;
    for (int64_t l = 0; l < length; ++l) x[4 * length + l] = -inf;
    x[5 * length] = -0.0f;
    // A zero maximum of both signs; exponentials that underflow to zero and
    // to subnormals.
    for (int64_t l = 0; l < length; ++l) x[8 * length + l] = -std::abs(x[8 * length + l]);
    x[8 * length] = -0.0f;
    x[8 * length + length - 1] = 0.0f;
    for (int64_t l = 0; l < length; ++l) x[9 * length + l] = l % 3 == 0 ? -200.0f : -95.0f + l % 7;
    x[9 * length + length / 2] = 0.0f;
    std::vector<uint8_t> keep(x.size());
    for (auto& k : keep) k = rng() % 4 != 0;
    for (int64_t l = 0; l < length; ++l) keep[6 * length + l] = 0;  // nothing kept
    keep[7 * length + length - 1] = 1;
    x[7 * length + length - 1] = nan;  // a kept NaN in the tail
    for (const std::vector<uint8_t>* mask : {static_cast<const std::vector<uint8_t>*>(nullptr),
                                             static_cast<const std::vector<uint8_t>*>(&keep)}) {
      const auto scalar = run_softmax(CpuIsa::kScalar, x, mask, rows, length);
      for (CpuIsa level : dispatch_levels()) {
        const auto vector = run_softmax(level, x, mask, rows, length);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_TRUE(same_bits(scalar[i], vector[i]))
              << cpu_isa_name(level) << " length " << length << (mask ? " masked" : "") << " row "
              << i / length << " col " << i % length << ": scalar " << scalar[i] << " vector "
              << vector[i];
        }
      }
    }
  }
}

// Log-softmax: every body the bits of the scalar one, on rows of every
// tail length, with NaN payloads, infinities, a zero maximum of both signs
// and exponentials that underflow; and close to float64 arithmetic.
TEST_F(CpuSimdOps, LogSoftmaxVectorEqualsScalarBits) {
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t length : {1, 7, 8, 9, 15, 16, 17, 31, 33, 250, 5002}) {
    const int64_t rows = 9;
    std::vector<float> x(rows * length);
    for (float& v : x) v = normal(rng);
    x[1 * length + length / 2] = bits_float(0x7fc01234u);
    x[1 * length + length - 1] = bits_float(0xffc00042u);  // a second NaN, later
    x[2 * length] = -inf;
    x[3 * length + length - 1] = inf;
    for (int64_t l = 0; l < length; ++l) x[4 * length + l] = -inf;
    for (int64_t l = 0; l < length; ++l) x[5 * length + l] = -std::abs(x[5 * length + l]);
    x[5 * length] = -0.0f;
    x[5 * length + length - 1] = 0.0f;
    for (int64_t l = 0; l < length; ++l) x[6 * length + l] = l % 3 == 0 ? -200.0f : -95.0f + l % 7;
    x[6 * length + length / 2] = 0.0f;
    std::vector<float> scalar(x.size());
    cap_cpu_isa(CpuIsa::kScalar);
    ops::cpu::log_softmax_f32(x.data(), scalar.data(), rows, length, 1);
    for (CpuIsa level : dispatch_levels()) {
      cap_cpu_isa(level);
      std::vector<float> vector(x.size(), -1.0f);
      ops::cpu::log_softmax_f32(x.data(), vector.data(), rows, length, 1);
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(same_bits(scalar[i], vector[i]))
            << cpu_isa_name(level) << " length " << length << " row " << i / length << " col "
            << i % length << ": scalar " << scalar[i] << " vector " << vector[i];
      }
    }
    // Row 0 (plain normal values) against float64: within 2e-6 absolute.
    float m = -inf;
    double total = 0;
    for (int64_t l = 0; l < length; ++l) m = std::max(m, x[l]);
    for (int64_t l = 0; l < length; ++l) total += std::exp(static_cast<double>(x[l] - m));
    for (int64_t l = 0; l < length; ++l) {
      ASSERT_NEAR(scalar[l], static_cast<double>(x[l] - m) - std::log(total), 2e-6) << l;
    }
    ASSERT_TRUE(std::isnan(scalar[1 * length])) << "a NaN makes its row NaN";
  }
}

#if defined(__x86_64__)
// ops/cpu/exact_quotient.h on lanes of (e, total) pairs.
OASR_AVX512_WARNINGS_OFF
OASR_AVX512_TARGET void exact_quotients_avx512(const float* e, const double* total, float* out) {
  const __m512d t = _mm512_loadu_pd(total);
  const __m512d r = _mm512_div_pd(_mm512_set1_pd(1.0), t);
  const __m512d e8 = _mm512_cvtps_pd(_mm256_loadu_ps(e));
  _mm256_storeu_ps(out, _mm512_cvtpd_ps(ops::cpu::exact_quotient_pd(e8, r, t)));
}
OASR_AVX512_WARNINGS_ON
OASR_AVX2_TARGET void exact_quotients_avx2(const float* e, const double* total, float* out) {
  const __m256d t = _mm256_loadu_pd(total);
  const __m256d r = _mm256_div_pd(_mm256_set1_pd(1.0), t);
  const __m256d e4 = _mm256_cvtps_pd(_mm_loadu_ps(e));
  _mm_storeu_ps(out, _mm256_cvtpd_ps(ops::cpu::exact_quotient_pd(e4, r, t)));
}

// Softmax's quotient float(double(e) / total) by the reciprocal and the
// check, against the division, on quotients placed on, and one to four
// double ulps either side of, float rounding midpoints (where a plain
// multiply by 1 / total does round differently: counted, so the cases are
// known to be the hard ones), also between float subnormals.
TEST_F(CpuSimdOps, ExactQuotientEqualsTheDivisionAtFloatMidpoints) {
  std::mt19937_64 rng(41);
  std::vector<float> e;
  std::vector<double> total;
  for (int i = 0; i < 200000; ++i) {
    // A midpoint between a float q in [2^-40, 1) and the next one up.
    const float q = std::ldexp(1.0f + static_cast<float>(rng() % (1u << 23)) * 0x1p-23f,
                               -1 - static_cast<int>(rng() % 40));
    const double midpoint = (static_cast<double>(q) + std::nextafter(q, 2.0f)) / 2;
    // e in [q, 1], total = e / midpoint nudged by whole ulps: e / total then
    // lies on or just beside the midpoint.
    const float numerator = std::min(1.0f, q * (1.0f + static_cast<float>(rng() % 1000)));
    double t = static_cast<double>(numerator) / midpoint;
    const int nudge = static_cast<int>(rng() % 9) - 4;
    for (int k = 0; k < std::abs(nudge); ++k) t = std::nextafter(t, nudge > 0 ? 1e300 : 0.0);
    e.push_back(numerator);
    total.push_back(t);
  }
  for (int i = 0; i < 40000; ++i) {
    // Midpoints between float subnormals, (k + 1/2) 2^-149, and the smallest
    // normals: e / total placed on and beside them the same way.
    const double midpoint = (static_cast<double>(rng() % (1u << 24)) + 0.5) * 0x1p-149;
    const double scale = 1.0 + static_cast<double>(rng() % 100000) / 7.0;
    const float numerator = static_cast<float>(midpoint * scale);
    if (numerator == 0.0f) continue;
    double t = static_cast<double>(numerator) / midpoint;
    const int nudge = static_cast<int>(rng() % 9) - 4;
    for (int k = 0; k < std::abs(nudge); ++k) t = std::nextafter(t, nudge > 0 ? 1e300 : 0.0);
    e.push_back(numerator);
    total.push_back(t);
  }
  e.push_back(0.0f);
  total.push_back(3.0);
  while (e.size() % 8 != 0) {
    e.push_back(0.5f);
    total.push_back(1.5);
  }
  int64_t plain_multiply_wrong = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const float expected = static_cast<float>(static_cast<double>(e[i]) / total[i]);
    if (!same_bits(static_cast<float>(static_cast<double>(e[i]) * (1.0 / total[i])), expected)) {
      ++plain_multiply_wrong;
    }
  }
  EXPECT_GT(plain_multiply_wrong, 1000) << "the cases do not reach the midpoints";
  const auto check = [&](const char* body, size_t lanes, auto&& run) {
    std::vector<float> out(lanes);
    for (size_t i = 0; i < e.size(); i += lanes) {
      run(&e[i], &total[i], out.data());
      for (size_t j = 0; j < lanes; ++j) {
        const float expected = static_cast<float>(static_cast<double>(e[i + j]) / total[i + j]);
        ASSERT_TRUE(same_bits(out[j], expected))
            << body << ": " << e[i + j] << " / " << total[i + j] << " gave " << out[j]
            << ", the division " << expected;
      }
    }
  };
  check("avx2", 4, exact_quotients_avx2);
  if (cpu_isa_detected() >= CpuIsa::kAvx512Vnni) check("avx512", 8, exact_quotients_avx512);
}
#endif

// The definition against float64: within 2 ulps of exp(x - m) / sum, where
// x - m is the float32 difference the definition (and PyTorch) takes and
// the rest is exact (exp_f32 is within 1 ulp; sum and quotient in double).
TEST_F(CpuSimdOps, SoftmaxMatchesFloat64) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t rows = 4, length = 1500;
  std::vector<float> x(rows * length);
  for (float& v : x) v = normal(rng);
  for (CpuIsa level : dispatch_levels()) {
    const auto out = run_softmax(level, x, nullptr, rows, length);
    for (int64_t r = 0; r < rows; ++r) {
      float m = -INFINITY;
      double s = 0;
      for (int64_t l = 0; l < length; ++l) m = std::max(m, x[r * length + l]);
      for (int64_t l = 0; l < length; ++l) s += std::exp(double(x[r * length + l] - m));
      for (int64_t l = 0; l < length; ++l) {
        const double expected = std::exp(double(x[r * length + l] - m)) / s;
        const double ulp = std::ldexp(1.0, std::ilogb(float(expected)) - 23);
        ASSERT_LE(std::abs(out[r * length + l] - expected), 2 * ulp) << r << "," << l;
      }
    }
  }
}

TEST_F(CpuSimdOps, SoftmaxRowsDoNotDependOnThreadsOrNeighbours) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t rows = 64, length = 1500;
  std::vector<float> x(rows * length);
  for (float& v : x) v = normal(rng);
  ops::set_cpu_threads(1);
  const auto one = run_softmax(CpuIsa::kAvx2, x, nullptr, rows, length);
  ops::set_cpu_threads(3);
  const auto three = run_softmax(CpuIsa::kAvx2, x, nullptr, rows, length);
  const std::vector<float> row(x.begin() + 17 * length, x.begin() + 18 * length);
  const auto alone = run_softmax(CpuIsa::kAvx2, row, nullptr, 1, length);
  for (int64_t i = 0; i < rows * length; ++i) ASSERT_TRUE(same_bits(one[i], three[i])) << i;
  for (int64_t l = 0; l < length; ++l) ASSERT_TRUE(same_bits(alone[l], one[17 * length + l]));
}

}  // namespace
}  // namespace oasr
