#include "ops/step_tokens.h"

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cuda/step_tokens.h"
#include "ops/front_checks.h"

namespace oasr::ops {

Tensor positions_after(const Tensor& past_tokens, int64_t n) {
  constexpr const char* kOp = "positions_after";
  detail::check_past_tokens(kOp, past_tokens);
  OASR_CHECK(n >= 0, kInvalidArgument, kOp, ": n must be >= 0, got ", n);
  const Device device = past_tokens.device();
  Tensor ids = Tensor::empty({n}, DType::kI64, device);
  on_device(
      kOp, device,
      [&] {
        const int64_t past = past_tokens.data<int32_t>()[0];
        for (int64_t i = 0; i < n; ++i) ids.data<int64_t>()[i] = past + i;
      },
      [&](auto) { cuda::positions_after(past_tokens, ids); });
  return ids;
}

void write_tokens_at(const Tensor& x, Tensor store, const Tensor& past_tokens) {
  constexpr const char* kOp = "write_tokens_at";
  detail::check_defined(kOp, "x", x);
  detail::check_defined(kOp, "store", store);
  detail::check_past_tokens(kOp, past_tokens);
  const Device device =
      detail::serving_device(kOp, {{"x", x}, {"store", store}, {"past_tokens", past_tokens}});
  detail::check_rank(kOp, "x", x, 4);
  detail::check_rank(kOp, "store", store, 4);
  detail::check_float(kOp, "x", x, device);
  detail::check_same_dtype(kOp, {{"x", x}, {"store", store}});
  const int64_t n = x.size(1);
  const auto& ss = store.strides();
  OASR_CHECK(store.size(0) == x.size(0) && store.size(1) >= n && store.size(2) == x.size(2) &&
                 store.size(3) == x.size(3) && ss[3] == 1 && ss[2] == x.size(3) &&
                 ss[1] == x.size(2) * x.size(3),
             kInvalidArgument, kOp, ": store must be [", x.size(0), ", capacity >= ", n, ", ",
             x.size(2), ", ", x.size(3), "] with each row's tokens contiguous, got ", store.str());
  on_device(
      kOp, device,
      [&] {
        const int64_t at = past_tokens.data<int32_t>()[0];
        OASR_CHECK(at >= 0 && at + n <= store.size(1), kInvalidArgument, kOp, ": tokens ", at, "..",
                   at + n - 1, " are outside the store's ", store.size(1), " tokens");
        store.narrow(1, at, n).copy_(x);
      },
      [&](auto) { cuda::write_tokens_at(x.contiguous(), store, past_tokens); });
}

}  // namespace oasr::ops
