#include "ops/cuda/write_slots.h"

#include "ops/cuda/cuda_common.cuh"

namespace oasr::ops::cuda {
namespace {

// One block a row; Unit is the widest word that divides the row's bytes and
// both strides (16, 4 or 1 bytes).
template <typename Unit>
__global__ void write_slots_kernel(const Unit* x, int64_t x_stride, Unit* store,
                                   int64_t store_stride, int64_t store_rows, const int64_t* slots,
                                   int64_t units) {
  const int64_t m = blockIdx.x;
  const int64_t slot = slots[m];
  if (slot < 0 || slot >= store_rows) return;
  const Unit* from = x + m * x_stride;
  Unit* to = store + slot * store_stride;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) to[u] = from[u];
}

template <typename Unit>
void launch(const Tensor& x, const Tensor& store, const Tensor& slots, int64_t bytes,
            int64_t x_stride_bytes, int64_t store_stride_bytes) {
  const int64_t units = bytes / static_cast<int64_t>(sizeof(Unit));
  const int threads = static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, units)));
  write_slots_kernel<Unit><<<static_cast<unsigned int>(x.size(0)), threads, 0, current_stream()>>>(
      static_cast<const Unit*>(x.raw_data()), x_stride_bytes / static_cast<int64_t>(sizeof(Unit)),
      static_cast<Unit*>(store.raw_data()), store_stride_bytes / static_cast<int64_t>(sizeof(Unit)),
      store.size(0), slots.data<int64_t>(), units);
}

}  // namespace

void write_slots(const Tensor& x, const Tensor& store, const Tensor& slots) {
  if (x.size(0) == 0 || x.size(1) == 0) return;
  use_device(x.device().index);
  const auto element = static_cast<int64_t>(x.element_size());
  const int64_t bytes = x.size(1) * element;
  const int64_t x_stride = x.strides()[0] * element;
  const int64_t store_stride = store.strides()[0] * element;
  const auto fits = [&](int64_t unit) {
    return bytes % unit == 0 && x_stride % unit == 0 && store_stride % unit == 0 &&
           reinterpret_cast<uintptr_t>(x.raw_data()) % unit == 0 &&
           reinterpret_cast<uintptr_t>(store.raw_data()) % unit == 0;
  };
  if (fits(16)) {
    launch<uint4>(x, store, slots, bytes, x_stride, store_stride);
  } else if (fits(4)) {
    launch<uint32_t>(x, store, slots, bytes, x_stride, store_stride);
  } else {
    launch<uint8_t>(x, store, slots, bytes, x_stride, store_stride);
  }
  check_launch("write_slots");
}

}  // namespace oasr::ops::cuda
