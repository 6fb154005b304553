#include "quant/kernels/cpu/scaled_mm_reference.h"

#include <algorithm>
#include <array>
#include <vector>

#include "quant/numerics.h"

namespace oasr::quant {

void scaled_mm_int8_reference(const int8_t* a, const float* a_scale, const int8_t* w,
                              const float* w_scale, const float* bias, Activation act, int64_t m,
                              int64_t n, int64_t k, float* out) {
  for (int64_t row = 0; row < m; ++row) {
    const int8_t* a_row = a + row * k;
    for (int64_t col = 0; col < n; ++col) {
      const int8_t* w_row = w + col * k;
      int32_t acc = 0;
      for (int64_t j = 0; j < k; ++j) {
        acc += static_cast<int32_t>(a_row[j]) * static_cast<int32_t>(w_row[j]);
      }
      out[row * n + col] = int8_epilogue(acc, a_scale[row], w_scale[col],
                                         bias != nullptr ? bias[col] : kNoBias, act);
    }
  }
}

namespace {

// e4m3 bits -> fp32, every code once.
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int bits = 0; bits < 256; ++bits) t[bits] = e4m3_bits_to_f32(static_cast<uint8_t>(bits));
    return t;
  }();
  return table;
}

}  // namespace

// Each output sums its K products in K order (fp8_accumulate: an exact
// product, one rounded add), as the contract says. The loops run k outer and
// n inner over a decoded, transposed weight so the adds of many outputs
// proceed side by side; every output still sees its own adds in K order.
void scaled_mm_e4m3_reference(const uint8_t* a, const float* a_scale, const uint8_t* w,
                              const float* w_scale, const float* bias, Activation act, int64_t m,
                              int64_t n, int64_t k, float* out) {
  const std::array<float, 256>& decode = e4m3_table();
  std::vector<float> w_kn(static_cast<size_t>(n * k));
  for (int64_t col = 0; col < n; ++col) {
    for (int64_t j = 0; j < k; ++j) w_kn[static_cast<size_t>(j * n + col)] = decode[w[col * k + j]];
  }
  std::vector<float> acc(static_cast<size_t>(n));
  for (int64_t row = 0; row < m; ++row) {
    const uint8_t* a_row = a + row * k;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float a_value = decode[a_row[j]];
      const float* w_row = w_kn.data() + j * n;
      for (int64_t col = 0; col < n; ++col) {
        acc[static_cast<size_t>(col)] =
            acc[static_cast<size_t>(col)] + act::detail::mul_rn(a_value, w_row[col]);
      }
    }
    for (int64_t col = 0; col < n; ++col) {
      out[row * n + col] = fp8_epilogue(acc[static_cast<size_t>(col)], a_scale[row], w_scale[col],
                                        bias != nullptr ? bias[col] : kNoBias, act);
    }
  }
}

void quantize_per_token_int8_reference(const float* x, const float* smooth_inv, int64_t m,
                                       int64_t k, int8_t* q, float* scale) {
  for (int64_t row = 0; row < m; ++row) {
    quantize_row_dynamic_int8(x + row * k, smooth_inv, k, q + row * k, scale + row);
  }
}

void quantize_per_token_e4m3_reference(const float* x, const float* smooth_inv, int64_t m,
                                       int64_t k, uint8_t* q, float* scale) {
  for (int64_t row = 0; row < m; ++row) {
    quantize_row_dynamic_e4m3(x + row * k, smooth_inv, k, q + row * k, scale + row);
  }
}

void quantize_static_int8_reference(const float* x, const float* multiplier, int64_t m, int64_t k,
                                    int8_t* q) {
  for (int64_t row = 0; row < m; ++row) {
    quantize_row_static_int8(x + row * k, multiplier, k, q + row * k);
  }
}

void quantize_static_e4m3_reference(const float* x, const float* multiplier, int64_t m, int64_t k,
                                    uint8_t* q) {
  for (int64_t row = 0; row < m; ++row) {
    quantize_row_static_e4m3(x + row * k, multiplier, k, q + row * k);
  }
}

}  // namespace oasr::quant
