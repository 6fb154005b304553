#include "quant/kernels/cuda/cuda_lanes.h"

#include "quant/kernels/cuda/native/scaled_mm_native.h"
#include "quant/kernels/cuda/scaled_mm_cuda.h"

namespace oasr::quant::cuda {

std::vector<ScaledMMLane> builtin_lanes() {
  std::vector<ScaledMMLane> lanes;
  // Hopper: the CUTLASS sm90a kernels, ahead of mma_sync under auto (which
  // stays the lane of every other GPU and the A/B arm on Hopper).
  ScaledMMLane native;
  native.name = "native";
  native.device = DeviceType::kCUDA;
  native.priority = 20;
  native.requirement = "an sm_90 GPU and a build with the sm_90a kernels";
  native.cuda_scaled_mm = [](const ScaledMMArgs& args) { scaled_mm_native(args); };
  native.cuda_supports = native_supported;
  native.cuda_kernel_name = native_kernel_name;
  native.cuda_small_m_gemv = true;
  lanes.push_back(native);
  ScaledMMLane mma_sync;
  mma_sync.name = "mma_sync";
  mma_sync.device = DeviceType::kCUDA;
  mma_sync.priority = 10;
  mma_sync.requirement = "an sm80+ GPU (int8) or sm89+ GPU (fp8)";
  mma_sync.cuda_scaled_mm = [](const ScaledMMArgs& args) { scaled_mm_mma_sync(args); };
  mma_sync.cuda_supports = mma_sync_supported;
  mma_sync.cuda_kernel_name = [](QDType format, int64_t m, int64_t n, int64_t k) {
    if (gemv_takes(format, m, n, k)) return gemv_kernel_name(m);
    return choose_mma_sync_config(format, m, n, k).name();
  };
  mma_sync.cuda_small_m_gemv = true;
  lanes.push_back(mma_sync);
  ScaledMMLane cublaslt;
  cublaslt.name = "cublaslt";
  cublaslt.device = DeviceType::kCUDA;
  cublaslt.priority = 0;
  cublaslt.auto_eligible = false;  // the A/B baseline: never chosen by auto
  cublaslt.requirement = "cuBLASLt 8-bit GEMMs on this GPU";
  cublaslt.cuda_scaled_mm = scaled_mm_cublaslt;
  cublaslt.cuda_supports = cublaslt_supported;
  cublaslt.cuda_kernel_name = cublaslt_kernel_name;
  lanes.push_back(cublaslt);
  return lanes;
}

}  // namespace oasr::quant::cuda
