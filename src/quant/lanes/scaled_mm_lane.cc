#include "quant/lanes/scaled_mm_lane.h"

#include <algorithm>

#include "core/device_dispatch.h"
#include "core/env.h"
#include "core/error.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/kernels/cuda/cuda_lanes.h"
#include "quant/number_format.h"

// The x86 int8 lanes register here on x86-64, where they compile.
#if defined(__x86_64__) && __has_include("quant/kernels/cpu/scaled_mm_int8_avx2.h")
#include "quant/kernels/cpu/scaled_mm_int8_amx.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx2.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx_vnni.h"
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"
#define OASR_QUANT_HAVE_AVX2_LANE 1
#endif

namespace oasr::quant {
namespace {

// GPU lane names OASR_SCALED_MM_BACKEND accepts; the ones without a lane in
// this build are refused with what each would be.
constexpr std::string_view kGpuBackendNames[] = {"native", "mma_sync", "cutlass", "cublaslt",
                                                 "torch"};

std::string missing_gpu_lane_reason(std::string_view name) {
  if (name == "cutlass") {
    return "cutlass: this build has no CUTLASS kernels (its mma.sync lane is hand-written); use "
           "auto or mma_sync";
  }
  if (name == "torch") {
    return "torch: oasr is C++ and has no PyTorch lane; the PyTorch baselines run in `oasr bench "
           "scaled-mm`; use auto, mma_sync or cublaslt";
  }
  return std::string(name) + " needs a CUDA build of oasr (-DOASR_WITH_CUDA=ON)";
}

std::vector<ScaledMMLane> builtin_lanes() {
  std::vector<ScaledMMLane> lanes;
  ScaledMMLane reference;
  reference.name = "cpu_reference";
  reference.device = DeviceType::kCPU;
  reference.priority = 0;
  reference.scaled_mm_int8 = scaled_mm_int8_reference;
  reference.quantize_per_token_int8 = quantize_per_token_int8_reference;
  reference.quantize_static_int8 = quantize_static_int8_reference;
  reference.scaled_mm_e4m3 = scaled_mm_e4m3_reference;
  reference.quantize_per_token_e4m3 = quantize_per_token_e4m3_reference;
  reference.quantize_static_e4m3 = quantize_static_e4m3_reference;
  lanes.push_back(reference);
#if defined(OASR_QUANT_HAVE_AVX2_LANE)
  ScaledMMLane avx2;
  avx2.name = "cpu_avx2_int8";
  avx2.device = DeviceType::kCPU;
  avx2.priority = 10;
  avx2.available = cpu_has_avx2;
  avx2.requirement = "a CPU with AVX2";
  avx2.scaled_mm_int8 = scaled_mm_int8_avx2;
  avx2.quantize_per_token_int8 = quantize_per_token_int8_avx2;
  avx2.prepare_int8_weight = [](const int8_t* w, int64_t n, int64_t k) {
    return std::shared_ptr<const void>(
        std::make_shared<PackedInt8Weight>(pack_int8_weight(w, n, k)));
  };
  avx2.scaled_mm_int8_prepared = [](const int8_t* a, const float* a_scale, const void* prepared,
                                    const float* w_scale, const float* bias, Activation act,
                                    int64_t m, float* out) {
    scaled_mm_int8_avx2(a, a_scale, *static_cast<const PackedInt8Weight*>(prepared), w_scale, bias,
                        act, m, out);
  };
  // Static quantization: eight lanes at a time over the pool (the scalar
  // reference on one thread was a fifth of a static-scale U2++ encoder's time).
  avx2.quantize_static_int8 = quantize_static_int8_avx2;
  lanes.push_back(avx2);
  // AVX-512 VNNI: vpdpbusd GEMM; the AVX2 quantizers (same bits, and the
  // GEMM dominates).
  ScaledMMLane vnni;
  vnni.name = "cpu_avx512_vnni_int8";
  vnni.device = DeviceType::kCPU;
  vnni.priority = 20;
  vnni.available = cpu_has_avx512_vnni;
  vnni.requirement = "a CPU with AVX-512 VNNI";
  vnni.scaled_mm_int8 = scaled_mm_int8_vnni;
  vnni.quantize_per_token_int8 = quantize_per_token_int8_avx2;
  vnni.quantize_static_int8 = quantize_static_int8_avx2;
  vnni.prepare_int8_weight = [](const int8_t* w, int64_t n, int64_t k) {
    return std::shared_ptr<const void>(
        std::make_shared<PackedInt8WeightVnni>(pack_int8_weight_vnni(w, n, k)));
  };
  vnni.scaled_mm_int8_prepared = [](const int8_t* a, const float* a_scale, const void* prepared,
                                    const float* w_scale, const float* bias, Activation act,
                                    int64_t m, float* out) {
    scaled_mm_int8_vnni(a, a_scale, *static_cast<const PackedInt8WeightVnni*>(prepared), w_scale,
                        bias, act, m, out);
  };
  lanes.push_back(vnni);
  // AVX-VNNI (256 bits): the same packing, half the width; where the CPU has
  // it and not AVX-512 (or the dispatch level is capped to it).
  ScaledMMLane avx_vnni = vnni;
  avx_vnni.name = "cpu_avx_vnni_int8";
  avx_vnni.priority = 15;
  avx_vnni.available = cpu_has_avx_vnni;
  avx_vnni.requirement = "a CPU with AVX-VNNI";
  avx_vnni.scaled_mm_int8 = scaled_mm_int8_avx_vnni;
  avx_vnni.scaled_mm_int8_prepared = [](const int8_t* a, const float* a_scale, const void* prepared,
                                        const float* w_scale, const float* bias, Activation act,
                                        int64_t m, float* out) {
    scaled_mm_int8_avx_vnni(a, a_scale, *static_cast<const PackedInt8WeightVnni*>(prepared),
                            w_scale, bias, act, m, out);
  };
  lanes.push_back(avx_vnni);
  // AMX-INT8: tdpbssd tiles over the VNNI packing padded to whole tiles;
  // products of few rows run the AVX-512 VNNI kernel inside it.
  ScaledMMLane amx = vnni;
  amx.name = "cpu_amx_int8";
  amx.priority = 25;
  amx.available = cpu_has_amx_int8;
  amx.requirement = "a CPU with AMX-INT8 and the kernel's permission for tile data";
  amx.scaled_mm_int8 = scaled_mm_int8_amx;
  amx.prepare_int8_weight = [](const int8_t* w, int64_t n, int64_t k) {
    return std::shared_ptr<const void>(
        std::make_shared<PackedInt8WeightVnni>(pack_int8_weight_amx(w, n, k)));
  };
  amx.scaled_mm_int8_prepared = [](const int8_t* a, const float* a_scale, const void* prepared,
                                   const float* w_scale, const float* bias, Activation act,
                                   int64_t m, float* out) {
    scaled_mm_int8_amx(a, a_scale, *static_cast<const PackedInt8WeightVnni*>(prepared), w_scale,
                       bias, act, m, out);
  };
  lanes.push_back(amx);
#endif
  // The GPU lanes, in a CUDA build (quant/kernels/cuda/cuda_lanes.cc).
  if constexpr (kBuiltWithCuda) {
    for (ScaledMMLane& lane : cuda::builtin_lanes()) lanes.push_back(std::move(lane));
  }
  return lanes;
}

// Layers keep `const ScaledMMLane*` from find_lane(), so a registration
// must never move the entries: the storage is reserved once and a
// registration past it is refused rather than reallocating.
constexpr size_t kLaneCapacity = 64;

std::vector<ScaledMMLane>& lane_registry() {
  static std::vector<ScaledMMLane> lanes = [] {
    std::vector<ScaledMMLane> builtins = builtin_lanes();
    builtins.reserve(kLaneCapacity);
    return builtins;
  }();
  return lanes;
}

std::string lane_names(DeviceType device) {
  std::string names;
  for (const ScaledMMLane& lane : lane_registry()) {
    if (lane.device != device) continue;
    names += names.empty() ? "" : ", ";
    names += lane.name;
  }
  return names;
}

}  // namespace

bool ScaledMMLane::serves(QDType format) const {
  const NumberFormat& row = number_format(format);
  if (is_cuda()) {
    return std::find(row.cuda_lanes.begin(), row.cuda_lanes.end(), name) != row.cuda_lanes.end();
  }
  return row.cpu_kernels && row.cpu_kernels(*this).complete();
}

bool ScaledMMLane::serves_on(QDType format, Device device, std::string* why) const {
  if (!serves(format)) {
    if (why != nullptr) *why = "it does not serve " + std::string(to_string(format));
    return false;
  }
  if (!is_available()) {
    if (why != nullptr) *why = "it needs " + requirement + ", which this machine lacks";
    return false;
  }
  if (is_cuda() && cuda_supports != nullptr) {
    std::string reason;
    if (!cuda_supports(format, device.index, &reason)) {
      if (why != nullptr) *why = reason;
      return false;
    }
  }
  return true;
}

const std::vector<ScaledMMLane>& registered_lanes() {
  return lane_registry();
}

void register_lane(ScaledMMLane lane) {
  OASR_CHECK(find_lane(lane.name) == nullptr, kInvalidArgument, "scaled-mm lane '", lane.name,
             "' is registered twice");
  OASR_CHECK(lane_registry().size() < kLaneCapacity, kInvalidArgument, "scaled-mm lane '",
             lane.name, "': the registry holds at most ", kLaneCapacity, " lanes");
  lane_registry().push_back(std::move(lane));
}

const ScaledMMLane* find_lane(std::string_view name) {
  for (const ScaledMMLane& lane : lane_registry()) {
    if (lane.name == name) return &lane;
  }
  return nullptr;
}

const ScaledMMLane& choose_lane(QDType format, Device device, std::string_view backend) {
  const std::string device_name = device.is_cpu() ? "cpu" : "cuda";
  if (backend.empty() || backend == "auto") {
    const ScaledMMLane* best = nullptr;
    for (const ScaledMMLane& lane : lane_registry()) {
      if (lane.device != device.type || !lane.auto_eligible ||
          !lane.serves_on(format, device, nullptr)) {
        continue;
      }
      if (best == nullptr || lane.priority > best->priority) best = &lane;
    }
    std::string why;
    for (const ScaledMMLane& lane : lane_registry()) {
      if (lane.device == device.type && lane.auto_eligible && why.empty()) {
        lane.serves_on(format, device, &why);
      }
    }
    OASR_CHECK(best != nullptr, kUnsupported, "no 8-bit GEMM lane serves ", to_string(format),
               " on ", device_name, why.empty() ? "" : " (" + why + ")", " in this build (lanes: ",
               lane_names(device.type).empty() ? "none" : lane_names(device.type),
               "); serve the model in full precision (no --quantization)");
    return *best;
  }
  const ScaledMMLane* lane = find_lane(backend);
  if (lane == nullptr) {
    const bool gpu_name = std::find(std::begin(kGpuBackendNames), std::end(kGpuBackendNames),
                                    backend) != std::end(kGpuBackendNames);
    OASR_CHECK(!gpu_name || !device.is_cpu(), kUnsupported, "OASR_SCALED_MM_BACKEND=", backend,
               " names a CUDA lane, but the model runs on cpu; use auto or one of: ",
               lane_names(DeviceType::kCPU));
    OASR_CHECK(!gpu_name, kUnsupported,
               "OASR_SCALED_MM_BACKEND=", missing_gpu_lane_reason(backend));
    OASR_THROW(kUnsupported, "OASR_SCALED_MM_BACKEND=", backend,
               " names no lane of this build; lanes on ", device_name, ": ",
               lane_names(device.type), " (or auto)");
  }
  OASR_CHECK(lane->device == device.type, kUnsupported, "OASR_SCALED_MM_BACKEND=", backend,
             lane->device == DeviceType::kCUDA ? " names a CUDA lane" : " names a CPU lane",
             ", but the model runs on ", device_name,
             "; use auto or one of: ", lane_names(device.type));
  OASR_CHECK(lane->serves(format), kUnsupported, "OASR_SCALED_MM_BACKEND=", backend,
             " does not serve ", to_string(format), "; use auto or cpu_reference");
  std::string why;
  OASR_CHECK(lane->serves_on(format, device, &why), kUnsupported,
             "OASR_SCALED_MM_BACKEND=", backend, " cannot serve ", to_string(format), " on ",
             device.str(), ": ", why, "; use auto", device.is_cpu() ? " or cpu_reference" : "");
  return *lane;
}

std::string scaled_mm_backend_from_env() {
  std::vector<std::string> choices = {"auto"};
  for (std::string_view name : kGpuBackendNames) choices.emplace_back(name);
  for (const ScaledMMLane& lane : lane_registry()) {
    // A GPU lane this build has is already listed under its name above.
    if (std::find(choices.begin(), choices.end(), lane.name) == choices.end()) {
      choices.push_back(lane.name);
    }
  }
  return env::get_choice("OASR_SCALED_MM_BACKEND", choices, "auto");
}

}  // namespace oasr::quant
