// ScaledMMLane: one implementation of the 8-bit kernels (quantize + scaled
// GEMM) for one device, registered by name. A quant method chooses its lane
// once, at bind time, and names it in the quantization report. CPU lanes:
// cpu_reference (plain loops over numerics.h, every format),
// cpu_avx2_int8 (int8 only, bit-identical to the reference, chosen by auto
// where the CPU has AVX2), cpu_avx_vnni_int8 (int8 only, the 256-bit
// vpdpbusd, chosen ahead of AVX2 where the CPU has AVX-VNNI) and
// cpu_avx512_vnni_int8 (int8 only, vpdpbusd, bit-identical, chosen by auto
// ahead of both where the CPU has AVX-512 VNNI), cpu_amx_int8 (int8 only, AMX
// tdpbssd tiles, bit-identical, chosen ahead of all where the CPU and the
// kernel allow AMX). CUDA lanes (CUDA builds): native (the CUTLASS
// sm90a kernels, chosen by auto on Hopper), mma_sync (the hand-written
// mma.sync kernels, int8 sm80+ and e4m3 sm89+, chosen by auto elsewhere)
// and cublaslt (cuBLASLt plus a separate epilogue kernel, the A/B baseline,
// run only when named).
//
// OASR_SCALED_MM_BACKEND (core/env) picks the lane: auto (default) takes the
// best available lane for the format; naming a lane requires it -- a lane
// that is missing, unavailable on this machine or does not serve the format
// is refused, never replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "quant/format.h"

namespace oasr::quant {

using ScaledMMInt8Fn = void (*)(const int8_t* a, const float* a_scale, const int8_t* w,
                                const float* w_scale, const float* bias, Activation act, int64_t m,
                                int64_t n, int64_t k, float* out);
using ScaledMME4m3Fn = void (*)(const uint8_t* a, const float* a_scale, const uint8_t* w,
                                const float* w_scale, const float* bias, Activation act, int64_t m,
                                int64_t n, int64_t k, float* out);
using QuantizePerTokenInt8Fn = void (*)(const float* x, const float* smooth_inv, int64_t m,
                                        int64_t k, int8_t* q, float* scale);
using QuantizePerTokenE4m3Fn = void (*)(const float* x, const float* smooth_inv, int64_t m,
                                        int64_t k, uint8_t* q, float* scale);
using QuantizeStaticInt8Fn = void (*)(const float* x, const float* multiplier, int64_t m, int64_t k,
                                      int8_t* q);
// A lane may repack an int8 weight once, at bind time, into its own layout
// (an opaque handle) and multiply from that.
using PrepareInt8WeightFn = std::shared_ptr<const void> (*)(const int8_t* w, int64_t n, int64_t k);
using ScaledMMInt8PreparedFn = void (*)(const int8_t* a, const float* a_scale, const void* prepared,
                                        const float* w_scale, const float* bias, Activation act,
                                        int64_t m, float* out);
using QuantizeStaticE4m3Fn = void (*)(const float* x, const float* multiplier, int64_t m, int64_t k,
                                      uint8_t* q);

namespace cuda {
struct ScaledMMArgs;  // quant/kernels/cuda/scaled_mm_cuda.h
}
// CUDA lanes: one scaled GEMM on device pointers whose epilogue writes the
// served dtype (or 8-bit, the quantizing epilogue); the quantize steps are
// the shared CUDA quantize kernels (quant/kernels/cuda/quantize_cuda.h).
using CudaScaledMMFn = void (*)(const cuda::ScaledMMArgs& args);
// Whether CUDA device `device_index` runs the lane for `format`; on false
// `why` says what is missing.
using CudaSupportsFn = bool (*)(QDType format, int device_index, std::string* why);
// The kernel configuration the lane runs for one GEMM shape (for the report).
using CudaKernelNameFn = std::string (*)(QDType format, int64_t m, int64_t n, int64_t k);

struct ScaledMMLane {
  std::string name;  // "cpu_reference", "cpu_avx2_int8"
  DeviceType device = DeviceType::kCPU;
  // Higher wins under auto; a lane with auto_eligible = false runs only when named.
  int priority = 0;
  bool auto_eligible = true;
  // Whether this machine can run it (e.g. the CPU has AVX2); null = always.
  bool (*available)() = nullptr;
  std::string requirement;  // what `available` checks, for refusals ("a CPU with AVX2")

  // int8 (any may be null: the lane does not serve that piece)
  ScaledMMInt8Fn scaled_mm_int8 = nullptr;
  QuantizePerTokenInt8Fn quantize_per_token_int8 = nullptr;
  QuantizeStaticInt8Fn quantize_static_int8 = nullptr;
  // optional: both or neither
  PrepareInt8WeightFn prepare_int8_weight = nullptr;
  ScaledMMInt8PreparedFn scaled_mm_int8_prepared = nullptr;
  // float8_e4m3fn
  ScaledMME4m3Fn scaled_mm_e4m3 = nullptr;
  QuantizePerTokenE4m3Fn quantize_per_token_e4m3 = nullptr;
  QuantizeStaticE4m3Fn quantize_static_e4m3 = nullptr;
  // CUDA lanes (both formats through one entry point)
  CudaScaledMMFn cuda_scaled_mm = nullptr;
  CudaSupportsFn cuda_supports = nullptr;
  CudaKernelNameFn cuda_kernel_name = nullptr;
  // The lane runs int8 GEMMs of at most 16 rows as the GEMV
  // (quant/kernels/cuda/scaled_mm_cuda.h), so QuantMethod::forward may fold
  // the input's quantize into it (cuda::quantize_gemv_int8).
  bool cuda_small_m_gemv = false;

  bool is_cuda() const { return cuda_scaled_mm != nullptr; }
  bool serves(QDType format) const;  // has a scaled GEMM and both quantizers for it
  bool is_available() const { return available == nullptr || available(); }
  // serves(format) on this very device (a CUDA lane asks the GPU); on false
  // `why` names what is missing.
  bool serves_on(QDType format, Device device, std::string* why) const;
};

// Every registered lane (the built-in CPU lanes first), in registration order.
const std::vector<ScaledMMLane>& registered_lanes();
// Adds a lane; a second lane with the same name is refused.
void register_lane(ScaledMMLane lane);
const ScaledMMLane* find_lane(std::string_view name);

// The lane that serves `format` on `device`. backend: "auto", or a lane name;
// the GPU backend names of OASR_SCALED_MM_BACKEND (native, mma_sync, cutlass,
// cublaslt, torch) are refused on a CPU device by name, and cutlass / torch
// (no such lane) on any device.
const ScaledMMLane& choose_lane(QDType format, Device device, std::string_view backend);

// OASR_SCALED_MM_BACKEND, validated (default "auto").
std::string scaled_mm_backend_from_env();

}  // namespace oasr::quant
