// The case table of the CPU-vs-CUDA consistency harness (backend_ops.cc),
// modelled on ggml's test-backend-ops: each case names an op front, the
// inputs to generate, the dtype the CUDA body runs in and how its result is
// judged against the float32 CPU reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace oasr::backend_ops {

enum class InputKind {
  kFloat,      // normal(0, scale), rounded to the case dtype (both devices see the same values)
  kMask,       // uint8 keep-mask (see MaskPattern)
  kIds,        // int32/int64 ids uniform in [0, id_limit)
  kUndefined,  // an absent optional argument (bias, weight)
};

enum class MaskPattern {
  kRandomWithEmptyRows,  // keep with p = 0.75; every 5th row (last dimension) fully masked
  kPrefix,               // keep t < length(row): row 0 full, falling, the last of >= 3 rows empty
  kAllMasked,            // nothing kept: every row empty
};

struct InputSpec {
  InputKind kind = InputKind::kFloat;
  Shape shape;
  float scale = 1.0f;  // kFloat: standard deviation
  MaskPattern mask = MaskPattern::kRandomWithEmptyRows;
  DType id_dtype = DType::kI64;  // kIds
  int64_t id_limit = 1;          // kIds
};

// How a case's CUDA result is judged against the CPU reference. kExact:
// bodies that compute each element exactly as the CPU body does in float32
// and round once to the dtype; the CUDA result must equal the CPU float32
// result rounded to the dtype, bit for bit. The others use the tolerances of
// backend_ops.cc's table (reductions reassociate; cuBLAS/tensor cores differ).
enum class Family { kExact, kGemm, kConv2d, kNorm, kSoftmax, kLogSoftmax };

// Runs the op front on `inputs` (all on one device, float inputs in one
// dtype) and returns its outputs.
using RunFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct OpCase {
  std::string op;  // "layer_norm"
  DType dtype = DType::kF32;
  std::string shape;   // "3x37x256"
  std::string params;  // "eps1e5", "causal_k15", ... (may be empty)
  std::vector<InputSpec> inputs;
  RunFn run;
  Family family = Family::kExact;
  double flops = 0;  // multiply-adds x 2 for GEMM-like ops; 0 where TFLOPS mean nothing

  // "op/dtype/shape[/params]": the gtest name and what --filter matches.
  std::string name() const;
};

// "f32", "f16", "bf16".
const char* short_dtype_name(DType dtype);

// Every case: the U2++ Conformer's shapes and the edge shapes, for f32,
// f16 and bf16.
std::vector<OpCase> all_cases();

}  // namespace oasr::backend_ops
