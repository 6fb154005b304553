// The one CPU-vs-CUDA consistency harness (DESIGN.md §7, after ggml's
// test-backend-ops). For every case of backend_ops_cases.cc: random inputs
// (fixed seed per case) are made in float32, rounded to the case dtype and
// back, so both devices see the same values; the CPU front runs on the
// float32 copies (the reference), the CUDA front on the dtype tensors moved
// to the GPU; the CUDA result comes back and is judged by the case's family.
//
//   test mode (default): one gtest per case, "BackendOps.<op>/<dtype>/<shape>[/<params>]";
//     every test skips with the reason where no GPU is visible.
//   --perf (or OASR_BACKEND_OPS_PERF=1): no gtest; times the CUDA front of
//     each case (cudaEvent, warm-up then the median of --iters runs) and
//     prints one JSON line per case. No timing is asserted anywhere.
//   --filter SUBSTR: only cases whose name contains SUBSTR (both modes).
//   --list: prints the case names.
//   --cpu-reference-only: runs each case's CPU reference alone (checks the
//     table itself on a machine without a GPU).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend_ops_cases.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv1d.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "ops/layer_norm.h"
#include "ops/log_softmax.h"
#include "ops/rms_norm.h"
#include "ops/rotary_embedding.h"
#include "ops/softmax.h"
#include "support/test_support.h"

namespace oasr::backend_ops {
namespace {

// ---- tolerances ------------------------------------------------------------
// nmse: sum((ref - got)^2) / sum(ref^2) (ggml's NMSE; 0/0 counts as 0).
// max_err: max |ref - got| <= max_err * max(1, max |ref|) (relative to the
// output's scale, so one bound serves unit-size and vocabulary-size outputs).
// float16 rounds with a relative error up to 2^-11 (mean square ~1e-7),
// bfloat16 up to 2^-8 (~5e-6); the bounds leave room for the float32
// reassociation a parallel reduction brings on top.
struct Tolerance {
  double nmse;
  double max_err;
};

// clang-format off
//  family      f32 nmse/max  f16 nmse/max  bf16 nmse/max  why
//  kExact      bitwise       bitwise       bitwise        each element is the CPU body's
//                                                         float32 arithmetic, rounded once
//  kGemm       1e-9  / 1e-4  5e-6 / 4e-3   1e-4 / 3e-2    K-long sums in another order (fp32
//                                                         accumulate); TF32 in f32 fails
//  kConv2d     1e-9  / 1e-4  5e-6 / 4e-3   1e-4 / 3e-2    implicit GEMM over Cin*KH*KW
//  kNorm       1e-10 / 2e-5  5e-6 / 2e-3   1e-4 / 2e-2    mean/variance in another order
//  kSoftmax    1e-10 / 1e-5  5e-6 / 1e-3   1e-4 / 8e-3    row sums in another order
//  kLogSoftmax 1e-10 / 2e-6  5e-6 / 2e-3   1e-4 / 2e-2    CPU: glibc exp summed in double;
//                                                         GPU: expf/logf, float sums
// clang-format on
Tolerance tolerance(Family family, DType dtype) {
  const int column = dtype == DType::kF32 ? 0 : dtype == DType::kF16 ? 1 : 2;
  static constexpr Tolerance kGemm[] = {{1e-9, 1e-4}, {5e-6, 4e-3}, {1e-4, 3e-2}};
  static constexpr Tolerance kNorm[] = {{1e-10, 2e-5}, {5e-6, 2e-3}, {1e-4, 2e-2}};
  static constexpr Tolerance kSoftmax[] = {{1e-10, 1e-5}, {5e-6, 1e-3}, {1e-4, 8e-3}};
  static constexpr Tolerance kLogSoftmax[] = {{1e-10, 2e-6}, {5e-6, 2e-3}, {1e-4, 2e-2}};
  switch (family) {
    case Family::kGemm:
    case Family::kConv2d:
      return kGemm[column];
    case Family::kNorm:
      return kNorm[column];
    case Family::kSoftmax:
      return kSoftmax[column];
    case Family::kLogSoftmax:
      return kLogSoftmax[column];
    case Family::kExact:
      break;
  }
  return {0, 0};
}

// ---- inputs ----------------------------------------------------------------

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

Tensor make_mask(const InputSpec& spec, std::mt19937_64& rng) {
  Tensor mask = Tensor::zeros(spec.shape, DType::kU8);
  const int64_t cols = spec.shape.empty() ? 1 : spec.shape.back();
  const int64_t rows = cols > 0 ? mask.numel() / cols : 0;
  uint8_t* keep = mask.data<uint8_t>();
  std::bernoulli_distribution kept(0.75);
  for (int64_t r = 0; r < rows; ++r) {
    // kPrefix: row 0 full, lengths falling with r, the last of 3 or more rows empty.
    const int64_t length = r == rows - 1 && rows >= 3 ? 0 : cols - (r * cols) / rows;
    const bool empty_row = spec.mask == MaskPattern::kRandomWithEmptyRows && r % 5 == 2;
    for (int64_t c = 0; c < cols; ++c) {
      bool on = false;
      if (spec.mask == MaskPattern::kPrefix) on = c < length;
      if (spec.mask == MaskPattern::kRandomWithEmptyRows) on = !empty_row && kept(rng);
      keep[r * cols + c] = on ? 1 : 0;
    }
  }
  return mask;
}

Tensor make_ids(const InputSpec& spec, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(0, spec.id_limit - 1);
  Tensor ids = Tensor::empty(spec.shape, spec.id_dtype);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (spec.id_dtype == DType::kI32) {
      ids.data<int32_t>()[i] = static_cast<int32_t>(pick(rng));
    } else {
      ids.data<int64_t>()[i] = pick(rng);
    }
  }
  return ids;
}

// The inputs of a case: `reference` for the CPU front (float32, already
// rounded to the case dtype), `device` for the CUDA front (dtype, on the GPU;
// empty when `with_device` is false).
struct CaseInputs {
  std::vector<Tensor> reference;
  std::vector<Tensor> device;
};

CaseInputs make_inputs(const OpCase& c, bool with_device) {
  std::mt19937_64 rng(fnv1a(c.name()));
  CaseInputs out;
  for (const InputSpec& spec : c.inputs) {
    Tensor host;
    switch (spec.kind) {
      case InputKind::kUndefined:
        out.reference.emplace_back();
        if (with_device) out.device.emplace_back();
        continue;
      case InputKind::kMask:
        host = make_mask(spec, rng);
        break;
      case InputKind::kIds:
        host = make_ids(spec, rng);
        break;
      case InputKind::kFloat: {
        Tensor values = Tensor::empty(spec.shape, DType::kF32);
        std::normal_distribution<float> dist(0.0f, spec.scale);
        for (int64_t i = 0; i < values.numel(); ++i) values.data<float>()[i] = dist(rng);
        const Tensor rounded = values.to(c.dtype);
        out.reference.push_back(rounded.to(DType::kF32));
        if (with_device) out.device.push_back(rounded.to(Device::cuda()));
        continue;
      }
    }
    out.reference.push_back(host);
    if (with_device) out.device.push_back(host.to(Device::cuda()));
  }
  return out;
}

// ---- comparison ------------------------------------------------------------

struct Errors {
  double nmse = 0;
  double max_abs = 0;
  double ref_max = 0;
  int64_t worst = -1;
  bool nan_mismatch = false;
};

Errors measure(const Tensor& reference, const Tensor& got) {
  const float* a = reference.data<float>();
  const float* b = got.data<float>();
  double err2 = 0, ref2 = 0;
  Errors e;
  for (int64_t i = 0; i < reference.numel(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) e.nan_mismatch = true;
    if (std::isnan(a[i]) || std::isnan(b[i])) continue;
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    err2 += d * d;
    ref2 += static_cast<double>(a[i]) * a[i];
    e.ref_max = std::max(e.ref_max, std::fabs(static_cast<double>(a[i])));
    if (std::fabs(d) > e.max_abs) {
      e.max_abs = std::fabs(d);
      e.worst = i;
    }
  }
  e.nmse = ref2 > 0 ? err2 / ref2 : (err2 == 0 ? 0.0 : INFINITY);
  return e;
}

void check_output(const OpCase& c, size_t index, const Tensor& reference, const Tensor& got) {
  SCOPED_TRACE("output " + std::to_string(index));
  ASSERT_TRUE(got.defined());
  ASSERT_TRUE(got.device().is_cuda()) << "result is on " << got.device().str();
  ASSERT_EQ(got.dtype(), c.dtype) << "result dtype " << dtype_name(got.dtype());
  ASSERT_EQ(got.shape(), reference.shape())
      << shape_str(got.shape()) << " vs CPU " << shape_str(reference.shape());
  const Tensor host = got.to(Device::cpu());
  if (c.family == Family::kExact) {
    // The CPU float32 result rounded once to the dtype: the same bits.
    EXPECT_TRUE(testing::bit_equal(host, reference.to(c.dtype)));
    return;
  }
  const Tolerance tol = tolerance(c.family, c.dtype);
  const Tensor got_f32 = host.to(DType::kF32);
  const Errors e = measure(reference, got_f32);
  EXPECT_FALSE(e.nan_mismatch) << "NaN in one result only";
  EXPECT_LE(e.nmse, tol.nmse) << "NMSE";
  const double bound = tol.max_err * std::max(1.0, e.ref_max);
  EXPECT_LE(e.max_abs, bound) << "max |error| at flat index " << e.worst << ": CPU "
                              << (e.worst >= 0 ? reference.data<float>()[e.worst] : 0.f)
                              << ", CUDA " << (e.worst >= 0 ? got_f32.data<float>()[e.worst] : 0.f);
}

class BackendOpCase : public ::testing::Test {
 public:
  explicit BackendOpCase(OpCase c) : case_(std::move(c)) {}
  void TestBody() override {
    if (!cuda_available())
      GTEST_SKIP() << "no CUDA device visible: the CPU-vs-CUDA harness needs one";
    const CaseInputs inputs = make_inputs(case_, true);
    const std::vector<Tensor> reference = case_.run(inputs.reference);
    const std::vector<Tensor> got = case_.run(inputs.device);
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) check_output(case_, i, reference[i], got[i]);
  }

 private:
  OpCase case_;
};

// ---- refusals (mixed devices, mixed dtypes) --------------------------------

template <typename Call>
void expect_refused(const char* op, Call&& call) {
  try {
    call();
    ADD_FAILURE() << op << ": the call was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos)
        << "the message does not name " << op << ": " << e.what();
  }
}

Tensor randn(const Shape& shape, DType dtype, Device device, uint32_t seed = 1) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t.to(dtype).to(device);
}

TEST(BackendOpsRefusals, MixedDevices) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const Device cpu = Device::cpu();
  const Tensor x_gpu = randn({2, 3, 8}, DType::kF32, gpu);
  const Tensor v_cpu = randn({8}, DType::kF32, cpu);
  const Tensor x_cpu = randn({2, 3, 8}, DType::kF32, cpu);
  const Tensor w_cpu = randn({4, 8}, DType::kF32, cpu);
  expect_refused("linear", [&] { ops::linear(x_gpu, w_cpu); });
  expect_refused("matmul", [&] { ops::matmul(x_gpu, x_cpu, true); });
  expect_refused("add", [&] { ops::add(x_gpu, v_cpu); });
  expect_refused("mul", [&] { ops::mul(x_gpu, v_cpu); });
  expect_refused("add_scaled", [&] { ops::add_scaled(x_gpu, v_cpu, 0.5f); });
  expect_refused("layer_norm", [&] { ops::layer_norm(x_gpu, v_cpu, v_cpu, 1e-5f); });
  expect_refused("rms_norm", [&] { ops::rms_norm(x_gpu, v_cpu, 1e-6f); });
  expect_refused("rotary_embedding", [&] {
    ops::rotary_embedding(x_gpu.reshape({2, 3, 1, 8}), Tensor::zeros({2, 3}, DType::kI64),
                          ops::rotary_inv_freq(8, 1e4f));
  });
  expect_refused("add_layer_norm",
                 [&] { ops::add_layer_norm(x_gpu, x_cpu, Tensor(), Tensor(), 1e-5f); });
  expect_refused("add_scaled_layer_norm",
                 [&] { ops::add_scaled_layer_norm(x_gpu, x_gpu, 0.5f, v_cpu, Tensor(), 1e-5f); });
  expect_refused("masked_softmax", [&] {
    ops::masked_softmax(x_gpu, Tensor::zeros({2, 3, 8}, DType::kU8), -1);
  });
  expect_refused("embedding", [&] {
    ops::embedding(Tensor::zeros({3}, DType::kI64), randn({5, 8}, DType::kF32, gpu));
  });
  expect_refused("depthwise_conv1d", [&] {
    ops::depthwise_conv1d(x_gpu, randn({3, 1, 3}, DType::kF32, cpu), Tensor(), 1, 1);
  });
  expect_refused("conv2d", [&] {
    ops::conv2d(randn({1, 2, 5, 5}, DType::kF32, gpu), randn({3, 2, 3, 3}, DType::kF32, cpu),
                Tensor());
  });
}

TEST(BackendOpsRefusals, MixedDTypes) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const Tensor x16 = randn({2, 3, 8}, DType::kF16, gpu);
  const Tensor x32 = randn({2, 3, 8}, DType::kF32, gpu);
  const Tensor v32 = randn({8}, DType::kF32, gpu);
  const Tensor vb16 = randn({8}, DType::kBF16, gpu);
  expect_refused("linear", [&] { ops::linear(x16, randn({4, 8}, DType::kF32, gpu)); });
  expect_refused("linear", [&] {
    ops::linear(x16, randn({4, 8}, DType::kF16, gpu), randn({4}, DType::kBF16, gpu));
  });
  expect_refused("matmul", [&] { ops::matmul(x16, x32, true); });
  expect_refused("add", [&] { ops::add(x16, v32); });
  expect_refused("mul", [&] { ops::mul(x32, vb16); });
  expect_refused("add_scaled", [&] { ops::add_scaled(x16, vb16, 0.5f); });
  expect_refused("layer_norm", [&] { ops::layer_norm(x16, v32, Tensor(), 1e-5f); });
  expect_refused("rms_norm", [&] { ops::rms_norm(x16, v32, 1e-6f); });
  expect_refused("add_layer_norm",
                 [&] { ops::add_layer_norm(x16, x32, Tensor(), Tensor(), 1e-5f); });
  expect_refused("add_scaled_layer_norm",
                 [&] { ops::add_scaled_layer_norm(x16, x16, 0.5f, vb16, vb16, 1e-5f); });
  expect_refused("masked_softmax",
                 [&] { ops::masked_softmax(x16, x16, -1); });  // mask must be uint8
  expect_refused("depthwise_conv1d", [&] {
    ops::depthwise_conv1d(x16, randn({3, 1, 3}, DType::kF32, gpu), Tensor(), 1, 1);
  });
  expect_refused("conv2d", [&] {
    ops::conv2d(randn({1, 2, 5, 5}, DType::kBF16, gpu), randn({3, 2, 3, 3}, DType::kF16, gpu),
                Tensor());
  });
}

// ---- Tensor conversions and transfers --------------------------------------

// float32 values that exercise every conversion path: normal, huge
// (overflow in float16), tiny (subnormal in float16/bfloat16), ties, signed
// zeros, infinities and NaN.
Tensor conversion_inputs() {
  std::vector<float> values = {
      0.0f,           -0.0f,           1.0f,     -1.0f,     65504.0f, 65520.0f,
      1e6f,           -1e30f,          6e-8f,    3e-8f,     1e-40f,   -1e-45f,
      1.00048828125f, 1.000732421875f, INFINITY, -INFINITY, NAN,      3.3895313892515355e38f};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1 << 16; ++i) {
    const uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, sizeof(f));
    values.push_back(f);
  }
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

TEST(BackendOpsTensor, ToDTypeOnCudaMatchesCpuBitwise) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor f32 = conversion_inputs();
  for (DType to : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(to));
    const Tensor on_gpu = f32.to(Device::cuda()).to(to);
    ASSERT_TRUE(on_gpu.device().is_cuda());
    EXPECT_TRUE(testing::bit_equal(on_gpu.to(Device::cpu()), f32.to(to)));
    // And back to float32 (exact on both sides).
    const Tensor narrow = f32.to(to);
    EXPECT_TRUE(testing::bit_equal(narrow.to(Device::cuda()).to(DType::kF32).to(Device::cpu()),
                                   narrow.to(DType::kF32)));
  }
  EXPECT_TRUE(
      testing::bit_equal(f32.to(DType::kF16).to(Device::cuda()).to(DType::kBF16).to(Device::cpu()),
                         f32.to(DType::kF16).to(DType::kBF16)));
}

TEST(BackendOpsTensor, DeviceRoundTripOfViewsIsExact) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor host = randn({3, 37, 256}, dtype, Device::cpu(), 9);
    EXPECT_TRUE(testing::bit_equal(host.to(Device::cuda()).to(Device::cpu()), host));
    const Tensor view = host.transpose(0, 1).narrow(2, 3, 100);  // strided on the host
    EXPECT_TRUE(testing::bit_equal(view.to(Device::cuda()).to(Device::cpu()), view.contiguous()));
    // A strided view of a device tensor, brought back.
    const Tensor device_view = host.to(Device::cuda()).transpose(1, 2);
    EXPECT_TRUE(
        testing::bit_equal(device_view.to(Device::cpu()), host.transpose(1, 2).contiguous()));
  }
}

// ---- modes -----------------------------------------------------------------

struct Options {
  bool perf = false;
  bool list = false;
  bool cpu_reference_only = false;
  std::string filter;
  int iterations = 50;
  int warmup = 5;
};

std::vector<OpCase> selected_cases(const Options& options) {
  std::vector<OpCase> out;
  std::set<std::string> seen;
  for (OpCase& c : all_cases()) {
    const std::string name = c.name();
    OASR_CHECK(seen.insert(name).second, kInternal, "backend_ops: duplicate case name ", name);
    if (name.find(options.filter) != std::string::npos) out.push_back(std::move(c));
  }
  return out;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

void check_cuda(cudaError_t status, const char* what) {
  OASR_CHECK(status == cudaSuccess, kInternal, "backend_ops --perf: ", what, ": ",
             cudaGetErrorString(status));
}

int run_perf(const Options& options) {
  if (!cuda_available()) {
    std::fprintf(stderr, "backend_ops --perf: no CUDA device visible\n");
    return 1;
  }
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  int failures = 0;
  for (const OpCase& c : selected_cases(options)) {
    const std::string name = c.name();
    try {
      const CaseInputs inputs = make_inputs(c, true);
      double bytes = 0;
      for (const Tensor& t : inputs.device)
        bytes += t.defined() ? static_cast<double>(t.nbytes()) : 0;
      std::vector<Tensor> outputs;
      for (int i = 0; i < options.warmup; ++i) outputs = c.run(inputs.device);
      for (const Tensor& t : outputs) bytes += static_cast<double>(t.nbytes());
      check_cuda(cudaDeviceSynchronize(), "warm-up");
      std::vector<float> times_ms;
      for (int i = 0; i < options.iterations; ++i) {
        check_cuda(cudaEventRecord(start, cudaStreamLegacy), "cudaEventRecord");
        outputs = c.run(inputs.device);
        check_cuda(cudaEventRecord(stop, cudaStreamLegacy), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        times_ms.push_back(ms);
      }
      check_cuda(cudaDeviceSynchronize(), "timed runs");
      std::nth_element(times_ms.begin(), times_ms.begin() + times_ms.size() / 2, times_ms.end());
      const double median_us = 1e3 * times_ms[times_ms.size() / 2];
      std::string line = "{\"case\":\"" + json_escape(name) + "\",\"op\":\"" + c.op +
                         "\",\"dtype\":\"" + short_dtype_name(c.dtype) + "\",\"shape\":\"" +
                         c.shape + "\",\"params\":\"" + c.params + "\"";
      char numbers[160];
      std::snprintf(numbers, sizeof(numbers), ",\"median_us\":%.3f,\"iterations\":%d", median_us,
                    options.iterations);
      line += numbers;
      if (median_us > 0) {
        std::snprintf(numbers, sizeof(numbers), ",\"gbps\":%.2f", bytes / (median_us * 1e3));
        line += numbers;
        if (c.flops > 0) {
          std::snprintf(numbers, sizeof(numbers), ",\"tflops\":%.3f", c.flops / (median_us * 1e6));
          line += numbers;
        }
      }
      std::printf("%s}\n", line.c_str());
    } catch (const Error& e) {
      ++failures;
      std::printf("{\"case\":\"%s\",\"error\":\"%s\"}\n", json_escape(name).c_str(),
                  json_escape(e.what()).c_str());
    }
    std::fflush(stdout);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return failures == 0 ? 0 : 1;
}

int run_cpu_reference_only(const Options& options) {
  int failures = 0;
  for (const OpCase& c : selected_cases(options)) {
    try {
      const std::vector<Tensor> out = c.run(make_inputs(c, false).reference);
      std::printf("ok   %s ->", c.name().c_str());
      for (const Tensor& t : out) std::printf(" %s", t.str().c_str());
      std::printf("\n");
    } catch (const Error& e) {
      ++failures;
      std::printf("FAIL %s: %s\n", c.name().c_str(), e.what());
    }
  }
  return failures == 0 ? 0 : 1;
}

// Takes the harness's own flags out of argv (gtest sees the rest).
Options parse_options(int& argc, char** argv) {
  Options options;
  const char* env = std::getenv("OASR_BACKEND_OPS_PERF");
  options.perf = env != nullptr && std::string(env) == "1";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--perf") {
      options.perf = true;
    } else if (arg == "--list") {
      options.list = true;
    } else if (arg == "--cpu-reference-only") {
      options.cpu_reference_only = true;
    } else if (arg == "--filter" && has_value) {
      options.filter = argv[++i];
    } else if (arg == "--iters" && has_value) {
      options.iterations = std::max(1, std::atoi(argv[++i]));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return options;
}

}  // namespace
}  // namespace oasr::backend_ops

constexpr int kSkipReturnCode = 77;

int main(int argc, char** argv) {
  using namespace oasr::backend_ops;
  const Options options = parse_options(argc, argv);
  if (options.list) {
    for (const OpCase& c : selected_cases(options)) std::printf("%s\n", c.name().c_str());
    return 0;
  }
  if (options.cpu_reference_only) return run_cpu_reference_only(options);
  if (options.perf) return run_perf(options);
  for (OpCase& c : selected_cases(options)) {
    const std::string name = c.name();
    ::testing::RegisterTest(
        "BackendOps", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
        [c = std::move(c)]() -> ::testing::Test* { return new BackendOpCase(c); });
  }
  ::testing::InitGoogleTest(&argc, argv);
  // One ctest entry runs every case in one process; where no GPU is visible
  // it reports itself skipped (ctest's SKIP_RETURN_CODE) after gtest listed
  // each case as skipped.
  const int status = RUN_ALL_TESTS();
  if (status == 0 && !oasr::cuda_available()) return kSkipReturnCode;
  return status;
}
