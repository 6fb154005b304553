// NeMo's ConformerEncoder as FastConformer configures it, at inference, with
// NeMo's state-dict names under "encoder.": pre_encode (ConvSubsampling,
// dw_striding), layers.N (ConformerLayer: macaron feed-forwards with half
// steps, Transformer-XL relative-position self-attention, the convolution
// module with BatchNorm, norm_out). Offline (full-context) forward over a
// padded batch; a row's output depends on its own frames only (NeMo masks
// every subsampling stage and the convolution module's GLU output, and the
// attention never reads a padded key), which tests/oracle/
// test_fastconformer.cc checks against NeMo's batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/device_graph_cache.h"
#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/feed_forward.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/fastconformer/fastconformer_config.h"

namespace oasr::models {

// NeMo's ConvSubsampling, dw_striding: Conv2d(1 -> C, 3x3, stride 2, pad 1),
// ReLU, then per further factor of 2 a depthwise 3x3 stride-2 Conv2d and a
// pointwise 1x1 Conv2d, ReLU; frames past each stage's length are zeroed
// (NeMo's MaskedConvSequential); then Linear(C * F', d_model) over the
// channel-major flatten of each frame.
class DwStridingSubsampling : public Module {
 public:
  DwStridingSubsampling(const FastConformerEncoderConfig& config);

  // Each stage's valid frames per row (NeMo's calc_length): entry 0 the
  // input's `lengths`, entry i the i-th stride-2 stage's.
  std::vector<std::vector<int64_t>> stage_lengths(std::span<const int64_t> lengths) const;
  // x [B, T, F] (features, served dtype) -> [B, T', D]. plane_lengths[i]
  // holds stage i's valid frames per NCHW plane (int64 [B * planes]: one
  // plane per row at the input, `channels` per row after a stage, row-major),
  // or is undefined where no row is padded at that stage; read by the device
  // only, so a recorded graph replays them.
  Tensor forward(const Tensor& x, std::span<const Tensor> plane_lengths) const;
  // NeMo's calc_length per stride-2 stage.
  int64_t output_frames(int64_t input_frames) const;
  int64_t stages() const { return stages_; }
  int64_t channels() const { return channels_; }

 private:
  int64_t stages_;  // log2(subsampling_factor)
  int64_t channels_;
  std::shared_ptr<layers::Conv2d> first_;
  std::vector<std::shared_ptr<layers::DepthwiseConv2d>> depthwise_;
  std::vector<std::shared_ptr<layers::Conv2d>> pointwise_;
  std::shared_ptr<layers::Linear> out_;
};

// NeMo's ConformerConvolution with batch_norm: pointwise_conv1 (D -> 2D),
// GLU, padded frames zeroed, depthwise conv (symmetric padding), BatchNorm,
// Swish, pointwise_conv2. Channels-last throughout.
class NemoConvolutionModule : public Module {
 public:
  NemoConvolutionModule(int64_t channels, int64_t kernel_size, bool bias);
  // x [B, T, D]; valid_lengths int64 [B] on x's device, or undefined when no
  // row is padded.
  Tensor forward(const Tensor& x, const Tensor& valid_lengths) const;

 private:
  int64_t kernel_size_;
  std::shared_ptr<layers::PointwiseConv1d> pointwise_conv1_;
  std::shared_ptr<layers::DepthwiseConv1d> depthwise_conv_;
  std::shared_ptr<layers::BatchNorm1d> batch_norm_;
  std::shared_ptr<layers::PointwiseConv1d> pointwise_conv2_;
};

// NeMo's ConformerFeedForward: linear2(swish(linear1(x))).
class NemoFeedForward : public Module {
 public:
  NemoFeedForward(int64_t dim, int64_t hidden, bool bias);
  Tensor forward(const layers::GemmInput& x) const { return ffn_.forward(x); }

 private:
  layers::FeedForward ffn_;
};

class FastConformerLayer : public Module {
 public:
  explicit FastConformerLayer(const FastConformerEncoderConfig& config);
  // x [B, T, D]; mask uint8 [B, 1, 1, T] (nonzero: a valid key) or
  // undefined; pos_emb [1, 2T - 1, D]; valid_lengths as the conv module takes.
  Tensor forward(const Tensor& x, const Tensor& mask, const Tensor& pos_emb,
                 const Tensor& valid_lengths) const;
  // norm_out's weight: the served dtype and device.
  const Tensor& param_of_norm_out() const { return norm_out_->param("weight"); }

 private:
  std::shared_ptr<NemoFeedForward> feed_forward1_;
  std::shared_ptr<layers::RelPositionMultiHeadAttention> self_attn_;
  std::shared_ptr<NemoConvolutionModule> conv_;
  std::shared_ptr<NemoFeedForward> feed_forward2_;
  std::shared_ptr<layers::LayerNorm> norm_feed_forward1_;
  std::shared_ptr<layers::LayerNorm> norm_self_att_;
  std::shared_ptr<layers::LayerNorm> norm_conv_;
  std::shared_ptr<layers::LayerNorm> norm_feed_forward2_;
  std::shared_ptr<layers::LayerNorm> norm_out_;
};

class FastConformerEncoder : public Module {
 public:
  explicit FastConformerEncoder(const FastConformerEncoderConfig& config);

  struct Output {
    Tensor out;                    // [B, T', D], the model's dtype and device
    std::vector<int64_t> lengths;  // valid frames per row
  };
  // feats float32 [B, T, F] (any device; converted to the model's dtype and
  // device), rows valid up to lengths[b] (anything after). Refuses an input
  // whose subsampled length passes pos_emb_max_len (NeMo would extend its
  // table; the limit is the config's).
  Output forward(const Tensor& feats, std::span<const int64_t> lengths) const;

  const FastConformerEncoderConfig& config() const { return config_; }
  int64_t output_frames(int64_t input_frames) const {
    return pre_encode_->output_frames(input_frames);
  }
  DType dtype() const;
  Device device() const;
  // On CUDA each input shape's forward is recorded once and replayed
  // (core/device_graph_cache.h; OASR_CUDA_GRAPHS=0 turns it off).
  DeviceGraphCache::Stats graph_stats() const { return graphs_->stats(); }

 private:
  // The recorded work: features, positions, attention mask, valid lengths,
  // then the subsampling's plane lengths (forward's inputs).
  Tensor encode(const std::vector<Tensor>& inputs) const;
  // Relative positions T-1 .. -(T-1) as NeMo's RelPositionalEncoding rows:
  // [1, 2T - 1, D] float32 on the host.
  Tensor relative_positions(int64_t frames) const;

  FastConformerEncoderConfig config_;
  std::shared_ptr<DwStridingSubsampling> pre_encode_;
  std::vector<std::shared_ptr<FastConformerLayer>> layers_;
  std::vector<float> frequencies_;  // NeMo's div_term, float32
  std::unique_ptr<DeviceGraphCache> graphs_ = std::make_unique<DeviceGraphCache>();
};

}  // namespace oasr::models
