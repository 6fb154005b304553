// Exhaustive tests of the float16 / bfloat16 / float8_e4m3fn conversions of
// core/float_types.h and of Tensor::to(DType), against a reference written
// from the formats' definitions. The reference shares nothing with the code
// under test: decoding evaluates (-1)^s * significand * 2^e with std::ldexp;
// encoding looks up the nearest finite value in a sorted table of every value
// the format can represent (ties to the code whose last mantissa bit is 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/float_types.h"
#include "core/tensor.h"

namespace oasr {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A sign/exponent/mantissa format. IEEE formats reserve the all-ones exponent
// for inf/NaN and overflow to inf; e4m3fn ("finite") uses that binade for
// numbers except S.1111.111 (NaN) and saturates to its largest finite value.
struct FormatDefinition {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_special_values;
};

constexpr FormatDefinition kF16Def{"float16", 5, 10, 15, true};
constexpr FormatDefinition kBF16Def{"bfloat16", 8, 7, 127, true};
constexpr FormatDefinition kE4M3Def{"float8_e4m3fn", 4, 3, 7, false};

int total_bits(const FormatDefinition& f) {
  return 1 + f.exponent_bits + f.mantissa_bits;
}
uint32_t sign_bit(const FormatDefinition& f) {
  return 1u << (total_bits(f) - 1);
}

// The value of `code` by the format's definition (exact in a double).
double reference_decode(const FormatDefinition& f, uint32_t code) {
  const uint32_t mantissa_mask = (1u << f.mantissa_bits) - 1u;
  const uint32_t exponent_all_ones = (1u << f.exponent_bits) - 1u;
  const uint32_t mantissa = code & mantissa_mask;
  const uint32_t exponent = (code >> f.mantissa_bits) & exponent_all_ones;
  const bool negative = (code & sign_bit(f)) != 0;
  double magnitude;
  if (f.ieee_special_values && exponent == exponent_all_ones) {
    magnitude = mantissa == 0 ? kInf : kNaN;
  } else if (!f.ieee_special_values && exponent == exponent_all_ones && mantissa == mantissa_mask) {
    magnitude = kNaN;
  } else if (exponent == 0) {  // subnormal: 0.m * 2^(1 - bias)
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {  // normal: 1.m * 2^(e - bias)
    magnitude = std::ldexp(static_cast<double>(mantissa | (mantissa_mask + 1u)),
                           static_cast<int>(exponent) - f.bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// float32 -> format by brute force over a sorted table of magnitudes.
class ReferenceEncoder {
 public:
  explicit ReferenceEncoder(const FormatDefinition& f) : format_(f) {
    for (uint32_t code = 0; code < sign_bit(f); ++code) {
      const double value = reference_decode(f, code);
      if (std::isfinite(value)) table_.push_back({value, code});
    }
    std::sort(table_.begin(), table_.end(),
              [](const Entry& a, const Entry& b) { return a.value < b.value; });
    max_finite_code_ = table_.back().code;
    if (f.ieee_special_values) {
      // IEEE rounds as if the exponent were unbounded and overflows when the
      // result exceeds the largest finite value: the next value up, 2^(emax+1),
      // has an even (zero) mantissa and stands for infinity.
      const int emax = static_cast<int>((1u << f.exponent_bits) - 2u) - f.bias;
      table_.push_back(
          {std::ldexp(1.0, emax + 1), ((1u << f.exponent_bits) - 1u) << f.mantissa_bits});
    }
  }

  const FormatDefinition& format() const { return format_; }
  double max_finite() const { return reference_decode(format_, max_finite_code_); }
  // Every non-negative magnitude the format represents, ascending (for IEEE
  // formats the last entry is the overflow point 2^(emax+1) coded as +inf).
  struct Entry {
    double value;
    uint32_t code;
  };
  const std::vector<Entry>& table() const { return table_; }

  uint32_t encode(float x) const {
    const uint32_t sign = std::signbit(x) ? sign_bit(format_) : 0u;
    if (std::isnan(x)) {
      if (!format_.ieee_special_values) return sign_bit(format_) - 1u;  // 0x7F
      const uint32_t quiet = (1u << (format_.exponent_bits + format_.mantissa_bits)) -
                             (1u << (format_.mantissa_bits - 1));
      return sign | quiet;
    }
    const double a = std::fabs(static_cast<double>(x));
    const auto it = std::lower_bound(table_.begin(), table_.end(), a,
                                     [](const Entry& e, double v) { return e.value < v; });
    if (it == table_.end()) {  // beyond everything: inf (IEEE) or saturate (e4m3fn)
      return sign | (format_.ieee_special_values ? table_.back().code : max_finite_code_);
    }
    if (it->value == a) return sign | it->code;
    const Entry& hi = *it;
    const Entry& lo = *(it - 1);  // table_[0] is 0 and a > 0 here
    // 2a and lo + hi are exact in a double, so the comparison is exact.
    const double twice = 2.0 * a;
    const double sum = lo.value + hi.value;
    uint32_t code;
    if (twice < sum) {
      code = lo.code;
    } else if (twice > sum) {
      code = hi.code;
    } else {
      code = (lo.code & 1u) == 0 ? lo.code : hi.code;
    }
    return sign | code;
  }

 private:
  FormatDefinition format_;
  std::vector<Entry> table_;
  uint32_t max_finite_code_ = 0;
};

const ReferenceEncoder& f16_reference() {
  static const ReferenceEncoder encoder(kF16Def);
  return encoder;
}
const ReferenceEncoder& bf16_reference() {
  static const ReferenceEncoder encoder(kBF16Def);
  return encoder;
}
const ReferenceEncoder& e4m3_reference() {
  static const ReferenceEncoder encoder(kE4M3Def);
  return encoder;
}

// The code under test, one entry per format.
struct Implementation {
  const ReferenceEncoder& reference;
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);
};

Implementation f16_impl() {
  return {f16_reference(), [](float x) -> uint32_t { return f32_to_f16_bits(x); },
          [](uint32_t c) { return f16_bits_to_f32(static_cast<uint16_t>(c)); }};
}
Implementation bf16_impl() {
  return {bf16_reference(), [](float x) -> uint32_t { return f32_to_bf16_bits(x); },
          [](uint32_t c) { return bf16_bits_to_f32(static_cast<uint16_t>(c)); }};
}
Implementation e4m3_impl() {
  return {e4m3_reference(), [](float x) -> uint32_t { return f32_to_e4m3_bits(x); },
          [](uint32_t c) { return e4m3_bits_to_f32(static_cast<uint8_t>(c)); }};
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool is_nan_code(const FormatDefinition& f, uint32_t code) {
  return std::isnan(reference_decode(f, code));
}

// IEEE formats: any NaN is acceptable for a NaN. e4m3fn: the code is exact.
bool codes_agree(const FormatDefinition& f, uint32_t actual, uint32_t expected) {
  if (f.ieee_special_values && is_nan_code(f, expected)) return is_nan_code(f, actual);
  return actual == expected;
}

// Counts disagreements of encode() with the reference over `inputs`, reports
// the first few.
void expect_encodes_like_reference(const Implementation& impl, const std::vector<float>& inputs,
                                   const char* what) {
  const FormatDefinition& f = impl.reference.format();
  int64_t mismatches = 0;
  for (float x : inputs) {
    const uint32_t expected = impl.reference.encode(x);
    const uint32_t actual = impl.encode(x);
    if (codes_agree(f, actual, expected)) continue;
    if (++mismatches <= 8) {
      ADD_FAILURE() << f.name << " " << what << ": f32 " << hex(std::bit_cast<uint32_t>(x)) << " ("
                    << x << ") -> " << hex(actual) << ", expected " << hex(expected);
    }
  }
  EXPECT_EQ(mismatches, 0) << f.name << " " << what << " over " << inputs.size() << " inputs";
}

// ---- the reference itself, against values known from the definitions -------

TEST(FloatReference, KnownValues) {
  EXPECT_EQ(reference_decode(kF16Def, 0x3C00), 1.0);
  EXPECT_EQ(reference_decode(kF16Def, 0xC000), -2.0);
  EXPECT_EQ(reference_decode(kF16Def, 0x7BFF), 65504.0);
  EXPECT_EQ(reference_decode(kF16Def, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(reference_decode(kF16Def, 0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(reference_decode(kF16Def, 0x7C00), kInf);
  EXPECT_TRUE(std::isnan(reference_decode(kF16Def, 0x7C01)));
  EXPECT_TRUE(std::signbit(reference_decode(kF16Def, 0x8000)));
  EXPECT_EQ(reference_decode(kBF16Def, 0x3F80), 1.0);
  EXPECT_EQ(reference_decode(kBF16Def, 0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(reference_decode(kBF16Def, 0x7F7F), std::ldexp(255.0, 120));
  EXPECT_EQ(reference_decode(kE4M3Def, 0x38), 1.0);
  EXPECT_EQ(reference_decode(kE4M3Def, 0x7E), 448.0);
  EXPECT_EQ(reference_decode(kE4M3Def, 0xFE), -448.0);
  EXPECT_EQ(reference_decode(kE4M3Def, 0x78), 256.0);  // the top binade is finite
  EXPECT_EQ(reference_decode(kE4M3Def, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(reference_decode(kE4M3Def, 0x08), std::ldexp(1.0, -6));
  EXPECT_TRUE(std::isnan(reference_decode(kE4M3Def, 0x7F)));
  EXPECT_TRUE(std::isnan(reference_decode(kE4M3Def, 0xFF)));

  EXPECT_EQ(f16_reference().max_finite(), 65504.0);
  EXPECT_EQ(e4m3_reference().max_finite(), 448.0);
  EXPECT_EQ(f16_reference().table().size(), 31744u + 1u);  // + the overflow point
  EXPECT_EQ(bf16_reference().table().size(), 32640u + 1u);
  EXPECT_EQ(e4m3_reference().table().size(), 127u);
}

// ---- decoding and round trips, every code ------------------------------------

void expect_every_code_decodes_and_round_trips(const Implementation& impl) {
  const FormatDefinition& f = impl.reference.format();
  int64_t decode_mismatches = 0;
  int64_t round_trip_mismatches = 0;
  for (uint32_t code = 0; code < (1u << total_bits(f)); ++code) {
    const double expected = reference_decode(f, code);
    const float decoded = impl.decode(code);
    const bool decode_ok = std::isnan(expected)
                               ? std::isnan(decoded)
                               : std::bit_cast<uint32_t>(decoded) ==
                                     std::bit_cast<uint32_t>(static_cast<float>(expected));
    if (!decode_ok && ++decode_mismatches <= 8) {
      ADD_FAILURE() << f.name << " decode " << hex(code) << " -> " << decoded << ", expected "
                    << expected;
    }
    const uint32_t back = impl.encode(decoded);
    const bool round_trip_ok = std::isnan(expected) ? is_nan_code(f, back) : back == code;
    if (!round_trip_ok && ++round_trip_mismatches <= 8) {
      ADD_FAILURE() << f.name << " round trip " << hex(code) << " -> " << hex(back);
    }
  }
  EXPECT_EQ(decode_mismatches, 0) << f.name;
  EXPECT_EQ(round_trip_mismatches, 0) << f.name;
}

TEST(FloatConversions, EveryF16CodeDecodesAndRoundTrips) {
  expect_every_code_decodes_and_round_trips(f16_impl());
}
TEST(FloatConversions, EveryBF16CodeDecodesAndRoundTrips) {
  expect_every_code_decodes_and_round_trips(bf16_impl());
}
TEST(FloatConversions, EveryE4M3CodeDecodesAndRoundTrips) {
  expect_every_code_decodes_and_round_trips(e4m3_impl());
}

TEST(FloatConversions, E4M3NaNCodesDecodeToNaN) {
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_bits_to_f32(0xFF)));
  EXPECT_EQ(e4m3_bits_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_bits_to_f32(0x77), 240.0f);
}

// ---- encoding random float32 bit patterns ------------------------------------

std::vector<float> random_f32_patterns(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(count);
  for (float& x : out) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  return out;
}

// Random mantissas and signs with the float32 exponent drawn around the
// target format's range (subnormals, normals, overflow), where uniform bit
// patterns land only a few percent of the time.
std::vector<float> random_f32_near_range(const FormatDefinition& f, size_t count, uint64_t seed) {
  const int emin_subnormal = 1 - f.bias - f.mantissa_bits;
  const int emax = static_cast<int>((1u << f.exponent_bits) - 1u) - f.bias;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exponent(emin_subnormal - 3, emax + 2);
  std::vector<float> out(count);
  for (float& x : out) {
    const uint32_t biased = static_cast<uint32_t>(std::clamp(exponent(rng) + 127, 0, 254));
    const uint32_t bits = (static_cast<uint32_t>(rng()) & 0x807fffffu) | (biased << 23);
    x = std::bit_cast<float>(bits);
  }
  return out;
}

TEST(FloatConversions, RandomF32BitPatternsEncodeLikeReference) {
  const std::vector<float> inputs = random_f32_patterns(size_t{1} << 22, 20240611);
  expect_encodes_like_reference(f16_impl(), inputs, "random f32 bits");
  expect_encodes_like_reference(bf16_impl(), inputs, "random f32 bits");
  expect_encodes_like_reference(e4m3_impl(), inputs, "random f32 bits");
}

TEST(FloatConversions, RandomF32InEachFormatsRangeEncodeLikeReference) {
  for (const Implementation& impl : {f16_impl(), bf16_impl(), e4m3_impl()}) {
    const std::vector<float> inputs =
        random_f32_near_range(impl.reference.format(), size_t{1} << 20, 77);
    expect_encodes_like_reference(impl, inputs, "random f32 near range");
  }
}

// ---- ties: every midpoint between neighbours, and one f32 ulp either side ----

std::vector<float> midpoints_and_neighbours(const ReferenceEncoder& reference) {
  std::vector<float> out;
  const auto& table = reference.table();
  for (size_t i = 0; i + 1 < table.size(); ++i) {
    const double mid = 0.5 * (table[i].value + table[i + 1].value);
    const float m = static_cast<float>(mid);
    EXPECT_EQ(static_cast<double>(m), mid) << "midpoint not representable in f32";
    for (float v : {m, std::nextafter(m, -INFINITY), std::nextafter(m, INFINITY)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  return out;
}

TEST(FloatConversions, MidpointsRoundToEvenAndNeighboursRoundToNearest) {
  for (const Implementation& impl : {f16_impl(), bf16_impl(), e4m3_impl()}) {
    const std::vector<float> inputs = midpoints_and_neighbours(impl.reference);
    expect_encodes_like_reference(impl, inputs, "midpoints +-1ulp");
  }
}

// Ties spelled out, so the reference's tie rule is checked too.
TEST(FloatConversions, TiesGoToEvenMantissa) {
  const float one_and_half_f16_ulp = 1.0f + std::ldexp(1.0f, -11);  // 1 + ulp/2
  EXPECT_EQ(f32_to_f16_bits(one_and_half_f16_ulp), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16_bits(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xBC02);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(f32_to_e4m3_bits(1.0f + 1.0f / 16), 0x38);
  EXPECT_EQ(f32_to_e4m3_bits(1.0f + 3.0f / 16), 0x3A);
  EXPECT_EQ(f32_to_e4m3_bits(-(1.0f + 3.0f / 16)), 0xBA);
  for (float x : {one_and_half_f16_ulp, 1.0f + 3 * std::ldexp(1.0f, -11)}) {
    EXPECT_EQ(f16_reference().encode(x), f32_to_f16_bits(x));
  }
}

// ---- boundaries: subnormals, overflow, zeros, NaN ---------------------------

struct Expectation {
  float input;
  uint32_t code;
};

void expect_boundaries(const Implementation& impl, const std::vector<Expectation>& cases) {
  const FormatDefinition& f = impl.reference.format();
  for (const Expectation& c : cases) {
    for (float sign : {1.0f, -1.0f}) {
      const float x = sign * c.input;
      const uint32_t expected = c.code | (sign < 0 ? sign_bit(f) : 0u);
      EXPECT_EQ(impl.encode(x), expected)
          << f.name << ": " << x << " (" << hex(std::bit_cast<uint32_t>(x)) << ")";
      EXPECT_EQ(impl.reference.encode(x), expected) << "reference, " << f.name << ": " << x;
    }
  }
}

TEST(FloatConversions, F16Boundaries) {
  const float unit = std::ldexp(1.0f, -24);  // smallest subnormal
  expect_boundaries(f16_impl(), {
                                    {0.0f, 0x0000},
                                    {std::ldexp(1.0f, -149), 0x0000},  // f32's smallest
                                    {std::ldexp(1.0f, -26), 0x0000},
                                    {std::ldexp(1.0f, -25), 0x0000},  // tie with 0 -> 0
                                    {std::nextafter(std::ldexp(1.0f, -25), 1.0f), 0x0001},
                                    {unit, 0x0001},
                                    {1.5f * unit, 0x0002},     // tie 1|2 -> 2
                                    {2.5f * unit, 0x0002},     // tie 2|3 -> 2
                                    {1023.0f * unit, 0x03FF},  // largest subnormal
                                    {1023.5f * unit, 0x0400},  // tie -> smallest normal
                                    {std::ldexp(1.0f, -14), 0x0400},
                                    {65504.0f, 0x7BFF},
                                    {65519.99f, 0x7BFF},
                                    {65520.0f, 0x7C00},  // tie with 2^16 -> inf
                                    {65536.0f, 0x7C00},
                                    {1e30f, 0x7C00},
                                    {INFINITY, 0x7C00},
                                });
  EXPECT_TRUE(is_nan_code(kF16Def, f32_to_f16_bits(NAN)));
  EXPECT_TRUE(is_nan_code(kF16Def, f32_to_f16_bits(-NAN)));
  // A signalling NaN whose payload lives only in the dropped low bits.
  EXPECT_TRUE(is_nan_code(kF16Def, f32_to_f16_bits(std::bit_cast<float>(0x7F800001u))));
}

TEST(FloatConversions, BF16Boundaries) {
  const float unit = std::ldexp(1.0f, -133);
  expect_boundaries(bf16_impl(), {
                                     {0.0f, 0x0000},
                                     {std::ldexp(1.0f, -149), 0x0000},
                                     {std::ldexp(1.0f, -134), 0x0000},  // tie -> 0
                                     {std::nextafter(std::ldexp(1.0f, -134), 1.0f), 0x0001},
                                     {unit, 0x0001},
                                     {1.5f * unit, 0x0002},
                                     {127.5f * unit, 0x0080},  // tie -> smallest normal
                                     {std::ldexp(1.0f, -126), 0x0080},
                                     {std::ldexp(255.0f, 120), 0x7F7F},  // max finite
                                     {std::ldexp(511.0f, 119), 0x7F80},  // tie -> inf
                                     {std::numeric_limits<float>::max(), 0x7F80},
                                     {INFINITY, 0x7F80},
                                 });
  EXPECT_TRUE(is_nan_code(kBF16Def, f32_to_bf16_bits(NAN)));
  EXPECT_TRUE(is_nan_code(kBF16Def, f32_to_bf16_bits(-NAN)));
  EXPECT_TRUE(is_nan_code(kBF16Def, f32_to_bf16_bits(std::bit_cast<float>(0x7F800001u))));
  EXPECT_TRUE(is_nan_code(kBF16Def, f32_to_bf16_bits(std::bit_cast<float>(0xFFFFFFFFu))));
}

TEST(FloatConversions, E4M3BoundariesSaturate) {
  const float unit = std::ldexp(1.0f, -9);
  expect_boundaries(e4m3_impl(), {
                                     {0.0f, 0x00},
                                     {std::ldexp(1.0f, -149), 0x00},
                                     {std::ldexp(1.0f, -10), 0x00},  // tie with 0 -> 0
                                     {std::nextafter(std::ldexp(1.0f, -10), 1.0f), 0x01},
                                     {unit, 0x01},
                                     {1.5f * unit, 0x02},
                                     {7.0f * unit, 0x07},  // largest subnormal
                                     {7.5f * unit, 0x08},  // tie -> smallest normal
                                     {std::ldexp(1.0f, -6), 0x08},
                                     {240.0f, 0x77},
                                     {256.0f, 0x78},
                                     {416.0f, 0x7D},
                                     {448.0f, 0x7E},
                                     {449.0f, 0x7E},
                                     {464.0f, 0x7E},
                                     {480.0f, 0x7E},
                                     {512.0f, 0x7E},
                                     {1e30f, 0x7E},
                                     {std::numeric_limits<float>::max(), 0x7E},
                                     {INFINITY, 0x7E},
                                 });
  EXPECT_EQ(f32_to_e4m3_bits(NAN), 0x7F);
  EXPECT_EQ(f32_to_e4m3_bits(-NAN), 0x7F);
  EXPECT_EQ(f32_to_e4m3_bits(std::bit_cast<float>(0x7F800001u)), 0x7F);
}

TEST(FloatConversions, ZerosKeepTheirSign) {
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_e4m3_bits(-0.0f), 0x80);
  EXPECT_EQ(f32_to_f16_bits(-1e-30f), 0x8000);
  EXPECT_EQ(f32_to_e4m3_bits(-1e-30f), 0x80);
  EXPECT_TRUE(std::signbit(f16_bits_to_f32(0x8000)));
  EXPECT_TRUE(std::signbit(bf16_bits_to_f32(0x8000)));
  EXPECT_TRUE(std::signbit(e4m3_bits_to_f32(0x80)));
  EXPECT_EQ(f16_bits_to_f32(0x8000), 0.0f);
}

// ---- Tensor::to(DType) ------------------------------------------------------

const ReferenceEncoder* reference_for(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return &f16_reference();
    case DType::kBF16:
      return &bf16_reference();
    case DType::kF8E4M3:
      return &e4m3_reference();
    default:
      return nullptr;
  }
}

bool is_integer(DType dtype) {
  return dtype == DType::kI8 || dtype == DType::kU8 || dtype == DType::kI32 || dtype == DType::kI64;
}

void integer_range(DType dtype, double* lo, double* hi) {
  switch (dtype) {
    case DType::kI8:
      *lo = -128, *hi = 127;
      break;
    case DType::kU8:
      *lo = 0, *hi = 255;
      break;
    case DType::kI32:
      *lo = -2147483648.0, *hi = 2147483647.0;
      break;
    default:
      *lo = -9.2e18, *hi = 9.2e18;
      break;
  }
}

// Stores `value` (already representable in `dtype`) at flat index i.
void store(Tensor& t, int64_t i, double value) {
  char* p = static_cast<char*>(t.raw_data()) + i * t.element_size();
  auto put = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (t.dtype()) {
    case DType::kF32:
      put(static_cast<float>(value));
      break;
    case DType::kF16:
    case DType::kBF16:
      put(static_cast<uint16_t>(reference_for(t.dtype())->encode(static_cast<float>(value))));
      break;
    case DType::kF8E4M3:
      put(static_cast<uint8_t>(e4m3_reference().encode(static_cast<float>(value))));
      break;
    case DType::kI8:
      put(static_cast<int8_t>(value));
      break;
    case DType::kU8:
      put(static_cast<uint8_t>(value));
      break;
    case DType::kI32:
      put(static_cast<int32_t>(value));
      break;
    case DType::kI64:
      put(static_cast<int64_t>(value));
      break;
  }
}

// The raw element as an unsigned integer (bit comparison for every dtype).
uint64_t load_bits(const Tensor& t, int64_t i) {
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(t.raw_data()) + i * t.element_size(),
              t.element_size());
  return bits;
}

// What PyTorch's .to(dtype) gives for `value`: floats round through float32
// (RNE; e4m3 saturating), integers truncate toward zero.
uint64_t expected_bits(DType dtype, double value) {
  if (const ReferenceEncoder* reference = reference_for(dtype)) {
    return reference->encode(static_cast<float>(value));
  }
  Tensor one = Tensor::empty({1}, dtype);
  store(one, 0, dtype == DType::kF32 ? value : std::trunc(value));
  return load_bits(one, 0);
}

bool expected_matches(DType dtype, uint64_t actual, uint64_t expected) {
  if (const ReferenceEncoder* reference = reference_for(dtype)) {
    return codes_agree(reference->format(), static_cast<uint32_t>(actual),
                       static_cast<uint32_t>(expected));
  }
  if (dtype == DType::kF32) {
    const float a = std::bit_cast<float>(static_cast<uint32_t>(actual));
    const float e = std::bit_cast<float>(static_cast<uint32_t>(expected));
    if (std::isnan(e)) return std::isnan(a);
  }
  return actual == expected;
}

// The value `v` becomes when held in `dtype`; nullopt when it cannot be held
// (an integer dtype and a non-integral or out-of-range value).
std::optional<double> representable(DType dtype, double v) {
  if (dtype == DType::kF32) return static_cast<double>(static_cast<float>(v));
  if (const ReferenceEncoder* reference = reference_for(dtype)) {
    return reference_decode(reference->format(), reference->encode(static_cast<float>(v)));
  }
  double lo, hi;
  integer_range(dtype, &lo, &hi);
  if (!std::isfinite(v) || v != std::trunc(v) || v < lo || v > hi) return std::nullopt;
  return v + 0.0;  // an integer has no -0
}

TEST(TensorTo, EveryDTypePairOnSmallTensors) {
  const std::vector<double> pool = {0.0,      -0.0,   1.0,     -1.0,    2.75,   -2.75, 0.3,
                                    -0.7,     100.0,  -100.0,  127.0,   -128.0, 200.5, 255.0,
                                    -1000.25, 3000.0, 65504.0, 70000.0, 1e6,    -1e-6, 3e-5,
                                    kInf,     -kInf,  kNaN,    12.0,    -7.0};
  for (DType src_dtype : kAllDTypes) {
    for (DType dst_dtype : kAllDTypes) {
      std::vector<double> values;  // exact values held by the source tensor
      for (double v : pool) {
        const std::optional<double> held = representable(src_dtype, v);
        if (!held) continue;
        if (is_integer(dst_dtype)) {
          double lo, hi;
          integer_range(dst_dtype, &lo, &hi);
          // Out-of-range float -> integer is undefined in C++ and PyTorch.
          if (!std::isfinite(*held) || std::trunc(*held) < lo || std::trunc(*held) > hi) continue;
        }
        values.push_back(*held);
      }
      ASSERT_GE(values.size(), 4u) << dtype_name(src_dtype) << "->" << dtype_name(dst_dtype);
      Tensor src = Tensor::empty({static_cast<int64_t>(values.size())}, src_dtype);
      for (size_t i = 0; i < values.size(); ++i) store(src, static_cast<int64_t>(i), values[i]);
      const Tensor dst = src.to(dst_dtype);
      ASSERT_EQ(dst.dtype(), dst_dtype);
      ASSERT_EQ(dst.shape(), src.shape());
      for (size_t i = 0; i < values.size(); ++i) {
        const uint64_t actual = load_bits(dst, static_cast<int64_t>(i));
        const uint64_t expected = expected_bits(dst_dtype, values[i]);
        EXPECT_TRUE(expected_matches(dst_dtype, actual, expected))
            << dtype_name(src_dtype) << " " << values[i] << " -> " << dtype_name(dst_dtype)
            << ": got " << hex(actual) << ", expected " << hex(expected);
      }
    }
  }
}

TEST(TensorTo, FloatToIntegerTruncatesTowardZero) {
  const Tensor x = Tensor::from_vector<float>({2.7f, -2.7f, -0.5f, 0.5f, 127.9f, -128.9f}, {6});
  const Tensor i8 = x.to(DType::kI8);
  EXPECT_EQ(std::vector<int8_t>(i8.data<int8_t>(), i8.data<int8_t>() + 6),
            (std::vector<int8_t>{2, -2, 0, 0, 127, -128}));
  const Tensor i64 = x.to(DType::kI64);
  EXPECT_EQ(std::vector<int64_t>(i64.data<int64_t>(), i64.data<int64_t>() + 6),
            (std::vector<int64_t>{2, -2, 0, 0, 127, -128}));
  const Tensor u8 = Tensor::from_vector<float>({0.99f, 254.5f, 3.0f}, {3}).to(DType::kU8);
  EXPECT_EQ(std::vector<uint8_t>(u8.data<uint8_t>(), u8.data<uint8_t>() + 3),
            (std::vector<uint8_t>{0, 254, 3}));
}

// int64 -> float32 rounds once (PyTorch 1.13: 2^62 + 2^38 + 1 -> 2^62 + 2^39);
// going through a double first would round twice and land on 2^62.
TEST(TensorTo, Int64ToFloatRoundsOnce) {
  const int64_t above_tie = (int64_t{1} << 62) + (int64_t{1} << 38) + 1;
  const Tensor x = Tensor::from_vector<int64_t>(
      {above_tie, -above_tie, (int64_t{1} << 53) + 1, std::numeric_limits<int64_t>::max()}, {4});
  const Tensor f = x.to(DType::kF32);
  EXPECT_EQ(f.data<float>()[0], std::ldexp(1.0f, 62) + std::ldexp(1.0f, 39));
  EXPECT_EQ(f.data<float>()[1], -(std::ldexp(1.0f, 62) + std::ldexp(1.0f, 39)));
  EXPECT_EQ(f.data<float>()[2], std::ldexp(1.0f, 53));
  EXPECT_EQ(f.data<float>()[3], std::ldexp(1.0f, 63));
  EXPECT_EQ(x.item_float({0}), std::ldexp(1.0f, 62) + std::ldexp(1.0f, 39));
}

// Every code of each narrow float format converted to every float dtype
// (f16 <-> bf16 go through float32, as in PyTorch).
TEST(TensorTo, EveryNarrowFloatCodeToEveryFloatDType) {
  const DType float_dtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3};
  for (DType src_dtype : {DType::kF16, DType::kBF16, DType::kF8E4M3}) {
    const ReferenceEncoder& src_reference = *reference_for(src_dtype);
    const int64_t n = int64_t{1} << total_bits(src_reference.format());
    Tensor src = Tensor::empty({n}, src_dtype);
    for (int64_t code = 0; code < n; ++code) {
      std::memcpy(static_cast<char*>(src.raw_data()) + code * src.element_size(), &code,
                  src.element_size());  // little-endian: the low bytes of `code`
    }
    for (DType dst_dtype : float_dtypes) {
      const Tensor dst = src.to(dst_dtype);
      int64_t mismatches = 0;
      for (int64_t code = 0; code < n; ++code) {
        const double value = reference_decode(src_reference.format(), static_cast<uint32_t>(code));
        // The same dtype is returned as is (NaN payloads included).
        uint64_t expected = static_cast<uint64_t>(code);
        if (dst_dtype == DType::kF32) {
          expected = std::bit_cast<uint32_t>(static_cast<float>(value));
        } else if (dst_dtype != src_dtype) {
          expected = reference_for(dst_dtype)->encode(static_cast<float>(value));
        }
        const uint64_t actual = load_bits(dst, code);
        if (!expected_matches(dst_dtype, actual, expected) && ++mismatches <= 8) {
          ADD_FAILURE() << dtype_name(src_dtype) << " " << hex(code) << " -> "
                        << dtype_name(dst_dtype) << ": got " << hex(actual) << ", expected "
                        << hex(expected);
        }
      }
      EXPECT_EQ(mismatches, 0) << dtype_name(src_dtype) << " -> " << dtype_name(dst_dtype);
    }
  }
}

TEST(TensorTo, StridedSourceConvertsInLogicalOrder) {
  const Tensor x = Tensor::from_vector<float>({0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f}, {2, 3});
  const Tensor t = x.transpose(0, 1).to(DType::kF16);  // [[0.5,3.5],[1.5,4.5],[2.5,5.5]]
  ASSERT_EQ(t.shape(), (Shape{3, 2}));
  ASSERT_TRUE(t.is_contiguous());
  const float expected[] = {0.5f, 3.5f, 1.5f, 4.5f, 2.5f, 5.5f};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(t.data<Half>()[i].bits, f16_reference().encode(expected[i])) << i;
  }
  const Tensor i32 = x.slice(1, 1, 3).to(DType::kI32);  // [[1,2],[4,5]]
  EXPECT_EQ(std::vector<int32_t>(i32.data<int32_t>(), i32.data<int32_t>() + 4),
            (std::vector<int32_t>{1, 2, 4, 5}));
}

TEST(TensorTo, SameDTypeSharesStorage) {
  const Tensor x = Tensor::zeros({4}, DType::kBF16);
  const Tensor y = x.to(DType::kBF16);
  EXPECT_EQ(y.raw_data(), x.raw_data());
}

}  // namespace
}  // namespace oasr
