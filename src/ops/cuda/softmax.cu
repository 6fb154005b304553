#include "ops/cuda/softmax.h"

#include "core/activations.h"
#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// Where the mask element of x's element `flat` (row-major) lives.
struct MaskIndexer {
  const uint8_t* data = nullptr;  // null: nothing masked
  int rank = 0;
  int64_t sizes[kMaxMaskRank] = {};    // x's shape
  int64_t strides[kMaxMaskRank] = {};  // mask step per x dimension, 0 where broadcast
  int64_t axis_stride = 0;             // mask step along the softmax dimension

  __device__ int64_t offset_of(int64_t flat) const {
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t index = flat % sizes[d];
      flat /= sizes[d];
      offset += index * strides[d];
    }
    return offset;
  }
  __device__ bool kept(int64_t base, int64_t l) const {
    return data == nullptr || data[base + l * axis_stride] != 0;
  }
};

// One block shape for every row length: element l is summed by thread
// l % kRowThreads in order, then the fixed block tree. Masked elements are
// skipped, so a row's bits do not depend on how far it is padded (batch
// invariance; ops/cuda/softmax.h).
constexpr int kRowThreads = 128;

__device__ __forceinline__ float row_exp(float value, float row_max) {
  return act::exp_f32(__fsub_rn(value, row_max));
}

// inner == 1: one block per row of `length` contiguous elements.
template <typename T>
__global__ void softmax_row_kernel(const T* x, MaskIndexer mask, T* out, int64_t rows,
                                   int64_t length) {
  __shared__ float scratch[32];
  const float kNegInf = -__int_as_float(0x7f800000);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = x + row * length;
    T* dst = out + row * length;
    const int64_t mask_base = mask.data != nullptr ? mask.offset_of(row * length) : 0;

    float local_max = kNegInf;
    float local_any = 0.0f;
    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      if (!mask.kept(mask_base, l)) continue;
      local_any = 1.0f;
      local_max = nan_max(local_max, to_float(src[l]));
    }
    const float row_max = block_reduce(local_max, NanMaxOp{}, kNegInf, scratch);
    if (mask.data != nullptr && block_reduce(local_any, NanMaxOp{}, 0.0f, scratch) == 0.0f) {
      for (int64_t l = threadIdx.x; l < length; l += blockDim.x) dst[l] = from_float<T>(0.0f);
      continue;  // the whole block takes this branch: the reduction is uniform
    }

    float local_sum = 0.0f;
    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      if (mask.kept(mask_base, l))
        local_sum = __fadd_rn(local_sum, row_exp(to_float(src[l]), row_max));
    }
    const float total = block_reduce(local_sum, SumOp{}, 0.0f, scratch);

    for (int64_t l = threadIdx.x; l < length; l += blockDim.x) {
      const float p =
          mask.kept(mask_base, l) ? __fdiv_rn(row_exp(to_float(src[l]), row_max), total) : 0.0f;
      dst[l] = from_float<T>(p);
    }
  }
}

// inner > 1 (softmax along a dimension other than the last): one thread per
// (outer, inner) column, walking its `length` elements sequentially.
template <typename T>
__global__ void softmax_column_kernel(const T* x, MaskIndexer mask, T* out, int64_t outer,
                                      int64_t length, int64_t inner) {
  const float kNegInf = -__int_as_float(0x7f800000);
  const int64_t columns = outer * inner;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner;
    const int64_t base = o * length * inner + (c - o * inner);
    const int64_t mask_base = mask.data != nullptr ? mask.offset_of(base) : 0;

    float row_max = kNegInf;
    bool any_kept = false;
    for (int64_t l = 0; l < length; ++l) {
      if (!mask.kept(mask_base, l)) continue;
      any_kept = true;
      row_max = nan_max(row_max, to_float(x[base + l * inner]));
    }
    if (!any_kept) {
      for (int64_t l = 0; l < length; ++l) out[base + l * inner] = from_float<T>(0.0f);
      continue;
    }
    float total = 0.0f;
    for (int64_t l = 0; l < length; ++l) {
      if (mask.kept(mask_base, l))
        total = __fadd_rn(total, row_exp(to_float(x[base + l * inner]), row_max));
    }
    for (int64_t l = 0; l < length; ++l) {
      const int64_t at = base + l * inner;
      const float p =
          mask.kept(mask_base, l) ? __fdiv_rn(row_exp(to_float(x[at]), row_max), total) : 0.0f;
      out[at] = from_float<T>(p);
    }
  }
}

}  // namespace

void softmax(const Tensor& x, const Tensor& mask, const std::vector<int64_t>& mask_strides,
             int64_t axis, const Tensor& out) {
  const char* op = mask.defined() ? "masked_softmax" : "softmax";
  if (x.numel() == 0) return;
  MaskIndexer indexer;
  if (mask.defined()) {
    OASR_CHECK(x.dim() <= kMaxMaskRank, kUnsupported, "masked_softmax: the CUDA body indexes a ",
               "broadcast mask through at most ", kMaxMaskRank, " dimensions, x is ",
               shape_str(x.shape()), "; reshape x and mask to fewer dimensions");
    indexer.data = static_cast<const uint8_t*>(mask.raw_data());
    indexer.rank = static_cast<int>(x.dim());
    for (int64_t d = 0; d < x.dim(); ++d) {
      indexer.sizes[d] = x.size(d);
      indexer.strides[d] = mask_strides[static_cast<size_t>(d)];
    }
    indexer.axis_stride = mask_strides[static_cast<size_t>(axis)];
  }
  const int64_t length = x.size(axis);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  int64_t inner_span = 1;
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner_span *= x.size(d);

  use_device(x.device().index);
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    if (inner_span == 1) {
      softmax_row_kernel<T><<<grid_for_rows(outer), kRowThreads, 0, current_stream()>>>(
          src, indexer, dst, outer, length);
    } else {
      softmax_column_kernel<T>
          <<<grid_for(outer * inner_span), kThreadsPerBlock, 0, current_stream()>>>(
              src, indexer, dst, outer, length, inner_span);
    }
  });
  check_launch(op);
}

}  // namespace oasr::ops::cuda
