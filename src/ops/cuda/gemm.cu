// cuBLASLt GEMMs for ops/cuda/gemm.h. cuBLAS is column-major: a row-major
// [R, C] buffer is the column-major [C, R] matrix, so the row-major product
// Y = X W^T is computed as the column-major Y^T = W X^T (A = weight,
// transposed; B = x), and the bias, a per-output-feature vector, is the
// per-row bias of D that CUBLASLT_EPILOGUE_BIAS adds.
#include "ops/cuda/gemm.h"

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "core/cuda/device_guard.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One workspace per device, allocated on first use and kept for the life of
// the process (several GEMM algorithms need a few MiB; 32 MiB covers the
// split-K variants cuBLASLt picks for tall-skinny shapes).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The row count whose heuristic algorithm serves every linear of a weight
// shape (ops/cuda/gemm.h: batch invariance): a batch of about 64 ten-second
// utterances after 4x subsampling, where the encoder spends its GEMM time.
constexpr int64_t kInvariantRows = 16384;

// One GEMM in cuBLAS's column-major terms: D[m, n] = op(A)[m, k] B[k, n]
// (+ bias[m]) (+ D when accumulate), for `batch` matrices at fixed strides.
struct GemmProblem {
  const char* op;
  DType dtype;
  int64_t m, n, k, batch;
  const void* a;
  bool transpose_a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  void* d;
  int64_t ldd, stride_d;
  const void* bias;  // m elements of dtype, or null
  bool accumulate;   // beta = 1, D holds C on entry (the bias fallback)
  // > 0: the algorithm is the one the heuristic picks for n = heuristic_n,
  // with split-K off, whatever n is; so a column of D (a row of a linear's
  // output) is computed by the same kernel in the same K order for every n.
  int64_t heuristic_n;
};

std::string describe(const GemmProblem& p) {
  std::ostringstream out;
  out << dtype_name(p.dtype) << " column-major M=" << p.m << " N=" << p.n << " K=" << p.k
      << " batch=" << p.batch << (p.transpose_a ? " (A transposed)" : "")
      << (p.bias != nullptr ? " with bias" : "");
  return out.str();
}

void check_lt(cublasStatus_t status, const char* call, const GemmProblem& p) {
  OASR_CHECK(status == CUBLAS_STATUS_SUCCESS, kInternal, p.op, ": ", call, " failed with ",
             cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status), ") for ",
             describe(p));
}

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The handle and workspace of the current device (the caller holds a
// CudaDeviceGuard). Never destroyed: the CUDA runtime may already be torn
// down when static destructors run, and the process exit frees both.
LtContext& context_for(int device_index, const GemmProblem& p) {
  static std::mutex mutex;
  static auto* contexts = new std::map<int, LtContext>();
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = contexts->find(device_index);
  if (found != contexts->end()) return found->second;
  LtContext context;
  check_lt(cublasLtCreate(&context.handle), "cublasLtCreate", p);
  const cudaError_t status = cudaMalloc(&context.workspace, kWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasLtDestroy(context.handle);
    OASR_THROW(kOutOfMemory, p.op, ": cannot allocate the ", kWorkspaceBytes >> 20,
               " MiB cuBLASLt workspace on cuda:", device_index, ": ", cudaGetErrorName(status));
  }
  return contexts->emplace(device_index, context).first->second;
}

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      OASR_THROW(kUnsupported, "GEMM on CUDA serves float32, float16 and bfloat16, got ",
                 dtype_name(dtype));
  }
}

// The largest power of two (up to 256, what cuBLASLt asks about) dividing
// the address and, for batched operands, the byte stride between matrices.
uint32_t alignment_bytes(const void* ptr, int64_t batch, int64_t stride_elements, size_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elements) * elem;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// RAII owners of the cuBLASLt descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};
struct MatrixLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~MatrixLayout() {
    if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
  }
};
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  }
};

void make_layout(MatrixLayout& out, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t stride, const GemmProblem& p) {
  check_lt(cublasLtMatrixLayoutCreate(&out.layout, type, static_cast<uint64_t>(rows),
                                      static_cast<uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate", p);
  if (batch <= 1) return;
  const int32_t count = static_cast<int32_t>(batch);
  check_lt(cublasLtMatrixLayoutSetAttribute(out.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                            sizeof(count)),
           "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", p);
  check_lt(cublasLtMatrixLayoutSetAttribute(out.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof(stride)),
           "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", p);
}

// A planned problem: its descriptors and the algorithm cuBLASLt's heuristic
// chose. Planning costs more host time than most of the encoder's GEMMs take
// on the GPU, so plans are kept per problem shape (the bias pointer, which
// changes per call, is set on the cached descriptor at each call).
struct GemmPlan {
  MatmulDesc desc;
  MatrixLayout layout_a;
  MatrixLayout layout_b;
  MatrixLayout layout_d;
  cublasLtMatmulAlgo_t algo{};
  bool has_algorithm = false;
};

using PlanKey = std::array<int64_t, 19>;

PlanKey plan_key(const GemmProblem& p, int device_index, uint32_t align_a, uint32_t align_b,
                 uint32_t align_d) {
  return {device_index,
          static_cast<int64_t>(p.dtype),
          p.m,
          p.n,
          p.k,
          p.batch,
          p.transpose_a ? 1 : 0,
          p.lda,
          p.stride_a,
          p.ldb,
          p.stride_b,
          p.ldd,
          p.stride_d,
          p.bias != nullptr ? 1 : 0,
          p.accumulate ? 1 : 0,
          align_a,
          align_b,
          align_d,
          p.heuristic_n};
}

// `algo` with split-K off (one K pass, no reduction), when cuBLASLt accepts
// that configuration for the plan's problem within the workspace; `algo` is
// left unusable otherwise (the caller keeps its own copy).
bool without_split_k(cublasLtMatmulAlgo_t& algo, const LtContext& context, const GemmPlan& plan) {
  const int32_t one_split = 1;
  const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  cublasLtMatmulHeuristicResult_t checked{};
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split,
                                              sizeof(one_split)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                              &no_reduction,
                                              sizeof(no_reduction)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoCheck(context.handle, plan.desc.desc, plan.layout_a.layout,
                                 plan.layout_b.layout, plan.layout_d.layout, plan.layout_d.layout,
                                 &algo, &checked) == CUBLAS_STATUS_SUCCESS &&
         checked.workspaceSize <= kWorkspaceBytes;
}

std::unique_ptr<GemmPlan> make_plan(const GemmProblem& p, LtContext& context, uint32_t align_a,
                                    uint32_t align_b, uint32_t align_d) {
  auto plan = std::make_unique<GemmPlan>();
  const cudaDataType_t type = cuda_data_type(p.dtype);
  check_lt(cublasLtMatmulDescCreate(&plan->desc.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate", p);
  const int32_t transa = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t transb = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                          sizeof(transa)),
           "cublasLtMatmulDescSetAttribute(TRANSA)", p);
  check_lt(cublasLtMatmulDescSetAttribute(plan->desc.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                          sizeof(transb)),
           "cublasLtMatmulDescSetAttribute(TRANSB)", p);
  if (p.bias != nullptr) {
    // The bias vector has D's type (cuBLASLt's default for non-IMMA, non-fp8
    // kernels) and is added to the float32 sum before D is rounded.
    const int32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                            &epilogue, sizeof(epilogue)),
             "cublasLtMatmulDescSetAttribute(EPILOGUE)", p);
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                            &p.bias, sizeof(p.bias)),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p);
  }
  // A is stored [m, k] (or [k, m] when transposed), column-major.
  make_layout(plan->layout_a, type, p.transpose_a ? p.k : p.m, p.transpose_a ? p.m : p.k, p.lda,
              p.batch, p.stride_a, p);
  make_layout(plan->layout_b, type, p.k, p.n, p.ldb, p.batch, p.stride_b, p);
  make_layout(plan->layout_d, type, p.m, p.n, p.ldd, p.batch, p.stride_d, p);

  Preference preference;
  check_lt(cublasLtMatmulPreferenceCreate(&preference.pref), "cublasLtMatmulPreferenceCreate", p);
  const uint64_t workspace = kWorkspaceBytes;
  check_lt(
      cublasLtMatmulPreferenceSetAttribute(
          preference.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)),
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", p);
  // Views can start at any element, so tell the heuristic the alignment the
  // pointers really have rather than the 256 bytes it assumes by default.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
  for (const auto& [attribute, value] : alignments) {
    check_lt(
        cublasLtMatmulPreferenceSetAttribute(preference.pref, attribute, &value, sizeof(value)),
        "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", p);
  }

  if (p.heuristic_n > 0 && p.heuristic_n != p.n) {
    // Ask about the canonical n, then run that algorithm on the real one.
    MatrixLayout query_b;
    MatrixLayout query_d;
    make_layout(query_b, type, p.k, p.heuristic_n, p.ldb, p.batch, p.stride_b, p);
    make_layout(query_d, type, p.m, p.heuristic_n, p.ldd, p.batch, p.stride_d, p);
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        context.handle, plan->desc.desc, plan->layout_a.layout, query_b.layout, query_d.layout,
        query_d.layout, preference.pref, 1, &heuristic, &found);
    cublasLtMatmulAlgo_t algo = heuristic.algo;
    if (status == CUBLAS_STATUS_SUCCESS && found > 0 && without_split_k(algo, context, *plan)) {
      plan->algo = algo;
      plan->has_algorithm = true;
      return plan;
    }
    // The canonical algorithm cannot run this problem: the heuristic's own
    // choice for it below (correct, but not row-invariant).
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      context.handle, plan->desc.desc, plan->layout_a.layout, plan->layout_b.layout,
      plan->layout_d.layout, plan->layout_d.layout, preference.pref, 1, &heuristic, &found);
  if (p.bias != nullptr && (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)) return plan;
  check_lt(status, "cublasLtMatmulAlgoGetHeuristic", p);
  OASR_CHECK(found > 0, kUnsupported, p.op, ": cuBLASLt has no algorithm for ", describe(p));
  plan->algo = heuristic.algo;
  if (p.heuristic_n > 0) {
    // n == heuristic_n: the same algorithm the other n run, split-K off,
    // where cuBLASLt accepts that configuration (else its own choice).
    cublasLtMatmulAlgo_t algo = heuristic.algo;
    if (without_split_k(algo, context, *plan)) plan->algo = algo;
  }
  plan->has_algorithm = true;
  return plan;
}

// Runs the GEMM with the bias epilogue when p.bias is set. Returns false,
// having launched nothing, when cuBLASLt has no algorithm for the bias
// epilogue on this problem (the caller then adds the bias another way);
// every other failure throws.
bool try_gemm(const GemmProblem& p, int device_index) {
  OASR_CHECK(p.batch <= std::numeric_limits<int32_t>::max(), kUnsupported, p.op, ": batch ",
             p.batch, " exceeds cuBLASLt's 32-bit batch count");
  LtContext& context = context_for(device_index, p);
  const size_t elem = dtype_size(p.dtype);
  const uint32_t align_a = alignment_bytes(p.a, p.batch, p.stride_a, elem);
  const uint32_t align_b = alignment_bytes(p.b, p.batch, p.stride_b, elem);
  const uint32_t align_d = alignment_bytes(p.d, p.batch, p.stride_d, elem);

  // Never destroyed, like the contexts: plans outlive any caller.
  static std::mutex mutex;
  static auto* plans = new std::map<PlanKey, std::unique_ptr<GemmPlan>>();
  std::lock_guard<std::mutex> lock(mutex);
  const PlanKey key = plan_key(p, device_index, align_a, align_b, align_d);
  auto found = plans->find(key);
  if (found == plans->end()) {
    found = plans->emplace(key, make_plan(p, context, align_a, align_b, align_d)).first;
  }
  GemmPlan& plan = *found->second;
  if (!plan.has_algorithm) return false;
  if (p.bias != nullptr) {
    check_lt(cublasLtMatmulDescSetAttribute(plan.desc.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                            &p.bias, sizeof(p.bias)),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p);
  }
  const float alpha = 1.0f;
  const float beta = p.accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(context.handle, plan.desc.desc, &alpha, p.a, plan.layout_a.layout, p.b,
                          plan.layout_b.layout, &beta, p.d, plan.layout_d.layout, p.d,
                          plan.layout_d.layout, &plan.algo, context.workspace, kWorkspaceBytes,
                          current_stream()),
           "cublasLtMatmul", p);
  return true;
}

// out[r, j] = bias[j] for `rows` rows of `features` (the whole output).
template <typename T>
__global__ void broadcast_bias_kernel(const T* bias, T* out, int64_t rows, int64_t features) {
  const int64_t total = rows * features;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = bias[i % features];
  }
}

void broadcast_bias(const void* bias, void* out, DType dtype, int64_t rows, int64_t features) {
  dispatch_float(dtype, "linear", [&](auto tag) {
    using T = decltype(tag);
    const int64_t total = rows * features;
    broadcast_bias_kernel<T><<<grid_for(total), kThreadsPerBlock, 0, current_stream()>>>(
        static_cast<const T*>(bias), static_cast<T*>(out), rows, features);
  });
  check_launch("linear");
}

void fill_zeros(void* out, size_t nbytes, const char* op) {
  const cudaError_t status = cudaMemsetAsync(out, 0, nbytes, current_stream());
  OASR_CHECK(status == cudaSuccess, kInternal, op, ": cudaMemsetAsync of ", nbytes,
             " bytes failed: ", cudaGetErrorName(status));
}

}  // namespace

void linear(const void* x, const void* weight, const void* bias, void* out, DType dtype,
            int device_index, int64_t rows, int64_t out_features, int64_t in_features) {
  if (rows == 0 || out_features == 0) return;
  CudaDeviceGuard guard(device_index);
  if (in_features == 0) {
    // An empty sum is zero, so the result is the bias (or zeros).
    if (bias != nullptr) {
      broadcast_bias(bias, out, dtype, rows, out_features);
    } else {
      fill_zeros(out, static_cast<size_t>(rows * out_features) * dtype_size(dtype), "linear");
    }
    return;
  }
  GemmProblem p{};
  p.op = "linear";
  p.dtype = dtype;
  p.m = out_features;
  p.n = rows;
  p.k = in_features;
  p.batch = 1;
  p.a = weight;  // row-major [N, K] = column-major [K, N], used transposed
  p.transpose_a = true;
  p.lda = in_features;
  p.b = x;  // row-major [rows, K] = column-major [K, rows]
  p.ldb = in_features;
  p.d = out;  // row-major [rows, N] = column-major [N, rows]
  p.ldd = out_features;
  p.accumulate = false;
  // Batch invariance: one algorithm per weight shape, whatever the row count.
  p.heuristic_n = kInvariantRows;
  // A bias view can start at any element; the epilogue is only trusted with
  // a 16-byte aligned bias (its kernels may load the vector in 16 bytes).
  const bool epilogue_bias = bias != nullptr && reinterpret_cast<uintptr_t>(bias) % 16 == 0;
  p.bias = epilogue_bias ? bias : nullptr;
  if (bias == nullptr || epilogue_bias) {
    if (try_gemm(p, device_index)) return;
  }
  // No bias-epilogue algorithm for this shape (or a misaligned bias): start
  // D at the broadcast bias and accumulate onto it (beta = 1), which still
  // adds the bias to the float32 sum before the single rounding to the dtype.
  broadcast_bias(bias, out, dtype, rows, out_features);
  p.bias = nullptr;
  p.accumulate = true;
  try_gemm(p, device_index);
}

void matmul(const void* a, const void* b, void* out, DType dtype, int device_index, int64_t batch,
            int64_t m, int64_t n, int64_t k, bool transpose_b) {
  if (batch == 0 || m == 0 || n == 0) return;
  CudaDeviceGuard guard(device_index);
  if (k == 0) {
    fill_zeros(out, static_cast<size_t>(batch * m * n) * dtype_size(dtype), "matmul");
    return;
  }
  // Row-major out[m, n] = a b is the column-major out^T[n, m] = b^T a^T.
  GemmProblem p{};
  p.op = "matmul";
  p.dtype = dtype;
  p.m = n;
  p.n = m;
  p.k = k;
  p.batch = batch;
  p.a = b;  // row-major [k, n] = column-major [n, k]; row-major [n, k] is its transpose
  p.transpose_a = transpose_b;
  p.lda = transpose_b ? k : n;
  p.stride_a = k * n;
  p.b = a;  // row-major [m, k] = column-major [k, m]
  p.ldb = k;
  p.stride_b = m * k;
  p.d = out;
  p.ldd = n;
  p.stride_d = m * n;
  p.bias = nullptr;
  p.accumulate = false;
  try_gemm(p, device_index);
}

}  // namespace oasr::ops::cuda
