// The per-(operand, output) entry points of the generated native/sm90_*.cu
// files (native/sm90_instance.cu.in): run configuration `config` of
// native/sm90_configs.h. Internal to scaled_mm_native.cu.
#pragma once

#include <cuda_runtime.h>

#include "quant/kernels/cuda/scaled_mm_cuda.h"

namespace oasr::quant::cuda::native {

using Sm90LaunchFn = void (*)(const ScaledMMArgs& args, int config, cudaStream_t stream,
                              int sm_count);

void launch_sm90_s8_f32(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_s8_f16(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_s8_bf16(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_s8_q8(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_e4m3_f32(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_e4m3_f16(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_e4m3_bf16(const ScaledMMArgs&, int, cudaStream_t, int);
void launch_sm90_e4m3_q8(const ScaledMMArgs&, int, cudaStream_t, int);

}  // namespace oasr::quant::cuda::native
