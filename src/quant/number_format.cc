#include "quant/number_format.h"

#include <deque>
#include <mutex>

#include "core/error.h"
#include "core/float_types.h"
#include "quant/kernels/cpu/fused_producers.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/numerics.h"

namespace oasr::quant {
namespace {

// ---- the rules of the built-in 8-bit formats (numerics.h) ------------------

template <float kQ>
float scale_of_amax_q(float amax) {
  return act::detail::div_rn(amax, kQ);
}

void quantize_row_int8(const float* x, const float* smooth_inv, int64_t k, void* q, float* scale) {
  quantize_row_dynamic_int8(x, smooth_inv, k, static_cast<int8_t*>(q), scale);
}
void quantize_row_e4m3(const float* x, const float* smooth_inv, int64_t k, void* q, float* scale) {
  quantize_row_dynamic_e4m3(x, smooth_inv, k, static_cast<uint8_t*>(q), scale);
}
float round_to_grid_int8(float x_times_multiplier) {
  return static_cast<float>(quantize_int8(x_times_multiplier));
}
float round_to_grid_e4m3(float x_times_multiplier) {
  return e4m3_bits_to_f32(quantize_e4m3(x_times_multiplier));
}
float dequantize_int8(const void* q, int64_t i) {
  return static_cast<float>(static_cast<const int8_t*>(q)[i]);
}
float dequantize_e4m3(const void* q, int64_t i) {
  return e4m3_bits_to_f32(static_cast<const uint8_t*>(q)[i]);
}

// A lane's int8 entry points as the format's kernels (each null stays empty).
FormatKernels int8_kernels(const ScaledMMLane& lane) {
  FormatKernels kernels;
  if (lane.quantize_per_token_int8 != nullptr) {
    kernels.quantize_per_token = [f = lane.quantize_per_token_int8](
                                     const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                     void* q, float* scale) {
      f(x, smooth_inv, m, k, static_cast<int8_t*>(q), scale);
    };
  }
  if (lane.quantize_static_int8 != nullptr) {
    kernels.quantize_static = [f = lane.quantize_static_int8](
                                  const float* x, const float* multiplier, int64_t m, int64_t k,
                                  void* q) { f(x, multiplier, m, k, static_cast<int8_t*>(q)); };
  }
  if (lane.scaled_mm_int8 != nullptr) {
    kernels.scaled_mm = [f = lane.scaled_mm_int8](const void* a, const float* a_scale,
                                                  const void* w, const float* w_scale,
                                                  const float* bias, Activation act, int64_t m,
                                                  int64_t n, int64_t k, float* out) {
      f(static_cast<const int8_t*>(a), a_scale, static_cast<const int8_t*>(w), w_scale, bias, act,
        m, n, k, out);
    };
  }
  if (lane.prepare_int8_weight != nullptr && lane.scaled_mm_int8_prepared != nullptr) {
    kernels.prepare_weight = [f = lane.prepare_int8_weight](const void* w, int64_t n, int64_t k) {
      return f(static_cast<const int8_t*>(w), n, k);
    };
    kernels.scaled_mm_prepared = [f = lane.scaled_mm_int8_prepared](
                                     const void* a, const float* a_scale, const void* prepared,
                                     const float* w_scale, const float* bias, Activation act,
                                     int64_t m, float* out) {
      f(static_cast<const int8_t*>(a), a_scale, prepared, w_scale, bias, act, m, out);
    };
  }
  return kernels;
}

FormatKernels e4m3_kernels(const ScaledMMLane& lane) {
  FormatKernels kernels;
  if (lane.quantize_per_token_e4m3 != nullptr) {
    kernels.quantize_per_token = [f = lane.quantize_per_token_e4m3](
                                     const float* x, const float* smooth_inv, int64_t m, int64_t k,
                                     void* q, float* scale) {
      f(x, smooth_inv, m, k, static_cast<uint8_t*>(q), scale);
    };
  }
  if (lane.quantize_static_e4m3 != nullptr) {
    kernels.quantize_static = [f = lane.quantize_static_e4m3](
                                  const float* x, const float* multiplier, int64_t m, int64_t k,
                                  void* q) { f(x, multiplier, m, k, static_cast<uint8_t*>(q)); };
  }
  if (lane.scaled_mm_e4m3 != nullptr) {
    kernels.scaled_mm = [f = lane.scaled_mm_e4m3](const void* a, const float* a_scale,
                                                  const void* w, const float* w_scale,
                                                  const float* bias, Activation act, int64_t m,
                                                  int64_t n, int64_t k, float* out) {
      f(static_cast<const uint8_t*>(a), a_scale, static_cast<const uint8_t*>(w), w_scale, bias, act,
        m, n, k, out);
    };
  }
  return kernels;
}

template <typename Storage, void (*kBody)(const float*, const float*, const float*, int64_t,
                                          int64_t, float, Storage*, float*)>
void erased_layer_norm_quant(const float* x, const float* weight, const float* bias, int64_t rows,
                             int64_t features, float eps, void* q, float* scale) {
  kBody(x, weight, bias, rows, features, eps, static_cast<Storage*>(q), scale);
}

template <typename Storage,
          void (*kBody)(const float*, const float*, float, const float*, const float*, int64_t,
                        int64_t, float, float*, Storage*, float*)>
void erased_add_layer_norm_quant(const float* x, const float* residual, float alpha,
                                 const float* weight, const float* bias, int64_t rows,
                                 int64_t features, float eps, float* sum, void* q, float* scale) {
  kBody(x, residual, alpha, weight, bias, rows, features, eps, sum, static_cast<Storage*>(q),
        scale);
}

template <typename Storage, void (*kBody)(const float*, const float*, int64_t, int64_t, Storage*)>
void erased_quantize_epilogue(const float* y, const float* multiplier, int64_t rows, int64_t n,
                              void* q) {
  kBody(y, multiplier, rows, n, static_cast<Storage*>(q));
}

// ---- lowering to storage (physical.h) --------------------------------------

PhysicalSpec base_spec(const QuantScheme& scheme) {
  PhysicalSpec spec;
  spec.weight_granularity = scheme.weight.granularity;
  spec.block_n = scheme.weight.block_n;
  spec.block_k = scheme.weight.block_k;
  spec.needs_activation_quant = scheme.input.has_value();
  return spec;
}

PhysicalSpec lower_full_precision(const QuantScheme& scheme, int) {
  PhysicalSpec spec = base_spec(scheme);
  spec.kind = PhysicalKind::kFullPrecision;
  spec.spec_id = "full_precision";
  spec.weight_dtype = DType::kBF16;
  spec.needs_activation_quant = false;
  return spec;
}

PhysicalSpec lower_int8(const QuantScheme& scheme, int) {
  const TensorQuant& w = scheme.weight;
  OASR_CHECK(w.granularity == Granularity::kPerChannel, kUnsupported,
             "materialize: int8 weights have a per-channel physical spec only, not ",
             to_string(w.granularity), " (scheme '", scheme.name, "')");
  PhysicalSpec spec = base_spec(scheme);
  spec.kind = PhysicalKind::kInt8;
  spec.spec_id = "int8_per_channel";
  spec.weight_dtype = DType::kI8;
  return spec;
}

PhysicalSpec lower_fp8(const QuantScheme& scheme, int) {
  const TensorQuant& w = scheme.weight;
  PhysicalSpec spec = base_spec(scheme);
  spec.kind = PhysicalKind::kFp8;
  spec.weight_dtype = DType::kF8E4M3;
  if (w.granularity == Granularity::kBlock) {
    spec.spec_id = "fp8_block_" + std::to_string(w.block_n) + "_" + std::to_string(w.block_k);
  } else if (w.granularity == Granularity::kPerChannel ||
             w.granularity == Granularity::kPerTensor) {
    spec.spec_id = std::string("fp8_") + std::string(to_string(w.granularity));
  } else {
    OASR_THROW(kUnsupported, "materialize: fp8 weights cannot have ", to_string(w.granularity),
               " scales (scheme '", scheme.name, "')");
  }
  return spec;
}

PhysicalSpec lower_nvfp4(const QuantScheme& scheme, int sm) {
  PhysicalSpec spec = base_spec(scheme);
  spec.kind = PhysicalKind::kNvfp4;
  spec.weight_dtype = DType::kU8;
  spec.block_n = 1;
  spec.block_k = 16;
  spec.nvfp4_scale_layout = sm >= 100 ? Nvfp4ScaleLayout::k128x4 : Nvfp4ScaleLayout::kLinear;
  spec.spec_id = std::string("nvfp4_block_16_") + std::string(to_string(spec.nvfp4_scale_layout));
  return spec;
}

// ---- the built-in rows, in QDType order ------------------------------------

constexpr const char* kServedInstead =
    "; the served formats are int8 (int8_w8a8, int8_w8a8_static) and fp8 (fp8_w8a8, "
    "fp8_w8a8_static)";

std::deque<NumberFormat> builtin_rows() {
  std::deque<NumberFormat> rows;

  NumberFormat int8;
  int8.name = "int8";
  int8.method = "int8";
  int8.storage = DType::kI8;
  int8.max_value = kInt8Max;
  int8.max_exact_k = kInt8MaxExactK;
  int8.scale_of_amax = scale_of_amax_q<kInt8Max>;
  int8.quantize_row = quantize_row_int8;
  int8.round_to_grid = round_to_grid_int8;
  int8.dequantize = dequantize_int8;
  int8.serves_convolution = true;
  int8.exportable = true;
  int8.cuda_lanes = {"native", "mma_sync", "cublaslt"};
  int8.cuda_fused_producers = true;
  int8.cpu_kernels = int8_kernels;
  int8.cpu_fused.layer_norm_quant = erased_layer_norm_quant<int8_t, cpu::layer_norm_quant_int8>;
  int8.cpu_fused.add_layer_norm_residual_quant =
      erased_add_layer_norm_quant<int8_t, cpu::add_layer_norm_residual_quant_int8>;
  int8.cpu_fused.quantize_epilogue_static =
      erased_quantize_epilogue<int8_t, cpu::quantize_epilogue_static_int8>;
  int8.physical = lower_int8;
  int8.compressed_tensors_type = "int";
  int8.compressed_tensors_bits = 8;
  int8.compressed_tensors_format = "int-quantized";
  rows.push_back(std::move(int8));

  NumberFormat fp8;
  fp8.name = "fp8_e4m3";
  fp8.method = "fp8";
  fp8.storage = DType::kF8E4M3;
  fp8.max_value = kE4m3Max;
  fp8.scale_of_amax = scale_of_amax_q<kE4m3Max>;
  fp8.quantize_row = quantize_row_e4m3;
  fp8.round_to_grid = round_to_grid_e4m3;
  fp8.dequantize = dequantize_e4m3;
  fp8.exportable = true;
  fp8.cuda_lanes = {"native", "mma_sync", "cublaslt"};
  fp8.cuda_fused_producers = true;
  fp8.cpu_kernels = e4m3_kernels;
  fp8.cpu_fused.layer_norm_quant = erased_layer_norm_quant<uint8_t, cpu::layer_norm_quant_e4m3>;
  fp8.cpu_fused.add_layer_norm_residual_quant =
      erased_add_layer_norm_quant<uint8_t, cpu::add_layer_norm_residual_quant_e4m3>;
  fp8.cpu_fused.quantize_epilogue_static =
      erased_quantize_epilogue<uint8_t, cpu::quantize_epilogue_static_e4m3>;
  fp8.physical = lower_fp8;
  fp8.compressed_tensors_type = "float";
  fp8.compressed_tensors_bits = 8;
  fp8.compressed_tensors_format = "float-quantized";
  rows.push_back(std::move(fp8));

  NumberFormat nvfp4;
  nvfp4.name = "nvfp4";
  nvfp4.storage = DType::kU8;  // two E2M1 values per byte
  nvfp4.max_value = 6.0f;
  nvfp4.micro_scaled = true;
  nvfp4.not_served =
      "(NVFP4) is described by the format layer but no method serves it yet; use int8_w8a8 or "
      "fp8_w8a8";
  nvfp4.physical = lower_nvfp4;
  nvfp4.compressed_tensors_type = "float";
  nvfp4.compressed_tensors_bits = 4;
  nvfp4.compressed_tensors_format = "nvfp4-pack-quantized";
  rows.push_back(std::move(nvfp4));

  NumberFormat int4;
  int4.name = "int4";
  int4.storage = DType::kU8;
  int4.max_value = 7.0f;
  int4.not_served = std::string("has int4 weights, which no quant method serves") + kServedInstead;
  rows.push_back(std::move(int4));

  NumberFormat bf16;  // the sentinel: not quantized
  bf16.name = "bf16";
  bf16.storage = DType::kBF16;
  bf16.not_served =
      std::string("keeps bf16 weights (not quantized), which no quant method serves") +
      kServedInstead;
  bf16.physical = lower_full_precision;
  rows.push_back(std::move(bf16));
  return rows;
}

struct Table {
  std::mutex mutex;
  // A deque never moves its elements: references handed out stay valid.
  std::deque<NumberFormat> rows;
};

Table& table() {
  static Table* instance = [] {
    auto* t = new Table;
    t->rows = builtin_rows();
    for (size_t i = 0; i < t->rows.size(); ++i) t->rows[i].id = static_cast<QDType>(i);
    return t;
  }();
  return *instance;
}

std::string registered_names(const std::deque<NumberFormat>& rows) {
  std::string names;
  for (const NumberFormat& row : rows) names += (names.empty() ? "" : ", ") + row.name;
  return names;
}

}  // namespace

bool NumberFormat::fuses_norm_quant_on(Device device) const {
  if (device.is_cuda()) return cuda_fused_producers;
  return cpu_fused.layer_norm_quant != nullptr &&
         cpu_fused.add_layer_norm_residual_quant != nullptr;
}

bool NumberFormat::fuses_quantizing_epilogue_on(Device device) const {
  if (device.is_cuda()) return cuda_fused_producers;
  return cpu_fused.quantize_epilogue_static != nullptr;
}

const NumberFormat& number_format(QDType format) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const auto index = static_cast<size_t>(format);
  OASR_CHECK(index < t.rows.size(), kUnsupported, "unknown number format #", index,
             " (registered: ", registered_names(t.rows), ")");
  return t.rows[index];
}

const NumberFormat* find_number_format(std::string_view name) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (const NumberFormat& row : t.rows) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

std::vector<QDType> number_formats() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<QDType> ids;
  for (const NumberFormat& row : t.rows) ids.push_back(row.id);
  return ids;
}

std::string convolution_format_names() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::string names;
  for (const NumberFormat& row : t.rows) {
    if (row.serves_convolution) names += (names.empty() ? "" : "/") + row.name;
  }
  return names;
}

QDType register_number_format(NumberFormat row) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  OASR_CHECK(!row.name.empty(), kInvalidArgument, "register_number_format: a format needs a name");
  for (const NumberFormat& existing : t.rows) {
    OASR_CHECK(existing.name != row.name, kInvalidArgument, "number format '", row.name,
               "' is registered twice");
  }
  OASR_CHECK(t.rows.size() < 255, kInvalidArgument, "number format '", row.name,
             "': the table holds at most 255 formats");
  OASR_CHECK(row.served() == false || (row.scale_of_amax && row.quantize_row && row.round_to_grid &&
                                       row.dequantize && row.cpu_kernels),
             kInvalidArgument, "number format '", row.name, "' is served by method '", row.method,
             "' but lacks its scale rule, reference quantize / dequantize or CPU kernels");
  row.id = static_cast<QDType>(t.rows.size());
  t.rows.push_back(std::move(row));
  return t.rows.back().id;
}

}  // namespace oasr::quant
