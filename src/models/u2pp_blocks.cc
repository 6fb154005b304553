#include "models/u2pp_blocks.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/elementwise.h"

namespace oasr::models {

SinusoidalPositions::SinusoidalPositions(int64_t dim, int64_t max_len)
    : Module("PositionalEncoding"), dim_(dim), max_len_(max_len) {
  OASR_CHECK(dim > 0 && dim % 2 == 0, kInvalidArgument,
             "SinusoidalPositions: the width must be positive and even, got ", dim);
  register_parameter("pe", {1, max_len, dim}, DType::kF32, DTypePolicy::kFloating,
                     /*required=*/false);
  // WeNet: exp(arange(0, d, 2, float32) * -(log(10000) / d)); PyTorch casts
  // the Python scalar to float32 and rounds the product to float32 before
  // exp. exp in double then rounded gives the correctly rounded float.
  const float neg_log_ratio = static_cast<float>(-(std::log(10000.0) / static_cast<double>(dim)));
  frequencies_.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) * neg_log_ratio;
    frequencies_[static_cast<size_t>(i)] =
        static_cast<float>(std::exp(static_cast<double>(exponent)));
  }
}

Tensor SinusoidalPositions::rows(int64_t offset, int64_t count, DType dtype, Device device) const {
  OASR_CHECK(offset >= 0 && count >= 0 && offset + count <= max_len_, kInvalidArgument,
             "positional encoding: positions [", offset, ", ", offset + count,
             ") exceed the table of ", max_len_,
             " rows (WeNet's max_len); split the audio into shorter utterances");
  const ParameterSlot& table = slot("pe");
  if (table.value.defined()) {
    return table.value.slice(1, offset, offset + count).to(dtype).to(device);
  }
  Tensor out = Tensor::empty({1, count, dim_}, DType::kF32);
  float* dst = out.data<float>();
  for (int64_t p = 0; p < count; ++p) {
    const float position = static_cast<float>(offset + p);
    float* row = dst + p * dim_;
    for (int64_t i = 0; i < dim_ / 2; ++i) {
      const float angle = position * frequencies_[static_cast<size_t>(i)];
      row[2 * i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      row[2 * i + 1] = static_cast<float>(std::cos(static_cast<double>(angle)));
    }
  }
  return out.to(dtype).to(device);
}

GlobalCmvn::GlobalCmvn(int64_t dim) : Module("GlobalCMVN") {
  register_parameter("mean", {dim});
  register_parameter("istd", {dim});
}

Tensor GlobalCmvn::forward(const Tensor& x) const {
  // x - mean is exact as x + (-1) * mean; then one rounding for * istd, as in
  // PyTorch's (x - mean) * istd.
  return ops::mul(ops::add_scaled(x, param("mean"), -1.0f), param("istd"));
}

PositionwiseFeedForward::PositionwiseFeedForward(int64_t dim, int64_t hidden, Activation activation,
                                                 bool bias)
    : Module("PositionwiseFeedForward") {
  w_1_ = register_module("w_1",
                         std::make_shared<layers::LinearActivation>(dim, hidden, activation, bias));
  w_2_ = register_module("w_2", std::make_shared<layers::Linear>(hidden, dim, bias));
}

Tensor PositionwiseFeedForward::forward(const layers::GemmInput& x) const {
  return w_2_->forward(w_1_->chain_forward(x));
}

namespace u2pp_detail {

Tensor concat(const std::vector<Tensor>& parts, int64_t dim) {
  OASR_CHECK(!parts.empty(), kInternal, "concat: no parts");
  const Tensor& first = parts.front();
  const int64_t rank = first.dim();
  const int64_t axis = dim < 0 ? dim + rank : dim;
  OASR_CHECK(axis >= 0 && axis < rank, kInternal, "concat: dimension ", dim, " out of range");
  Shape shape = first.shape();
  int64_t total = 0;
  for (const Tensor& part : parts) {
    Shape expected = shape;
    expected[axis] = part.size(axis);
    OASR_CHECK(part.shape() == expected && part.dtype() == first.dtype() &&
                   part.device() == first.device(),
               kInternal, "concat: part ", part.str(), " does not match ", first.str(),
               " outside dimension ", axis, " (or in dtype or device)");
    total += part.size(axis);
  }
  shape[axis] = total;
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& part : parts) {
    const int64_t length = part.size(axis);
    if (length > 0) out.narrow(axis, at, length).copy_(part);
    at += length;
  }
  return out;
}

bool has_padding(std::span<const int64_t> lengths, int64_t frames) {
  return std::any_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n < frames; });
}

Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t d_k = x.size(2) / heads;
  return x.view({x.size(0), x.size(1), heads, d_k}).transpose(1, 2).contiguous();
}

Tensor merge_heads(const Tensor& x) {
  return x.transpose(1, 2).contiguous().view({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

Tensor to_like(const Tensor& x, const Tensor& like) {
  // Convert before moving when the move is to the device (fewer bytes when
  // narrowing to 16 bits); move first when coming back to the host.
  if (like.device().is_cpu()) return x.to(like.device()).to(like.dtype());
  return x.to(like.dtype()).to(like.device());
}

std::vector<int64_t> lengths_vector(const Tensor& lengths, const char* what) {
  OASR_CHECK(lengths.defined() && lengths.dim() == 1, kInvalidArgument, what,
             " must be a 1-d integer tensor [B]");
  OASR_CHECK(lengths.device().is_cpu(), kInvalidArgument, what, " must be a CPU tensor");
  std::vector<int64_t> values(static_cast<size_t>(lengths.size(0)));
  const Tensor c = lengths.contiguous();
  if (c.dtype() == DType::kI64) {
    std::copy_n(c.data<int64_t>(), values.size(), values.begin());
  } else if (c.dtype() == DType::kI32) {
    std::copy_n(c.data<int32_t>(), values.size(), values.begin());
  } else {
    OASR_THROW(kInvalidArgument, what, " must be int32 or int64, got ", dtype_name(c.dtype()));
  }
  return values;
}

}  // namespace u2pp_detail
}  // namespace oasr::models
