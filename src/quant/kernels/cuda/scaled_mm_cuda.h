// The CUDA scaled GEMMs (spec "One quantized GEMM"), on device pointers,
// ordered on ops::cuda::current_stream(). Host-only header: the .cc layers
// above include it without CUDA headers.
//
//   acc[m, n] = sum_k a[m, k] * w[n, k]
//   int8:  an exact int32 (mma.sync m16n8k32 s8), so every tile, lane and
//          batch composition gives the same acc as the CPU reference.
//   e4m3:  each k32 step on the tensor core starts from zero and its result
//          is added to an fp32 register accumulator in K order (fixed K
//          steps, no split-K), so every tile and batch composition gives the
//          same bits; the CPU reference sums one product at a time, so the
//          two agree within a stated tolerance, not bitwise.
//   y = int8_epilogue / fp8_epilogue (quant/numerics.h), rounded once to
//       `served`; or, with out_multiplier, the quantizing epilogue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/activations.h"
#include "core/dtype.h"
#include "quant/format.h"

namespace oasr::quant::cuda {

struct ScaledMMArgs {
  QDType format = QDType::kInt8;   // operands: int8, or float8_e4m3fn bits
  const void* a = nullptr;         // [M, K] row-major
  const float* a_scale = nullptr;  // [M] (a static input scale repeated per row)
  const void* w = nullptr;         // [N, K] row-major
  const float* w_scale = nullptr;  // [N]
  const float* bias = nullptr;     // fp32 [N], or null (numerics.h kNoBias)
  Activation act = Activation::kNone;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  // y = epilogue(acc), rounded once to `served` (float32, float16, bfloat16).
  DType served = DType::kF32;
  // out_multiplier == null: out is [M, N] of `served`.
  // out_multiplier != null (the quantizing epilogue of a GEMM-chain producer):
  //   out is [M, N] 8-bit in `format`, q = quantize(float(y rounded to served)
  //   * out_multiplier[n]) -- the consumer's static multiplier
  //   (numerics.h static_multiplier), so the consumer's input never exists in
  //   the served dtype.
  void* out = nullptr;
  const float* out_multiplier = nullptr;  // [N] or null
  int device_index = 0;
};

// One compiled tile configuration of the mma.sync kernels.
struct MmaSyncConfig {
  int block_m = 0;
  int block_n = 0;
  int block_k = 0;
  int warps_m = 0;
  int warps_n = 0;
  int stages = 0;
  std::string name() const;  // e.g. "mma_sync_s8_128x128x64_w2x2_s3"
};

// Every compiled configuration for `format` (tests run each; bench sweeps them).
std::vector<MmaSyncConfig> mma_sync_configs(QDType format);
// The host heuristic: the configuration for (M bucket, N, K).
MmaSyncConfig choose_mma_sync_config(QDType format, int64_t m, int64_t n, int64_t k);
// Whether device `device_index` runs the mma.sync kernels for `format`: int8
// needs sm80+, e4m3 sm89+ (and a build that compiled them). On false, `why`
// (when given) says what is missing, for the refusal.
bool mma_sync_supported(QDType format, int device_index, std::string* why);
// Runs the heuristic's configuration / a named one (any config gives the same bits).
void scaled_mm_mma_sync(const ScaledMMArgs& args);
void scaled_mm_mma_sync(const ScaledMMArgs& args, const MmaSyncConfig& config);

// The cublaslt A/B lane: cuBLASLt's int8 GEMM into int32 (or its e4m3 GEMM
// into fp32) in a workspace, then a separate epilogue kernel applying the
// same epilogue. int8 is bit-identical to the mma.sync lane; e4m3 sums in
// cuBLASLt's order.
bool cublaslt_supported(QDType format, int device_index, std::string* why);
void scaled_mm_cublaslt(const ScaledMMArgs& args);
// The report's name of the cublaslt lane's GEMM for `format`.
std::string cublaslt_kernel_name(QDType format, int64_t m, int64_t n, int64_t k);

// ---- small M: the int8 GEMV (scaled_gemv.cu) --------------------------------
// At M <= kGemvMaxRows (a decoder step) a tiled GEMM computes a mostly empty
// tile over a few CTAs, and its time is latency. The GEMV spreads N over
// many CTAs instead: each stages the (<= 16) 8-bit input rows in shared
// memory and each warp reduces whole weight rows with dp4a. The int32 sums
// are exact in any order, and the epilogue is scaled_mm_epilogue.cuh's, so
// it stores the mma.sync lane's bits (for every output mode); a row's result
// does not depend on M, so the choice by M keeps batch invariance. int8 only:
// e4m3's bits are those of the tensor core's k32 step.
inline constexpr int64_t kGemvMaxRows = 16;

// Whether the GEMV can run this shape: int8, 1 <= M <= kGemvMaxRows,
// K % 16 == 0, N % 8 == 0, and the staged rows (M rounded up to a power of
// two, times K) fit 47 KiB of shared memory.
bool gemv_fits(QDType format, int64_t m, int64_t n, int64_t k);
// Whether the lanes route this shape to it: gemv_fits, and OASR_QUANT_GEMV
// is not 0.
bool gemv_takes(QDType format, int64_t m, int64_t n, int64_t k);
// The report's name of the GEMV for M rows ("gemv_s8_r16").
std::string gemv_kernel_name(int64_t m);
// The GEMV on an already quantized input (args as for the lanes; a shape
// that does not fit is refused). Both CUDA int8 lanes route M <= 16 here.
void scaled_gemv_int8(const ScaledMMArgs& args);

// The input quantize folded into the GEMV: x [M, K] in the served dtype
// (float32, float16, bfloat16) is quantized on chip, per token
// (quantize_row_dynamic_int8, with smooth_inv when given) or with a static
// multiplier (quantize_row_static_int8; every row's scale static_scale), and
// never written out; args.a and args.a_scale are unused. Bit-identical to
// quantize_per_token / quantize_static followed by scaled_gemv_int8.
struct GemvInput {
  const void* x = nullptr;
  DType x_dtype = DType::kF32;
  const float* smooth_inv = nullptr;         // [K] or null (per token)
  const float* static_multiplier = nullptr;  // [K]: the static recipe; null: per token
  float static_scale = 0.0f;
};
// Whether quantize_gemv_int8 can run x: gemv_fits, x of a float dtype, and
// x, smooth_inv and the multiplier 16-byte aligned; ..._takes also asks
// OASR_QUANT_GEMV (QuantMethod::forward's question).
bool quantize_gemv_fits(const GemvInput& input, QDType format, int64_t m, int64_t n, int64_t k);
bool quantize_gemv_takes(const GemvInput& input, QDType format, int64_t m, int64_t n, int64_t k);
void quantize_gemv_int8(const GemvInput& input, const ScaledMMArgs& args);

}  // namespace oasr::quant::cuda
