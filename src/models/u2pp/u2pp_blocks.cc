#include "models/u2pp/u2pp_blocks.h"

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

namespace {

layers::AttentionSpec wenet_attention_spec(const char* type_name, int64_t heads, int64_t dim,
                                           bool query_bias, bool key_bias, bool value_bias) {
  using layers::AttentionProjection;
  layers::AttentionSpec spec;
  spec.type_name = type_name;
  spec.dim = dim;
  spec.heads = heads;
  spec.projections = {{AttentionProjection::kQuery, "linear_q", query_bias},
                      {AttentionProjection::kKey, "linear_k", key_bias},
                      {AttentionProjection::kValue, "linear_v", value_bias},
                      {AttentionProjection::kOut, "linear_out", query_bias}};
  spec.scaling = layers::ScoreScaling::kScores;
  // WeNet: scores / math.sqrt(d_k), i.e. times 1 / sqrt(d_k) in float32.
  if (heads > 0 && dim % heads == 0) {
    spec.score_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim / heads)));
  }
  return spec;
}

}  // namespace

std::shared_ptr<layers::MultiHeadAttention> make_wenet_attention(int64_t heads, int64_t dim) {
  return std::make_shared<layers::MultiHeadAttention>(
      wenet_attention_spec("MultiHeadedAttention", heads, dim, true, true, true));
}

std::shared_ptr<layers::RelPositionMultiHeadAttention> make_wenet_rel_position_attention(
    int64_t heads, int64_t dim, bool query_bias, bool key_bias, bool value_bias) {
  return std::make_shared<layers::RelPositionMultiHeadAttention>(
      wenet_attention_spec("RelPositionMultiHeadedAttention", heads, dim, query_bias, key_bias,
                           value_bias),
      "linear_pos");
}

PositionwiseFeedForward::PositionwiseFeedForward(int64_t dim, int64_t hidden, Activation activation,
                                                 bool bias)
    : Module("PositionwiseFeedForward"),
      ffn_(*this, {dim, hidden, activation, bias, "w_1", "w_2"}) {}

namespace u2pp_detail {

bool has_padding(std::span<const int64_t> lengths, int64_t frames) {
  return std::any_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n < frames; });
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
