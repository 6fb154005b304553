// The native lane (quant/lanes): CUTLASS 3.x sm90a scaled GEMMs
// (native/sm90_gemm.cuh) with our epilogue, one per compiled configuration
// (native/sm90_configs.h), picked per shape from a tuning table measured on
// the device (native/sm90_tuning_table.inc). Host-only header.
//
// Shapes it runs: K % 16 == 0 and N % 8 == 0 (the lanes' contract) for a
// served output; the quantizing epilogue stores 8-bit rows through TMA and
// needs N % 16 == 0 -- another N runs the mma.sync quantizing kernel
// (int8: the same bits; the choice depends on N alone, never on M, so a row
// gets the same kernel in every batch).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "quant/kernels/cuda/scaled_mm_cuda.h"

namespace oasr::quant::cuda {

struct NativeConfig {
  int index = -1;  // position in native/sm90_configs.h
  int tile_m = 0;
  int tile_n = 0;
  int cluster_m = 0;
  int cluster_n = 0;
  bool cooperative = false;
  // e.g. "sm90_s8_pingpong_64x128x128_c1x1"
  std::string name(QDType format) const;
};

// Every compiled configuration (empty in a build without sm_90a).
std::vector<NativeConfig> native_configs();
// The tuning table's configuration for one shape and epilogue activation.
NativeConfig choose_native_config(QDType format, int64_t m, int64_t n, int64_t k, DType served,
                                  bool quantizing, Activation act = Activation::kNone);
// Whether device `device_index` runs the native kernels for `format`: an
// sm_90 GPU and a build that compiled sm_90a. On false `why` says what is missing.
bool native_supported(QDType format, int device_index, std::string* why);
// Whether the native kernels take this GEMM (else scaled_mm_native runs the
// mma.sync kernel for it): depends on N and the output kind, never on M.
bool native_takes(const ScaledMMArgs& args);
// Whether scaled_mm_native(args) serves a GEMM the native kernels take with
// them rather than mma.sync: false where mma.sync measured faster with the
// same bits (int8 with a swish epilogue up to M = 8192; int8 lanes agree bit
// for bit, so only int8 may switch by M).
bool native_preferred(const ScaledMMArgs& args);
// The kernel name scaled_mm_native runs for one shape (for the report).
std::string native_kernel_name(QDType format, int64_t m, int64_t n, int64_t k);
void scaled_mm_native(const ScaledMMArgs& args);
// A named configuration (tests and the sweep): every configuration gives the same bits.
void scaled_mm_native(const ScaledMMArgs& args, const NativeConfig& config);

namespace native {
// A device buffer of at least `bytes` for CUTLASS's workspace (null for 0),
// grown once and kept; CUTLASS's persistent GEMMs without split-K ask none.
void* native_workspace(int device_index, size_t bytes);
}  // namespace native

}  // namespace oasr::quant::cuda
