// The cublaslt A/B lane of the scaled GEMM (scaled_mm_cuda.h): cuBLASLt
// computes the raw accumulator (int8 -> int32, exact; e4m3 -> fp32 in
// cuBLASLt's own order) into a device buffer, then a separate kernel applies
// the same epilogue as the mma.sync lane (scaled_mm_epilogue.cuh), so int8 is
// bit-identical to it.
//
// Row-major trick: cuBLAS is column-major, and a row-major [R, C] buffer is
// the column-major [C, R] matrix. The row-major acc[M, N] = A W^T is the
// column-major acc^T [N, M] = W_cm^T A_cm with W_cm = W's buffer as
// column-major [K, N] (transposed: op(A) = T) and A_cm = A's buffer as
// column-major [K, M] (op(B) = N): the "TN" layout cuBLASLt's int8 and fp8
// kernels require.
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"
#include "quant/kernels/cuda/scaled_mm_cuda.h"
#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"
#include "quant/kernels/cuda/scaled_mm_store.cuh"

namespace oasr::quant::cuda {
namespace {

constexpr const char* kOp = "scaled_mm_cublaslt";
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

void check_lt(cublasStatus_t status, const char* call) {
  OASR_CHECK(status == CUBLAS_STATUS_SUCCESS, kInternal, kOp, ": ", call, " failed with ",
             cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status), ")");
}

// Per device: the handle, cuBLASLt's workspace and the accumulator buffer
// (grow-only; a smaller GEMM reuses it). Never destroyed: the runtime may be
// gone when static destructors run. Work is ordered on one stream, so the
// buffer is free again once the epilogue that read it has been queued;
// growing frees the old buffer with cudaFree, which waits for queued work.
struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  void* accumulator = nullptr;
  size_t accumulator_bytes = 0;
};

std::mutex& device_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The caller holds device_mutex() and a CudaDeviceGuard for device_index.
LtDevice& lt_device(int device_index) {
  static auto* devices = new std::map<int, LtDevice>();
  const auto found = devices->find(device_index);
  if (found != devices->end()) return found->second;
  LtDevice device;
  check_lt(cublasLtCreate(&device.handle), "cublasLtCreate");
  const cudaError_t status = cudaMalloc(&device.workspace, kLtWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasLtDestroy(device.handle);
    OASR_THROW(kOutOfMemory, kOp, ": cannot allocate the cuBLASLt workspace on cuda:", device_index,
               ": ", cudaGetErrorName(status));
  }
  return devices->emplace(device_index, device).first->second;
}

void* accumulator_buffer(LtDevice& device, size_t bytes, int device_index) {
  if (bytes <= device.accumulator_bytes) return device.accumulator;
  // The outgrown buffer is never freed: a recorded device graph
  // (core/device_graph.h) may still replay kernels that use it. Growth at
  // least doubles, so what is kept is at most the current size.
  bytes = std::max(bytes, 2 * device.accumulator_bytes);
  device.accumulator = nullptr;
  device.accumulator_bytes = 0;
  const cudaError_t status = cudaMalloc(&device.accumulator, bytes);
  OASR_CHECK(status == cudaSuccess, kOutOfMemory, kOp, ": cannot allocate the ", bytes,
             "-byte accumulator on cuda:", device_index, ": ", cudaGetErrorName(status));
  device.accumulator_bytes = bytes;
  return device.accumulator;
}

struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_w = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr;
  cublasLtMatrixLayout_t layout_acc = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::array<int64_t, 5>;  // device, format, m, n, k

std::unique_ptr<LtPlan> make_plan(const ScaledMMArgs& args, cublasLtHandle_t handle) {
  auto plan = std::make_unique<LtPlan>();
  const bool fp8 = args.format == QDType::kFp8E4M3;
  const cudaDataType_t operand = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
  const cudaDataType_t accumulator = fp8 ? CUDA_R_32F : CUDA_R_32I;
  check_lt(cublasLtMatmulDescCreate(&plan->desc, fp8 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I,
                                    accumulator),
           "cublasLtMatmulDescCreate");
  const int32_t transpose = CUBLAS_OP_T;
  const int32_t no_transpose = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                          sizeof(transpose)),
           "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                          sizeof(no_transpose)),
           "cublasLtMatmulDescSetAttribute(TRANSB)");
  const auto rows = [](int64_t v) { return static_cast<uint64_t>(v); };
  check_lt(cublasLtMatrixLayoutCreate(&plan->layout_w, operand, rows(args.k), rows(args.n), args.k),
           "cublasLtMatrixLayoutCreate(W)");
  check_lt(cublasLtMatrixLayoutCreate(&plan->layout_a, operand, rows(args.k), rows(args.m), args.k),
           "cublasLtMatrixLayoutCreate(A)");
  check_lt(cublasLtMatrixLayoutCreate(&plan->layout_acc, accumulator, rows(args.n), rows(args.m),
                                      args.n),
           "cublasLtMatrixLayoutCreate(acc)");

  cublasLtMatmulPreference_t preference = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kLtWorkspaceBytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->layout_w, plan->layout_a,
                                            plan->layout_acc, plan->layout_acc, preference, 1,
                                            &heuristic, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  OASR_CHECK(status != CUBLAS_STATUS_NOT_SUPPORTED && found > 0, kUnsupported, kOp,
             ": cuBLASLt has no ", fp8 ? "float8_e4m3fn -> fp32" : "int8 -> int32",
             " algorithm for M=", args.m, " N=", args.n, " K=", args.k, "; use the mma_sync lane");
  check_lt(status, "cublasLtMatmulAlgoGetHeuristic");
  plan->algo = heuristic.algo;
  return plan;
}

// Plans are kept for the life of the process (like ops/cuda/gemm.cu's).
LtPlan& plan_for(const ScaledMMArgs& args, cublasLtHandle_t handle) {
  static auto* plans = new std::map<PlanKey, std::unique_ptr<LtPlan>>();
  const PlanKey key = {args.device_index, static_cast<int64_t>(args.format), args.m, args.n,
                       args.k};
  auto found = plans->find(key);
  if (found == plans->end()) found = plans->emplace(key, make_plan(args, handle)).first;
  return *found->second;
}

// One thread per column pair of the row-major accumulator [M, N].
template <typename Acc>
__global__ void scaled_mm_epilogue_kernel(const Acc* __restrict__ accumulator,
                                          detail::EpilogueParams epilogue) {
  // Four consecutive outputs per step (N % 8 == 0 keeps them in one row).
  const int64_t quads = epilogue.m * epilogue.n / 4;
  for (int64_t quad = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; quad < quads;
       quad += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t index = quad * 4;
    const int64_t row = index / epilogue.n;
    const int64_t col = index - row * epilogue.n;
    const Acc values[4] = {accumulator[index], accumulator[index + 1], accumulator[index + 2],
                           accumulator[index + 3]};
    detail::store_epilogue_quad(epilogue, row, col, values);
  }
}

}  // namespace

bool cublaslt_supported(QDType format, int device_index, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (format != QDType::kInt8 && format != QDType::kFp8E4M3) {
    return refuse("the cublaslt lane serves int8 and float8_e4m3fn, not " +
                  std::string(to_string(format)));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || device_index < 0 || device_index >= devices) {
    cudaGetLastError();
    return refuse("no CUDA device cuda:" + std::to_string(device_index));
  }
  const int capability = detail::compute_capability(device_index);
  if (capability == 0) return refuse("cannot query cuda:" + std::to_string(device_index));
  const std::string arch = "sm_" + std::to_string(capability);
  if (capability < 75) return refuse(arch + " has no cuBLASLt int8 tensor-core GEMM");
  if (format == QDType::kFp8E4M3 && capability < 89) {
    return refuse(arch + " has no fp8 tensor cores (cuBLASLt fp8 needs sm_89 or newer)");
  }
  return true;
}

std::string cublaslt_kernel_name(QDType format, int64_t, int64_t, int64_t) {
  return std::string(format == QDType::kInt8 ? "cublasLt s8s8->s32" : "cublasLt e4m3->f32") +
         " + epilogue kernel";
}

void scaled_mm_cublaslt(const ScaledMMArgs& args) {
  if (!detail::validate_scaled_mm_args(args, kOp)) return;
  std::string why;
  OASR_CHECK(cublaslt_supported(args.format, args.device_index, &why), kUnsupported, kOp, ": ",
             why);
  // validate_scaled_mm_args checked K % 16 (cuBLASLt int8 needs K % 4) and
  // 16-byte aligned operands (cuBLASLt's int8 / fp8 alignment).
  CudaDeviceGuard guard(args.device_index);
  const size_t accumulator_bytes = static_cast<size_t>(args.m) * static_cast<size_t>(args.n) * 4;
  {
    std::lock_guard<std::mutex> lock(device_mutex());
    LtDevice& device = lt_device(args.device_index);
    void* accumulator = accumulator_buffer(device, accumulator_bytes, args.device_index);
    LtPlan& plan = plan_for(args, device.handle);
    const bool fp8 = args.format == QDType::kFp8E4M3;
    const int32_t one_i = 1, zero_i = 0;
    const float one_f = 1.0f, zero_f = 0.0f;
    const void* alpha = fp8 ? static_cast<const void*>(&one_f) : static_cast<const void*>(&one_i);
    const void* beta = fp8 ? static_cast<const void*>(&zero_f) : static_cast<const void*>(&zero_i);
    check_lt(cublasLtMatmul(device.handle, plan.desc, alpha, args.w, plan.layout_w, args.a,
                            plan.layout_a, beta, accumulator, plan.layout_acc, accumulator,
                            plan.layout_acc, &plan.algo, device.workspace, kLtWorkspaceBytes,
                            ops::cuda::current_stream()),
             "cublasLtMatmul");
    const detail::EpilogueParams epilogue = detail::make_epilogue_params(args);
    const int64_t quads = args.m * args.n / 4;
    const unsigned int grid = ops::cuda::grid_for(quads);
    if (fp8) {
      scaled_mm_epilogue_kernel<float>
          <<<grid, ops::cuda::kThreadsPerBlock, 0, ops::cuda::current_stream()>>>(
              static_cast<const float*>(accumulator), epilogue);
    } else {
      scaled_mm_epilogue_kernel<int32_t>
          <<<grid, ops::cuda::kThreadsPerBlock, 0, ops::cuda::current_stream()>>>(
              static_cast<const int32_t*>(accumulator), epilogue);
    }
    ops::cuda::check_launch(kOp);
  }
}

}  // namespace oasr::quant::cuda
