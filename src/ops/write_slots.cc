#include "ops/write_slots.h"

#include <cstring>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cuda/write_slots.h"
#include "ops/front_checks.h"

namespace oasr::ops {

void write_slots(const Tensor& x, Tensor store, const Tensor& slots) {
  constexpr const char* kOp = "write_slots";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "store", store);
  detail::check_defined(kOp, "slots", slots);
  const Device device = detail::serving_device(kOp, {{"x", x}, {"store", store}, {"slots", slots}});
  detail::check_rank(kOp, "x", x, 2);
  detail::check_rank(kOp, "store", store, 2);
  detail::check_rank(kOp, "slots", slots, 1);
  OASR_CHECK(x.dtype() == store.dtype(), kInvalidArgument, kOp, ": x is ", dtype_name(x.dtype()),
             " but the store is ", dtype_name(store.dtype()));
  OASR_CHECK(slots.dtype() == DType::kI64 && slots.size(0) == x.size(0) && slots.is_contiguous(),
             kInvalidArgument, kOp, ": slots must be a contiguous int64 [", x.size(0), "], got ",
             slots.str());
  OASR_CHECK(x.size(1) == store.size(1) && x.strides()[1] == 1 && store.strides()[1] == 1,
             kInvalidArgument, kOp,
             ": x [M, W] and store [S, W] need one W with rows contiguous, "
             "got ",
             x.str(), " and ", store.str());
  const int64_t rows = x.size(0);
  const size_t row_bytes = static_cast<size_t>(x.size(1)) * x.element_size();
  on_device(
      kOp, device,
      [&] {
        const auto* from = static_cast<const unsigned char*>(x.raw_data());
        auto* to = static_cast<unsigned char*>(store.raw_data());
        const size_t x_stride = static_cast<size_t>(x.strides()[0]) * x.element_size();
        const size_t store_stride = static_cast<size_t>(store.strides()[0]) * x.element_size();
        for (int64_t m = 0; m < rows; ++m) {
          const int64_t slot = slots.data<int64_t>()[m];
          OASR_CHECK(slot >= 0 && slot < store.size(0), kInvalidArgument, kOp, ": slots[", m,
                     "] = ", slot, " is outside the store's ", store.size(0), " rows");
          std::memcpy(to + static_cast<size_t>(slot) * store_stride,
                      from + static_cast<size_t>(m) * x_stride, row_bytes);
        }
      },
      [&](auto) { cuda::write_slots(x, store, slots); });
}

}  // namespace oasr::ops
