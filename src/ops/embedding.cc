#include "ops/embedding.h"

#include <vector>

#include "core/device_dispatch.h"
#include "core/error.h"
#include "ops/cpu/embedding.h"
#include "ops/cuda/embedding.h"
#include "ops/front_checks.h"

namespace oasr::ops {
namespace {

// The ids as int64, each checked against the vocabulary size. Ids on a GPU
// are copied to the host for the check (they are few: tokens, not frames),
// so an id out of range is refused before any kernel reads the table.
std::vector<int64_t> checked_ids(const char* op, const Tensor& ids, int64_t vocab) {
  const Tensor ids_c = ids.to(Device::cpu()).contiguous();
  const int64_t count = ids_c.numel();
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = ids_c.dtype() == DType::kI64 ? ids_c.data<int64_t>()[i]
                                          : static_cast<int64_t>(ids_c.data<int32_t>()[i]);
    OASR_CHECK(out[i] >= 0 && out[i] < vocab, kInvalidArgument, op, ": id ", out[i],
               " (at flat position ", i, " of ids ", shape_str(ids.shape()),
               ") is outside the table's ", vocab, " rows [0, ", vocab, ")");
  }
  return out;
}

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& table) {
  constexpr const char* kOp = "embedding";
  detail::check_defined(kOp, "ids", ids);
  detail::check_defined(kOp, "table", table);
  const Device device = detail::serving_device(kOp, {{"ids", ids}, {"table", table}});
  OASR_CHECK(ids.dtype() == DType::kI64 || ids.dtype() == DType::kI32, kInvalidArgument, kOp,
             ": ids must be int64 or int32, got ", dtype_name(ids.dtype()));
  detail::check_float(kOp, "table", table, device);
  detail::check_rank(kOp, "table", table, 2);
  const int64_t vocab = table.size(0);
  const int64_t features = table.size(1);

  const std::vector<int64_t> rows = checked_ids(kOp, ids, vocab);
  Shape out_shape = ids.shape();
  out_shape.push_back(features);
  Tensor out = Tensor::empty(out_shape, table.dtype(), device);
  const Tensor table_c = table.contiguous();
  on_device(
      kOp, device,
      [&] {
        cpu::embedding_f32(rows.data(), static_cast<int64_t>(rows.size()), table_c.data<float>(),
                           features, out.data<float>());
      },
      [&](auto on) {
        const Tensor rows_on_device =
            Tensor::from_vector(rows, {static_cast<int64_t>(rows.size())}).to(device);
        cuda::embedding(rows_on_device.data<int64_t>(), static_cast<int64_t>(rows.size()),
                        table_c.raw_data(), vocab, features, out.raw_data(), table.dtype(),
                        on.device_index);
      });
  return out;
}

Tensor embedding_device_ids(const Tensor& ids, const Tensor& table) {
  constexpr const char* kOp = "embedding_device_ids";
  detail::check_defined(kOp, "ids", ids);
  detail::check_defined(kOp, "table", table);
  const Device device = detail::serving_device(kOp, {{"ids", ids}, {"table", table}});
  if (device.is_cpu()) return embedding(ids, table);  // the host reads its ids anyway
  OASR_CHECK(ids.dtype() == DType::kI64, kInvalidArgument, kOp, ": ids must be int64, got ",
             dtype_name(ids.dtype()));
  detail::check_float(kOp, "table", table, device);
  detail::check_rank(kOp, "table", table, 2);
  const int64_t vocab = table.size(0);
  const int64_t features = table.size(1);
  OASR_CHECK(vocab > 0 || ids.numel() == 0, kInvalidArgument, kOp,
             ": the table has no rows to gather from");
  Shape out_shape = ids.shape();
  out_shape.push_back(features);
  Tensor out = Tensor::empty(out_shape, table.dtype(), device);
  if (out.numel() == 0) return out;
  const Tensor ids_c = ids.contiguous();
  const Tensor table_c = table.contiguous();
  on_device(
      kOp, device, [] {},
      [&](auto on) {
        cuda::embedding(ids_c.data<int64_t>(), ids_c.numel(), table_c.raw_data(), vocab, features,
                        out.raw_data(), table.dtype(), on.device_index);
      });
  return out;
}

}  // namespace oasr::ops
