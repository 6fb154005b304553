// Shared pieces of the CUDA scaled-GEMM tests (test_quant_scaled_mm.cu for
// the mma.sync and cublaslt lanes, test_quant_scaled_mm_native.cu for the
// native lane): device buffers, the problems with their adversarial rows,
// and the expected output bytes computed from the CPU reference.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "core/float_types.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/numerics.h"

namespace oasr::quant::scaled_mm_test {

// A device buffer of `bytes`, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes > 0 ? bytes : 1) != cudaSuccess) data_ = nullptr;
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (data_ != nullptr && bytes_ > 0) {
      cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice);
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Rows [begin, end) of a row-major device matrix of `row_bytes` per row.
inline std::vector<uint8_t> download_rows(const void* device, int64_t begin, int64_t end,
                                          size_t row_bytes) {
  std::vector<uint8_t> host(static_cast<size_t>(end - begin) * row_bytes);
  const cudaError_t status =
      cudaMemcpy(host.data(), static_cast<const uint8_t*>(device) + begin * row_bytes, host.size(),
                 cudaMemcpyDeviceToHost);
  EXPECT_EQ(status, cudaSuccess) << cudaGetErrorString(status);
  return host;
}

// The rows each shape checks: all of a small M; three blocks of a large one
// (the CPU reference over all 4096 rows would dominate the test's runtime).
inline std::vector<std::pair<int64_t, int64_t>> checked_rows(int64_t m) {
  if (m <= 256) return {{0, m}};
  return {{0, 32}, {m / 2 - 16, m / 2 + 16}, {m - 32, m}};
}

// One output variant: served dtype, and whether the quantizing epilogue runs.
struct OutputMode {
  DType served;
  bool quantize;
};

inline const OutputMode kOutputModes[] = {{DType::kF32, false},  {DType::kF16, false},
                                          {DType::kBF16, false}, {DType::kF32, true},
                                          {DType::kF16, true},   {DType::kBF16, true}};

inline std::string describe(const OutputMode& mode) {
  return std::string(dtype_name(mode.served)) + (mode.quantize ? " quantized" : "");
}

inline float round_to_served_host(float y, DType served) {
  if (served == DType::kF16) return f16_bits_to_f32(f32_to_f16_bits(y));
  if (served == DType::kBF16) return bf16_bits_to_f32(f32_to_bf16_bits(y));
  return y;
}

// The expected bytes of one output row from the fp32 reference row.
inline void append_expected(const float* reference, int64_t n, const OutputMode& mode,
                            const std::vector<float>& multiplier, bool fp8,
                            std::vector<uint8_t>& out) {
  for (int64_t col = 0; col < n; ++col) {
    const float y = reference[col];
    if (mode.quantize) {
      const float x = act::detail::mul_rn(round_to_served_host(y, mode.served),
                                          multiplier[static_cast<size_t>(col)]);
      out.push_back(fp8 ? quantize_e4m3(x) : static_cast<uint8_t>(quantize_int8(x)));
      continue;
    }
    uint8_t bytes[4];
    size_t size = 4;
    if (mode.served == DType::kF32) {
      std::memcpy(bytes, &y, 4);
    } else {
      const uint16_t bits = mode.served == DType::kF16 ? f32_to_f16_bits(y) : f32_to_bf16_bits(y);
      std::memcpy(bytes, &bits, 2);
      size = 2;
    }
    out.insert(out.end(), bytes, bytes + size);
  }
}

inline size_t output_element_bytes(const OutputMode& mode) {
  return mode.quantize ? 1 : dtype_size(mode.served);
}

// The epilogue's operands of a problem: a_scale per row, and w_scale,
// bias and the consumer multiplier per column, drawn in that order.
template <typename Problem>
void fill_epilogue_operands(Problem& p, float scale_low, float scale_high, float multiplier_high,
                            std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(scale_low, scale_high);
  std::uniform_real_distribution<float> bias(-1.0f, 1.0f);
  std::uniform_real_distribution<float> multiplier(1.0f, multiplier_high);
  for (int64_t row = 0; row < p.m; ++row) p.a_scale.push_back(scale(rng));
  for (int64_t col = 0; col < p.n; ++col) {
    p.w_scale.push_back(scale(rng));
    p.bias.push_back(bias(rng));
    p.multiplier.push_back(multiplier(rng));
  }
}

// int8 operands with the adversarial rows first: A = +127, -127, 0, random
// +-127; W = -127 (with A's +127 row: the largest |acc|), +127, random +-127.
struct Int8Problem {
  int64_t m, n, k;
  std::vector<int8_t> a, w;
  std::vector<float> a_scale, w_scale, bias, multiplier;
};

inline Int8Problem make_int8_problem(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  Int8Problem p{m, n, k, {}, {}, {}, {}, {}, {}};
  std::uniform_int_distribution<int> value(-127, 127);
  std::uniform_int_distribution<int> sign(0, 1);
  auto fill_row = [&](std::vector<int8_t>& x, int64_t row, int kind) {
    for (int64_t j = 0; j < k; ++j) {
      int v = value(rng);
      if (kind == 0) v = 127;
      if (kind == 1) v = -127;
      if (kind == 2) v = 0;
      if (kind == 3) v = sign(rng) != 0 ? 127 : -127;
      x[static_cast<size_t>(row * k + j)] = static_cast<int8_t>(v);
    }
  };
  p.a.resize(static_cast<size_t>(m * k));
  p.w.resize(static_cast<size_t>(n * k));
  for (int64_t row = 0; row < m; ++row) fill_row(p.a, row, row < 4 ? static_cast<int>(row) : 4);
  const int w_kinds[] = {1, 0, 3};
  for (int64_t row = 0; row < n; ++row) fill_row(p.w, row, row < 3 ? w_kinds[row] : 4);
  fill_epilogue_operands(p, 1e-3f, 1e-2f, 50.0f, rng);
  return p;
}

// Random finite e4m3 codes (NaN is 0x7f / 0xff), every magnitude up to 448.
inline std::vector<uint8_t> random_e4m3(size_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> out(count);
  for (uint8_t& v : out) {
    int c = code(rng);
    while ((c & 0x7f) == 0x7f) c = code(rng);
    v = static_cast<uint8_t>(c);
  }
  return out;
}

struct Fp8Problem {
  int64_t m, n, k;
  std::vector<uint8_t> a, w;
  std::vector<float> a_scale, w_scale, bias, multiplier;
};

inline Fp8Problem make_fp8_problem(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  Fp8Problem p{m,
               n,
               k,
               random_e4m3(static_cast<size_t>(m * k), rng),
               random_e4m3(static_cast<size_t>(n * k), rng),
               {},
               {},
               {},
               {}};
  fill_epilogue_operands(p, 1e-4f, 1e-3f, 100.0f, rng);
  return p;
}

// The e4m3 variants every determinism check runs.
struct Fp8Variant {
  OutputMode mode;
  bool with_bias;
  Activation act;
};
inline const Fp8Variant kFp8Variants[] = {{{DType::kF32, false}, false, Activation::kNone},
                                          {{DType::kF16, false}, true, Activation::kSwish},
                                          {{DType::kBF16, true}, true, Activation::kRelu}};

struct Fp8Device {
  DeviceBuffer a, w, a_scale, w_scale, bias, multiplier;
  explicit Fp8Device(const Fp8Problem& p)
      : a(p.a),
        w(p.w),
        a_scale(p.a_scale),
        w_scale(p.w_scale),
        bias(p.bias),
        multiplier(p.multiplier) {}
};

// A kernel under test: its name (for the failure) and how it runs one GEMM.
using Int8Runner = std::pair<std::string, std::function<void(const cuda::ScaledMMArgs&)>>;

// Every runner, every output mode, with and without bias, each activation of
// `acts`: the output bytes equal the reference's (fp32 reference, rounded
// once on the host to the served dtype, or quantized with the consumer
// multiplier).
inline void check_int8_outputs(const Int8Problem& p, const std::vector<Int8Runner>& runners,
                               const std::vector<Activation>& acts = {
                                   Activation::kNone, Activation::kSwish, Activation::kRelu}) {
  DeviceBuffer a(p.a), w(p.w), a_scale(p.a_scale), w_scale(p.w_scale), bias(p.bias),
      multiplier(p.multiplier);
  DeviceBuffer out(static_cast<size_t>(p.m * p.n) * 4);
  ASSERT_NE(out.get(), nullptr);
  const auto rows = checked_rows(p.m);
  for (bool with_bias : {false, true}) {
    for (Activation act : acts) {
      std::vector<std::vector<float>> reference;
      for (const auto& [begin, end] : rows) {
        std::vector<float> block(static_cast<size_t>((end - begin) * p.n));
        scaled_mm_int8_reference(p.a.data() + begin * p.k, p.a_scale.data() + begin, p.w.data(),
                                 p.w_scale.data(), with_bias ? p.bias.data() : nullptr, act,
                                 end - begin, p.n, p.k, block.data());
        reference.push_back(std::move(block));
      }
      for (const OutputMode& mode : kOutputModes) {
        std::vector<uint8_t> expected;
        for (size_t block = 0; block < rows.size(); ++block) {
          const int64_t count = rows[block].second - rows[block].first;
          for (int64_t r = 0; r < count; ++r) {
            append_expected(reference[block].data() + r * p.n, p.n, mode, p.multiplier, false,
                            expected);
          }
        }
        for (const auto& [name, run] : runners) {
          cuda::ScaledMMArgs args;
          args.format = QDType::kInt8;
          args.a = a.get();
          args.a_scale = a_scale.as<float>();
          args.w = w.get();
          args.w_scale = w_scale.as<float>();
          args.bias = with_bias ? bias.as<float>() : nullptr;
          args.act = act;
          args.m = p.m;
          args.n = p.n;
          args.k = p.k;
          args.served = mode.served;
          args.out = out.get();
          args.out_multiplier = mode.quantize ? multiplier.as<float>() : nullptr;
          // A marker first, so a runner that stores nothing cannot pass on
          // the previous runner's bytes.
          ASSERT_EQ(cudaMemset(out.get(), 0xa5, static_cast<size_t>(p.m * p.n) * 4), cudaSuccess);
          ASSERT_NO_THROW(run(args)) << name;
          std::vector<uint8_t> actual;
          const size_t row_bytes = static_cast<size_t>(p.n) * output_element_bytes(mode);
          for (const auto& [begin, end] : rows) {
            const std::vector<uint8_t> block = download_rows(out.get(), begin, end, row_bytes);
            actual.insert(actual.end(), block.begin(), block.end());
          }
          ASSERT_EQ(actual.size(), expected.size());
          if (std::memcmp(actual.data(), expected.data(), actual.size()) != 0) {
            size_t first = 0;
            while (actual[first] == expected[first]) ++first;
            FAIL() << name << " M=" << p.m << " N=" << p.n << " K=" << p.k << " " << describe(mode)
                   << (with_bias ? " bias " : " no-bias ") << activation_name(act)
                   << ": first differing byte " << first << " (output row " << first / row_bytes
                   << " of the checked rows)";
          }
        }
      }
    }
  }
}

}  // namespace oasr::quant::scaled_mm_test
