// Small building blocks the U2++ encoder and decoder share: the sinusoid
// position table, global CMVN, the position-wise feed-forward network, and
// the tensor plumbing (concatenation, padded-frame zeroing, masks) that the
// blocks need between layer calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/activations.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace oasr::models {

// WeNet's PositionalEncoding table: row p, channel 2i is sin(p * w_i) and
// channel 2i + 1 is cos(p * w_i), w_i = exp(2i * -(ln 10000 / d)), with the
// float32 roundings of WeNet's construction. WeNet checkpoints written since
// early 2024 store the table as a buffer "pe" [1, max_len, d]; it is an
// optional slot here, used when loaded and computed otherwise.
class SinusoidalPositions : public Module {
 public:
  SinusoidalPositions(int64_t dim, int64_t max_len);
  // Rows [offset, offset + count) as [1, count, d] in `dtype` on `device`.
  // A loaded table is sliced where it lives (the model's dtype and device);
  // otherwise the rows are computed on the host in float32, then converted
  // once and moved. Refuses rows past max_len, as WeNet does (an utterance
  // longer than the table).
  Tensor rows(int64_t offset, int64_t count, DType dtype = DType::kF32,
              Device device = Device::cpu()) const;
  int64_t dim() const { return dim_; }
  int64_t max_len() const { return max_len_; }

 private:
  int64_t dim_;
  int64_t max_len_;
  std::vector<float> frequencies_;  // w_i, float32 as WeNet rounds them
};

// (x - mean) * istd over the last dimension (WeNet's GlobalCMVN, norm_var).
class GlobalCmvn : public Module {
 public:
  explicit GlobalCmvn(int64_t dim);
  Tensor forward(const Tensor& x) const;
};

// w_2(act(w_1(x))) (WeNet's PositionwiseFeedForward at inference).
class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(int64_t dim, int64_t hidden, Activation activation, bool bias);
  // x: the served-dtype tensor or its pre-norm's 8-bit output. With the
  // w_1 -> w_2 chain armed, the hidden activation travels as 8-bit only.
  Tensor forward(const layers::GemmInput& x) const;

 private:
  std::shared_ptr<layers::LinearActivation> w_1_;
  std::shared_ptr<layers::Linear> w_2_;
};

// A container named like torch.nn.Sequential so checkpoint paths such as
// "embed.out.0.weight" resolve; it only holds children.
class SequentialContainer : public Module {
 public:
  SequentialContainer() : Module("Sequential") {}
};

namespace u2pp_detail {

// Concatenation of tensors of one dtype and device along `dim` (equal other
// dimensions) into a new contiguous tensor on that device. Parts with zero
// length along `dim` are allowed.
Tensor concat(const std::vector<Tensor>& parts, int64_t dim);

// True when some lengths[b] < frames.
bool has_padding(std::span<const int64_t> lengths, int64_t frames);

// [B, T, H * d_k] -> contiguous [B, H, T, d_k].
Tensor split_heads(const Tensor& x, int64_t heads);
// [B, H, T, d_k] -> contiguous [B, T, H * d_k].
Tensor merge_heads(const Tensor& x);

// `x` converted to `like`'s dtype and moved to its device (x itself when
// both already match): the model's float input and host-built tables enter
// the device path here.
Tensor to_like(const Tensor& x, const Tensor& like);

// Lengths as int64 values from an int32/int64 CPU tensor of shape [B].
std::vector<int64_t> lengths_vector(const Tensor& lengths, const char* what);

}  // namespace u2pp_detail
}  // namespace oasr::models
