// The native Hopper scaled GEMMs (scaled_mm_native.h): CUTLASS 3.x sm90a
// kernels -- TMA loads, wgmma, a persistent tile scheduler, ping-pong or
// cooperative warpgroups -- whose epilogue is an EVT tree of our own compute
// nodes applying quant/numerics.h's epilogue, so they store the bits the CPU
// reference and the mma.sync lane store:
//   t = w_scale[n] * float(acc); t = a_scale[m] * t; t = t + bias[n];
//   y = act(t), rounded once to the served dtype (or, quantizing, to 8 bits
//   at the consumer's static multiplier).
// CUTLASS's stock multiply-add nodes contract to fma; ours call
// int8_epilogue / fp8_epilogue, whose mul_rn products cannot be contracted.
//
// int8 accumulates exactly in int32. e4m3 uses CUTLASS's promoting mainloop:
// every 128-deep K tile (4 wgmma k32 steps) is summed on the tensor core from
// zero and added to the fp32 register accumulator in K order, so every tile
// shape and batch composition gives the same bits (K tiles are always 128
// deep: the promotion interval is fixed in elements, not per config).
//
// Included only by the per-(format, output) instantiation files, which the
// build compiles for sm_90a alone.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp>
#include <cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "core/error.h"
#include "quant/kernels/cuda/native/scaled_mm_native.h"
#include "quant/kernels/cuda/scaled_mm_epilogue.cuh"
#include "quant/numerics.h"

namespace oasr::quant::cuda::native {

using cute::_1;
using cute::_128;
using cute::_2;
using cute::_256;
using cute::_64;
using cute::Shape;

// ---- our epilogue nodes -------------------------------------------------------

// fp32 y -> the stored element, rounded once with the intrinsics the mma.sync
// epilogue uses (scaled_mm_epilogue.cuh), not CUTLASS's converters.
template <class Out>
struct StoreServed;
template <>
struct StoreServed<float> {
  __device__ static float apply(float y) { return y; }
};
template <>
struct StoreServed<cutlass::half_t> {
  __device__ static cutlass::half_t apply(float y) {
    return cutlass::half_t::bitcast(__half_as_ushort(__float2half_rn(y)));
  }
};
template <>
struct StoreServed<cutlass::bfloat16_t> {
  __device__ static cutlass::bfloat16_t apply(float y) {
    return cutlass::bfloat16_t::bitcast(__bfloat16_as_ushort(__float2bfloat16_rn(y)));
  }
};

template <class Out>
struct StoreQuantized;
template <>
struct StoreQuantized<int8_t> {
  __device__ static int8_t apply(float x) { return quantize_int8(x); }
};
template <>
struct StoreQuantized<cutlass::float_e4m3_t> {
  __device__ static cutlass::float_e4m3_t apply(float x) {
    return cutlass::float_e4m3_t::bitcast(quantize_e4m3(x));
  }
};

// The affine part of quant/numerics.h's int8_epilogue / fp8_epilogue:
//   t = w_scale * acc; t = a_scale * t; t = t + bias
// (int8: acc arrives as float(int32 acc), the conversion int8_epilogue
// applies first). The activation follows, as act::apply, in
// apply_activation_in_place.
__device__ __forceinline__ float scaled_affine(float acc, float a_scale, float w_scale,
                                               float bias) {
  float t = act::detail::mul_rn(w_scale, acc);
  t = act::detail::mul_rn(a_scale, t);
  return t + bias;
}

// act::apply on each value. Not inlined: unrolled over a fragment, one copy
// of every activation's code per element made the kernels' instruction
// stream overflow the instruction cache (Nsight Compute: a third of all
// stall cycles on instruction fetch, with no activation even applied).
inline __device__ __noinline__ void apply_activation_in_place(Activation act, float* values,
                                                              int count) {
  for (int i = 0; i < count; ++i) values[i] = act::apply(act, values[i]);
}

// Children: acc, a_scale[m], w_scale[n], bias[n] (-0.0 when absent).
// CUTLASS also instantiates Fn<float> (to find Arguments), so the fragment
// size is the call operator's own parameter.
struct ServedEpilogueArguments {
  Activation act = Activation::kNone;
};
struct QuantizingEpilogueArguments {
  Activation act = Activation::kNone;
  detail::ServedKind served = detail::ServedKind::kF32;
};

// y = the epilogue of quant/numerics.h for each element, rounded by `store`.
// Without an activation, or with swish or relu, every value stays in
// registers; any other activation sends the fragment through memory to the
// one shared activation body.
template <int kN, class Store>
__device__ __forceinline__ void epilogue_values(cutlass::Array<float, kN> const& acc,
                                                cutlass::Array<float, kN> const& a_scale,
                                                cutlass::Array<float, kN> const& w_scale,
                                                cutlass::Array<float, kN> const& bias,
                                                Activation act, Store&& store) {
  switch (act) {
    case Activation::kNone:
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kN; ++i) {
        store(i, scaled_affine(acc[i], a_scale[i], w_scale[i], bias[i]));
      }
      return;
    // The Conformer's activations inline (act::apply's own bodies, so the
    // same bits): through the shared body a swish GEMM ran at a sixth of
    // the speed of the plain one (32768x2048x256: 498 against 80 us).
    case Activation::kSwish:
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kN; ++i) {
        store(i, act::swish(scaled_affine(acc[i], a_scale[i], w_scale[i], bias[i])));
      }
      return;
    case Activation::kRelu:
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kN; ++i) {
        store(i, act::relu(scaled_affine(acc[i], a_scale[i], w_scale[i], bias[i])));
      }
      return;
    default:
      break;
  }
  float t[kN];
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kN; ++i) t[i] = scaled_affine(acc[i], a_scale[i], w_scale[i], bias[i]);
  apply_activation_in_place(act, t, kN);
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kN; ++i) store(i, t[i]);
}

template <class Out>
struct ServedEpilogue {
  template <class>
  struct Fn {
    using Arguments = ServedEpilogueArguments;
    template <int kN>
    __device__ cutlass::Array<Out, kN> operator()(cutlass::Array<float, kN> const& acc,
                                                  cutlass::Array<float, kN> const& a_scale,
                                                  cutlass::Array<float, kN> const& w_scale,
                                                  cutlass::Array<float, kN> const& bias,
                                                  Arguments const& args) const {
      cutlass::Array<Out, kN> out;
      epilogue_values(acc, a_scale, w_scale, bias, args.act,
                      [&](int i, float y) { out[i] = StoreServed<Out>::apply(y); });
      return out;
    }
  };
};

// The quantizing epilogue of a GEMM-chain producer: children acc, a_scale,
// w_scale, bias, out_multiplier[n]; q = quantize(float(y rounded to served) *
// multiplier).
template <class Out>
struct QuantizingEpilogue {
  template <class>
  struct Fn {
    using Arguments = QuantizingEpilogueArguments;
    template <int kN>
    __device__ cutlass::Array<Out, kN> operator()(cutlass::Array<float, kN> const& acc,
                                                  cutlass::Array<float, kN> const& a_scale,
                                                  cutlass::Array<float, kN> const& w_scale,
                                                  cutlass::Array<float, kN> const& bias,
                                                  cutlass::Array<float, kN> const& multiplier,
                                                  Arguments const& args) const {
      cutlass::Array<Out, kN> out;
      epilogue_values(acc, a_scale, w_scale, bias, args.act, [&](int i, float y) {
        const float v = detail::round_to_served(y, args.served);
        out[i] = StoreQuantized<Out>::apply(act::detail::mul_rn(v, multiplier[i]));
      });
      return out;
    }
  };
};

// ---- the kernel type ------------------------------------------------------------

template <int kTileM, int kTileN, int kClusterM, int kClusterN, bool kCooperative>
struct Sm90Config {
  static constexpr int tile_m = kTileM;
  static constexpr int tile_n = kTileN;
  static constexpr int cluster_m = kClusterM;
  static constexpr int cluster_n = kClusterN;
  static constexpr bool cooperative = kCooperative;
};

template <class Operand>
struct OperandTraits;
template <>
struct OperandTraits<int8_t> {
  using Accumulator = int32_t;
  static constexpr bool kFp8 = false;
};
template <>
struct OperandTraits<cutlass::float_e4m3_t> {
  using Accumulator = float;
  static constexpr bool kFp8 = true;
};

// Out: float, half_t, bfloat16_t (served) or the operand type (quantizing).
template <class Operand, class Out, class Config>
struct Sm90Gemm {
  using Accumulator = typename OperandTraits<Operand>::Accumulator;
  static constexpr bool kFp8 = OperandTraits<Operand>::kFp8;
  static constexpr bool kQuantizing = std::is_same_v<Out, Operand>;

  using TileShape = Shape<cute::Int<Config::tile_m>, cute::Int<Config::tile_n>, _128>;
  using ClusterShape = Shape<cute::Int<Config::cluster_m>, cute::Int<Config::cluster_n>, _1>;
  using MainloopSchedule =
      std::conditional_t<Config::cooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                         cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpilogueSchedule =
      std::conditional_t<Config::cooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                         cutlass::epilogue::TmaWarpSpecialized>;

  using LayoutA = cutlass::layout::RowMajor;     // A [M, K]
  using LayoutB = cutlass::layout::ColumnMajor;  // W [N, K] row-major is B [K, N] column-major
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignAB = 16;  // elements: 16 bytes of 8-bit operands
  static constexpr int kAlignD = 16 / sizeof(Out);

  using RowVector =
      cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float,
                                                  cute::Stride<cute::_0, _1, int64_t>>;
  using AScale = cutlass::epilogue::fusion::Sm90ColBroadcast<
      0, TileShape, float, float, cute::Stride<_1, cute::_0, int64_t>, /*Alignment=*/1>;
  using WScale = RowVector;
  using Bias = RowVector;
  using Multiplier = RowVector;
  using Acc = cutlass::epilogue::fusion::Sm90AccFetch;
  using ServedNode =
      cutlass::epilogue::fusion::Sm90Compute<ServedEpilogue<Out>::template Fn, Out, float,
                                             cutlass::FloatRoundStyle::round_to_nearest>;
  using QuantizingNode =
      cutlass::epilogue::fusion::Sm90Compute<QuantizingEpilogue<Out>::template Fn, Out, float,
                                             cutlass::FloatRoundStyle::round_to_nearest>;
  using Tree = std::conditional_t<
      kQuantizing,
      cutlass::epilogue::fusion::Sm90EVT<QuantizingNode, Acc, AScale, WScale, Bias, Multiplier>,
      cutlass::epilogue::fusion::Sm90EVT<ServedNode, Acc, AScale, WScale, Bias>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, float, void, LayoutD, kAlignD,
      Out, LayoutD, kAlignD, EpilogueSchedule, Tree>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Operand, LayoutA, kAlignAB, Operand,
      LayoutB, kAlignAB, Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                           CollectiveEpilogue, cutlass::gemm::PersistentScheduler>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Runs one configuration on `stream`. Shapes and alignment were checked by
// the caller (scaled_mm_native.cu); CUTLASS's can_implement is checked again.
template <class Operand, class Out, class Config>
void run_sm90_gemm(const ScaledMMArgs& args, cudaStream_t stream, int sm_count) {
  using G = Sm90Gemm<Operand, Out, Config>;
  using Device = typename G::Device;
  const int m = static_cast<int>(args.m), n = static_cast<int>(args.n),
            k = static_cast<int>(args.k);
  using StrideA = typename G::Kernel::StrideA;
  using StrideB = typename G::Kernel::StrideB;
  using StrideD = typename G::Kernel::StrideD;
  const StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(m, k, 1));
  const StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(n, k, 1));
  const StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(m, n, 1));

  typename Device::Arguments arguments{};
  arguments.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  arguments.problem_shape = {m, n, k, 1};
  arguments.mainloop.ptr_A = static_cast<const Operand*>(args.a);
  arguments.mainloop.dA = stride_a;
  arguments.mainloop.ptr_B = static_cast<const Operand*>(args.w);
  arguments.mainloop.dB = stride_b;
  arguments.epilogue.ptr_C = nullptr;
  arguments.epilogue.dC = stride_d;
  arguments.epilogue.ptr_D = static_cast<Out*>(args.out);
  arguments.epilogue.dD = stride_d;
  const typename G::AScale::Arguments a_scale{args.a_scale, 1.0f, {}};
  const typename G::WScale::Arguments w_scale{args.w_scale, 1.0f, {}};
  const typename G::Bias::Arguments bias{args.bias, kNoBias, {}};
  if constexpr (G::kFp8) {
    // 4 wgmma k32 steps = one 128-deep K tile summed on the tensor core
    // before each fp32 add: the fixed step every configuration shares.
    arguments.mainloop.mma_promotion_interval = 4;
  }
  if constexpr (G::kQuantizing) {
    const typename G::Multiplier::Arguments multiplier{args.out_multiplier, 1.0f, {}};
    const detail::ServedKind served = detail::make_epilogue_params(args).served;
    arguments.epilogue.thread = {{}, a_scale, w_scale, bias, multiplier, {args.act, served}};
  } else {
    arguments.epilogue.thread = {{}, a_scale, w_scale, bias, {args.act}};
  }
  arguments.hw_info.device_id = args.device_index;
  arguments.hw_info.sm_count = sm_count;

  OASR_CHECK(Device::can_implement(arguments) == cutlass::Status::kSuccess, kInvalidArgument,
             "native scaled GEMM: CUTLASS cannot run M=", m, " N=", n, " K=", k,
             " with this configuration (alignment or shape)");
  using Kernel = typename G::Kernel;
  void* workspace = native_workspace(args.device_index, Kernel::get_workspace_size(arguments));
  OASR_CHECK(
      Kernel::initialize_workspace(arguments, workspace, stream) == cutlass::Status::kSuccess,
      kInternal, "native scaled GEMM: workspace initialization failed");
  // The shared-memory opt-in holds per kernel and device for the process, so
  // once per device (the adapter's initialize() repeats it on every launch,
  // a host cost that small GEMMs feel).
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> opted_in[kMaxDevices] = {};
  const bool cacheable = args.device_index >= 0 && args.device_index < kMaxDevices;
  if (!cacheable || !opted_in[args.device_index].load()) {
    const int bytes = Kernel::SharedStorageSize;
    if (bytes >= (48 << 10)) {
      const cudaError_t opt_in = cudaFuncSetAttribute(
          cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      OASR_CHECK(opt_in == cudaSuccess, kInternal,
                 "native scaled GEMM: cannot opt in to the kernel's shared memory: ",
                 cudaGetErrorString(opt_in));
    }
    if (cacheable) opted_in[args.device_index].store(true);
  }
  typename Kernel::Params params = Kernel::to_underlying_arguments(arguments, workspace);
  const cutlass::Status status = Device::run(params, stream);
  OASR_CHECK(status == cutlass::Status::kSuccess, kInternal,
             "native scaled GEMM: CUTLASS launch failed: ", cutlassGetStatusString(status));
}

}  // namespace oasr::quant::cuda::native
