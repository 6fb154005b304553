// Strided copy on one CUDA device: the GPU twin of the host index walk in
// Tensor::copy_ (core/tensor.cc). Every element is moved as raw bits, so the
// result is identical to the CPU walk whatever the dtype.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/stream.h"
#include "core/error.h"

namespace oasr {

namespace {

constexpr int kMaxStridedRank = 8;

struct Dim {
  int64_t size;
  int64_t dst_stride;
  int64_t src_stride;
};

struct StridedLayout {
  int rank;
  int64_t shape[kMaxStridedRank];
  int64_t dst_strides[kMaxStridedRank];
  int64_t src_strides[kMaxStridedRank];
};

// One thread per element (grid-stride): the flat row-major index is split
// into coordinates from the innermost dimension outwards.
template <typename Word, typename Index>
__global__ void strided_copy_kernel(Word* dst, const Word* src, StridedLayout layout, Index n) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    Index rest = i;
    Index dst_offset = 0;
    Index src_offset = 0;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const Index size = static_cast<Index>(layout.shape[d]);
      const Index coord = rest % size;
      rest /= size;
      dst_offset += coord * static_cast<Index>(layout.dst_strides[d]);
      src_offset += coord * static_cast<Index>(layout.src_strides[d]);
    }
    dst[dst_offset] = src[src_offset];
  }
}

// Drops size-1 dimensions and merges neighbours that are laid out
// back-to-back in both tensors, so a transpose of a [B, H, T, D] tensor walks
// 3 dimensions, and ranks above the kernel's limit often fit.
std::vector<Dim> coalesce(std::vector<Dim> dims) {
  std::vector<Dim> kept;
  for (const Dim& dim : dims) {
    if (dim.size != 1) kept.push_back(dim);
  }
  std::vector<Dim> merged;  // innermost first while building
  for (size_t i = kept.size(); i-- > 0;) {
    const Dim& dim = kept[i];
    if (!merged.empty()) {
      Dim& inner = merged.back();
      if (dim.dst_stride == inner.dst_stride * inner.size &&
          dim.src_stride == inner.src_stride * inner.size) {
        inner.size *= dim.size;
        continue;
      }
    }
    merged.push_back(dim);
  }
  return {merged.rbegin(), merged.rend()};
}

bool aligned(const void* ptr, size_t alignment) {
  return reinterpret_cast<uintptr_t>(ptr) % alignment == 0;
}

template <typename Word>
void launch(void* dst, const void* src, const StridedLayout& layout, int64_t n, bool index32) {
  constexpr int kThreads = 256;
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned int blocks = static_cast<unsigned int>(wanted < 65535 * 8 ? wanted : 65535 * 8);
  auto* out = static_cast<Word*>(dst);
  const auto* in = static_cast<const Word*>(src);
  if (index32) {
    strided_copy_kernel<Word, uint32_t>
        <<<blocks, kThreads, 0, cuda_current_stream()>>>(out, in, layout, static_cast<uint32_t>(n));
  } else {
    strided_copy_kernel<Word, int64_t>
        <<<blocks, kThreads, 0, cuda_current_stream()>>>(out, in, layout, n);
  }
  OASR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// Called by the CUDA backend with the target device already current.
void cuda_copy_strided(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                       const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                       size_t element_size) {
  OASR_CHECK(shape.size() == dst_strides.size() && shape.size() == src_strides.size(), kInternal,
             "copy_strided: shape and strides of different ranks");
  OASR_CHECK(element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8,
             kInternal, "copy_strided: element size ", element_size, " is not 1, 2, 4 or 8");
  int64_t n = 1;
  std::vector<Dim> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    n *= shape[d];
    dims.push_back({shape[d], dst_strides[d], src_strides[d]});
  }
  if (n == 0) return;

  // Elements are moved as one word of their size; a pointer not aligned to
  // it (a view at an odd byte offset) is copied byte by byte instead, as an
  // extra innermost dimension of element_size bytes.
  size_t word = element_size;
  if (!aligned(dst, word) || !aligned(src, word)) {
    for (Dim& dim : dims) {
      dim.dst_stride *= static_cast<int64_t>(element_size);
      dim.src_stride *= static_cast<int64_t>(element_size);
    }
    dims.push_back({static_cast<int64_t>(element_size), 1, 1});
    n *= static_cast<int64_t>(element_size);
    word = 1;
  }
  dims = coalesce(std::move(dims));
  // Move a contiguous innermost run in words of up to 16 bytes (a head of 64
  // float16 values is eight 16-byte words): same bits, a fraction of the
  // memory transactions and index arithmetic.
  if (!dims.empty() && dims.back().dst_stride == 1 && dims.back().src_stride == 1) {
    for (const size_t wide : {size_t{16}, size_t{8}, size_t{4}}) {
      if (wide <= word) break;
      const int64_t ratio = static_cast<int64_t>(wide / word);
      bool fits = dims.back().size % ratio == 0 && aligned(dst, wide) && aligned(src, wide);
      for (size_t d = 0; fits && d + 1 < dims.size(); ++d) {
        fits = dims[d].dst_stride % ratio == 0 && dims[d].src_stride % ratio == 0;
      }
      if (!fits) continue;
      for (size_t d = 0; d + 1 < dims.size(); ++d) {
        dims[d].dst_stride /= ratio;
        dims[d].src_stride /= ratio;
      }
      dims.back().size /= ratio;
      n /= ratio;
      word = wide;
      break;
    }
  }
  OASR_CHECK(dims.size() <= kMaxStridedRank, kUnsupported, "copy_ on CUDA: the view walks ",
             dims.size(), " non-mergeable dimensions, more than the ", kMaxStridedRank,
             " the strided copy kernel serves; copy in parts (narrow) or reshape first");

  StridedLayout layout{};
  layout.rank = static_cast<int>(dims.size());
  int64_t dst_span = 0;  // largest offset the walk reaches, to pick the index width
  int64_t src_span = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    layout.shape[d] = dims[d].size;
    layout.dst_strides[d] = dims[d].dst_stride;
    layout.src_strides[d] = dims[d].src_stride;
    dst_span += (dims[d].size - 1) * dims[d].dst_stride;
    src_span += (dims[d].size - 1) * dims[d].src_stride;
  }
  // 32-bit index arithmetic is several times cheaper; it is exact while n,
  // every offset and the grid-stride increment stay below 2^31.
  constexpr int64_t kIndex32Limit = int64_t{1} << 31;
  const bool index32 = n < kIndex32Limit && dst_span < kIndex32Limit && src_span < kIndex32Limit;
  switch (word) {
    case 1:
      launch<uint8_t>(dst, src, layout, n, index32);
      break;
    case 2:
      launch<uint16_t>(dst, src, layout, n, index32);
      break;
    case 4:
      launch<uint32_t>(dst, src, layout, n, index32);
      break;
    case 8:
      launch<uint64_t>(dst, src, layout, n, index32);
      break;
    default:
      launch<uint4>(dst, src, layout, n, index32);
      break;
  }
}

}  // namespace oasr
