// The CUDA timing of `oasr bench scaled-mm` (cli/bench_scaled_mm.cc): each
// launch alone between two CUDA events, the median over --iters launches
// after --warmup. Compiled in CUDA builds only.
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

#include "cli/bench_common.h"
#include "cli/bench_scaled_mm_problem.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/float_types.h"
#include "quant/kernels/cuda/native/scaled_mm_native.h"
#include "quant/kernels/cuda/quantize_cuda.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/number_format.h"

namespace oasr::cli::scaled_mm_bench {
namespace {

using quant::QDType;

// Device buffers of one problem, freed on scope exit.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : owned_) cudaFree(p);
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* device = allocate(host.size() * sizeof(T));
    OASR_CUDA_CHECK(
        cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return static_cast<T*>(device);
  }
  void* allocate(size_t bytes) {
    void* device = nullptr;
    OASR_CUDA_CHECK(cudaMalloc(&device, bytes));
    owned_.push_back(device);
    return device;
  }

 private:
  std::vector<void*> owned_;
};

// Random operands: values uniform in [-8, 8] quantized at the format's own
// rule (its traits row), one row (the kernels' time does not depend on the
// values).
std::vector<uint8_t> random_operand(QDType format, size_t count, std::mt19937& rng) {
  const quant::NumberFormat& row = quant::number_format(format);
  std::vector<float> values(count);
  std::uniform_real_distribution<float> real(-8.0f, 8.0f);
  for (float& v : values) v = real(rng);
  std::vector<uint8_t> out(count * dtype_size(row.storage));
  float scale = 0.0f;
  row.quantize_row(values.data(), nullptr, static_cast<int64_t>(count), out.data(), &scale);
  return out;
}

// The median microseconds of `launch` over options.iters timed launches.
template <typename Launch>
double time_launch(const BenchScaledMMOptions& options, Launch&& launch) {
  for (int i = 0; i < options.warmup; ++i) launch();
  cudaEvent_t start = nullptr, stop = nullptr;
  OASR_CUDA_CHECK(cudaEventCreate(&start));
  OASR_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times_us;
  for (int i = 0; i < options.iters; ++i) {
    OASR_CUDA_CHECK(cudaEventRecord(start, cudaStreamLegacy));
    launch();
    OASR_CUDA_CHECK(cudaEventRecord(stop, cudaStreamLegacy));
    OASR_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    OASR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times_us.push_back(static_cast<double>(ms) * 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times_us);
}

// The float16 input of a forward at args' shape, quantized by its own
// kernel and then multiplied by the tiled kernel (mma.sync, or the native
// table's on Hopper), against quantize_gemv_int8 (one launch).
template <typename Emit>
void time_folded_quantize(const BenchScaledMMOptions& options, quant::cuda::ScaledMMArgs args,
                          DeviceBuffers& buffers, std::mt19937& rng, Emit&& emit) {
  std::uniform_real_distribution<float> real(-4.0f, 4.0f);
  std::vector<uint16_t> x(static_cast<size_t>(args.m * args.k));
  for (uint16_t& v : x) v = f32_to_f16_bits(real(rng));
  const void* x_device = buffers.upload(x);
  auto* q = static_cast<int8_t*>(buffers.allocate(static_cast<size_t>(args.m * args.k)));
  auto* scale = static_cast<float*>(buffers.allocate(static_cast<size_t>(args.m) * 4));
  quant::cuda::ScaledMMArgs tiled = args;
  tiled.a = q;
  tiled.a_scale = scale;
  std::string why;
  // The tiled kernel the lane runs at this shape: the native table's where
  // the native lane takes and prefers it, else mma.sync.
  const bool native = quant::cuda::native_supported(args.format, args.device_index, &why) &&
                      quant::cuda::native_takes(tiled) && quant::cuda::native_preferred(tiled);
  const quant::cuda::NativeConfig table =
      native ? quant::cuda::choose_native_config(args.format, args.m, args.n, args.k, args.served,
                                                 false, args.act)
             : quant::cuda::NativeConfig{};
  const quant::cuda::MmaSyncConfig chosen =
      quant::cuda::choose_mma_sync_config(args.format, args.m, args.n, args.k);
  const double two_launches_us = time_launch(options, [&] {
    quant::cuda::quantize_per_token(args.format, x_device, DType::kF16, nullptr, args.m, args.k, q,
                                    scale, args.device_index);
    if (native) {
      quant::cuda::scaled_mm_native(tiled, table);
    } else {
      quant::cuda::scaled_mm_mma_sync(tiled, chosen);
    }
  });
  emit("quantize+" + std::string(native ? "native" : "mma_sync"),
       native ? table.name(args.format) : chosen.name(), two_launches_us);
  quant::cuda::GemvInput input;
  input.x = x_device;
  input.x_dtype = DType::kF16;
  emit("quantize_gemv", quant::cuda::gemv_kernel_name(args.m),
       time_launch(options, [&] { quant::cuda::quantize_gemv_int8(input, args); }));
}

}  // namespace

void run_oasr(const BenchScaledMMOptions& options, const std::vector<Shape>& shapes,
              const std::vector<QDType>& formats, int device_index,
              std::map<ResultKey, double>& results) {
  OASR_CUDA_CHECK(cudaSetDevice(device_index));
  std::mt19937 rng(0);
  for (const Shape& shape : shapes) {
    for (QDType format : formats) {
      const std::string format_name = quant::number_format(format).method;
      std::string why;
      if (!quant::cuda::mma_sync_supported(format, device_index, &why)) {
        nlohmann::ordered_json line;
        line["bench"] = "scaled_mm";
        line["impl"] = "oasr";
        line["format"] = format_name;
        line["skipped"] = why;
        std::cout << line.dump() << std::endl;
        continue;
      }
      DeviceBuffers buffers;
      std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
      std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
      std::vector<float> a_scale(static_cast<size_t>(shape.m)), w_scale(shape.n), bias(shape.n),
          multiplier(shape.n);
      for (float& v : a_scale) v = scale(rng);
      for (size_t i = 0; i < w_scale.size(); ++i) {
        w_scale[i] = scale(rng);
        bias[i] = unit(rng);
        multiplier[i] = 20.0f;
      }
      quant::cuda::ScaledMMArgs args;
      args.format = format;
      args.a = buffers.upload(random_operand(format, static_cast<size_t>(shape.m * shape.k), rng));
      args.w = buffers.upload(random_operand(format, static_cast<size_t>(shape.n * shape.k), rng));
      args.a_scale = buffers.upload(a_scale);
      args.w_scale = buffers.upload(w_scale);
      args.bias = buffers.upload(bias);
      const float* multiplier_device = buffers.upload(multiplier);
      args.out = buffers.allocate(static_cast<size_t>(shape.m * shape.n) * 2);
      args.m = shape.m;
      args.n = shape.n;
      args.k = shape.k;
      args.served = DType::kF16;
      args.act = options.act == "swish"  ? Activation::kSwish
                 : options.act == "relu" ? Activation::kRelu
                                         : Activation::kNone;
      args.device_index = device_index;
      const double ops = 2.0 * static_cast<double>(shape.m) * shape.n * shape.k;

      for (const char* out : {"f16", "quantized"}) {
        args.out_multiplier = std::string(out) == "f16" ? nullptr : multiplier_device;
        auto emit = [&](const std::string& lane, const std::string& config, double median_us) {
          nlohmann::ordered_json line;
          line["bench"] = "scaled_mm";
          line["impl"] = "oasr";
          line["lane"] = lane;
          if (!config.empty()) line["config"] = config;
          line["format"] = format_name;
          line["out"] = out;
          line["act"] = options.act;
          line["m"] = shape.m;
          line["n"] = shape.n;
          line["k"] = shape.k;
          line["median_us"] = round3(median_us);
          line["tops"] = round3(ops / (median_us * 1e-6) / 1e12);
          std::cout << line.dump() << std::endl;
        };
        const quant::cuda::MmaSyncConfig chosen =
            quant::cuda::choose_mma_sync_config(format, shape.m, shape.n, shape.k);
        const double chosen_us =
            time_launch(options, [&] { quant::cuda::scaled_mm_mma_sync(args, chosen); });
        emit("mma_sync", chosen.name(), chosen_us);
        results[{format_name, out, shape.m, shape.n, shape.k}] = chosen_us;
        // Hopper: the native lane (what auto serves there) is the one compared.
        if (quant::cuda::native_supported(format, device_index, &why) &&
            quant::cuda::native_takes(args)) {
          const quant::cuda::NativeConfig table =
              quant::cuda::choose_native_config(format, shape.m, shape.n, shape.k, args.served,
                                                args.out_multiplier != nullptr, args.act);
          const double native_us =
              time_launch(options, [&] { quant::cuda::scaled_mm_native(args, table); });
          emit("native", table.name(format), native_us);
          results[{format_name, out, shape.m, shape.n, shape.k}] = native_us;
          if (options.sweep) {
            for (const auto& config : quant::cuda::native_configs()) {
              emit("native_sweep", config.name(format),
                   time_launch(options, [&] { quant::cuda::scaled_mm_native(args, config); }));
            }
          }
        }
        // Up to 16 rows, int8: the GEMV that auto serves there (both lanes
        // route to it), and, for float16 output, what a layer's forward runs:
        // the input quantize and the GEMM as two launches against the GEMV
        // that quantizes on chip.
        if (quant::cuda::gemv_takes(format, shape.m, shape.n, shape.k)) {
          const double gemv_us = time_launch(options, [&] { quant::cuda::scaled_gemv_int8(args); });
          emit("gemv", quant::cuda::gemv_kernel_name(shape.m), gemv_us);
          results[{format_name, out, shape.m, shape.n, shape.k}] = gemv_us;
          if (args.out_multiplier == nullptr)
            time_folded_quantize(options, args, buffers, rng, emit);
        }
        if (options.sweep) {
          for (const auto& config : quant::cuda::mma_sync_configs(format)) {
            emit("mma_sync_sweep", config.name(),
                 time_launch(options, [&] { quant::cuda::scaled_mm_mma_sync(args, config); }));
          }
        }
        if (quant::cuda::cublaslt_supported(format, device_index, &why)) {
          try {
            emit("cublaslt", "",
                 time_launch(options, [&] { quant::cuda::scaled_mm_cublaslt(args); }));
          } catch (const Error& e) {
            nlohmann::ordered_json line;
            line["bench"] = "scaled_mm";
            line["impl"] = "oasr";
            line["lane"] = "cublaslt";
            line["format"] = format_name;
            line["m"] = shape.m;
            line["n"] = shape.n;
            line["k"] = shape.k;
            line["skipped"] = e.what();
            std::cout << line.dump() << std::endl;
          }
        }
      }
    }
  }
}

}  // namespace oasr::cli::scaled_mm_bench
