// The number-format traits table: one row per QDType saying everything the
// engine needs to know about a format -- its name, storage dtype, range,
// scale rule, reference quantize / dequantize, the kernels each lane runs
// for it, and what it can serve. Code outside this table asks the row
// instead of comparing QDType values, so a format is added by registering
// a row (register_number_format), with no edit anywhere else. The CUDA
// kernels keep their own template dispatch on the built-in formats; a row
// lists the CUDA lanes whose dispatch takes it (cuda_lanes), and a format
// that lists none is refused on a GPU by name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/activations.h"
#include "core/device.h"
#include "core/dtype.h"
#include "quant/format.h"
#include "quant/physical.h"

namespace oasr::quant {

struct ScaledMMLane;  // quant/lanes/scaled_mm_lane.h

// One CPU lane's kernels for one format, over storage bytes (the row knows
// their element type). quantize_per_token: x [m, k] float32 (times
// smooth_inv when given) -> q [m, k] + one scale per row at the format's
// rule. quantize_static: q = quantize(x * multiplier[j]). scaled_mm:
// out [m, n] float32 = act(a_scale[i] * w_scale[j] * (a . w_j) + bias[j]).
// prepare_weight / scaled_mm_prepared: an optional pair (a lane that repacks
// the weight once at bind).
struct FormatKernels {
  std::function<void(const float* x, const float* smooth_inv, int64_t m, int64_t k, void* q,
                     float* scale)>
      quantize_per_token;
  std::function<void(const float* x, const float* multiplier, int64_t m, int64_t k, void* q)>
      quantize_static;
  std::function<void(const void* a, const float* a_scale, const void* w, const float* w_scale,
                     const float* bias, Activation act, int64_t m, int64_t n, int64_t k,
                     float* out)>
      scaled_mm;
  std::function<std::shared_ptr<const void>(const void* w, int64_t n, int64_t k)> prepare_weight;
  std::function<void(const void* a, const float* a_scale, const void* prepared,
                     const float* w_scale, const float* bias, Activation act, int64_t m,
                     float* out)>
      scaled_mm_prepared;

  // A GEMM and both quantizers: the lane serves the format.
  bool complete() const { return quantize_per_token && quantize_static && scaled_mm; }
};

// The CPU bodies of the fused producers (spec "Fewer quantize launches") for
// one format; any may be null (no fused body: the link is not armed).
struct FusedProducerKernels {
  void (*layer_norm_quant)(const float* x, const float* weight, const float* bias, int64_t rows,
                           int64_t features, float eps, void* q, float* scale) = nullptr;
  void (*add_layer_norm_residual_quant)(const float* x, const float* residual, float alpha,
                                        const float* weight, const float* bias, int64_t rows,
                                        int64_t features, float eps, float* sum, void* q,
                                        float* scale) = nullptr;
  void (*quantize_epilogue_static)(const float* y, const float* multiplier, int64_t rows, int64_t n,
                                   void* q) = nullptr;
};

struct NumberFormat {
  QDType id = QDType::kBf16;  // assigned by register_number_format
  std::string name;           // "int8", "fp8_e4m3": reports, errors, quant_config.json
  // The quant method serving it (its registry name, "int8", "fp8"); empty
  // when no method does.
  std::string method;
  DType storage = DType::kBF16;  // the stored element type
  float max_value = 0.0f;        // Q: the largest representable magnitude
  // In-block low-precision scales and a global scale (NVFP4 / MXFP4).
  bool micro_scaled = false;
  // The GEMM's exact accumulator bound on K (int8: int32); 0 = none.
  int64_t max_exact_k = 0;

  // The scale rule: the scale of a row, an output channel or a calibrated
  // clip whose largest magnitude is `amax` (the built-ins: amax / Q).
  float (*scale_of_amax)(float amax) = nullptr;
  // The reference quantize of one row at its own amax (weights per output
  // channel, activations per token): q [k] in storage elements, *scale.
  void (*quantize_row)(const float* x, const float* smooth_inv, int64_t k, void* q,
                       float* scale) = nullptr;
  // One value already multiplied by 1 / scale, rounded onto the format's
  // grid and returned in units of the scale (the calibration observers'
  // fake quantization).
  float (*round_to_grid)(float x_times_multiplier) = nullptr;
  // Stored element i of `q`, in units of its scale.
  float (*dequantize)(const void* q, int64_t i) = nullptr;

  // What it can serve. `not_served`: why no method serves it and what to
  // use instead ("" = a W8A8 method serves it).
  std::string not_served;
  bool serves_convolution = false;  // as a Conv1d / Conv2d weight (int8 only)
  // Its storage in a native quantized checkpoint (oasr quantize): false for
  // formats that live only in the process that registered them.
  bool exportable = false;
  // The CUDA lanes whose kernels take it; {} = CPU only.
  std::vector<std::string> cuda_lanes;
  // Whether the CUDA fused producers' template dispatch takes it.
  bool cuda_fused_producers = false;
  // The given CPU lane's kernels for it; an empty or incomplete result =
  // the lane does not serve it.
  std::function<FormatKernels(const ScaledMMLane& lane)> cpu_kernels;
  FusedProducerKernels cpu_fused;
  // Lowering to storage for a GPU generation (physical.h).
  PhysicalSpec (*physical)(const QuantScheme& scheme, int sm) = nullptr;
  // compressed-tensors: the QuantizationArgs `type` and `num_bits` read as
  // this format, and the checkpoint `format` string that stores it.
  std::string compressed_tensors_type;
  int compressed_tensors_bits = 0;
  std::string compressed_tensors_format;

  bool served() const { return not_served.empty() && !method.empty(); }
  // Whether `device` has the fused norm -> quantize bodies (layer_norm_quant
  // and add_layer_norm_residual_quant) for it, and the quantizing epilogue
  // of a GEMM chain's producer.
  bool fuses_norm_quant_on(Device device) const;
  bool fuses_quantizing_epilogue_on(Device device) const;
};

// The row of `format`; an unregistered one throws kUnsupported naming it.
const NumberFormat& number_format(QDType format);
// The row named `name` (NumberFormat::name), or null.
const NumberFormat* find_number_format(std::string_view name);
// Every registered format, built-ins first (int8, fp8_e4m3, nvfp4, int4, bf16).
std::vector<QDType> number_formats();
// "int8": the names of the formats that serve convolutions, "/"-joined.
std::string convolution_format_names();
// Adds a row and returns its new QDType; a name registered twice is refused.
// Rows are never removed or moved (callers keep references).
QDType register_number_format(NumberFormat row);

}  // namespace oasr::quant
