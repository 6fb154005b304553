// The WeNet Conformer encoder (ConformerEncoder / BaseEncoder) with WeNet's
// state-dict names under "encoder.": global_cmvn, embed (Conv2dSubsampling4/
// 6/8 with its RelPositionalEncoding), encoders.N (ConformerEncoderLayer),
// after_norm. Offline forward with WeNet's padding and chunk masks, and the
// streaming forward_chunk / forward_chunk_by_chunk with WeNet's attention
// and CNN caches, in WeNet's tensor layouts.
//
// Activations stay [B, T, D] contiguous throughout; every weight GEMM is one
// layer call over all B * T rows.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/device_graph_cache.h"
#include "layers/attention.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "models/u2pp/u2pp_blocks.h"
#include "models/u2pp/u2pp_config.h"

namespace oasr::models {

// WeNet's Conv2dSubsampling{4,6,8}: Conv2d + ReLU stages over (time, mel)
// without padding, then a Linear over (channels x remaining mel bins); the
// result is scaled by sqrt(D) (RelPositionalEncoding's xscale; the sinusoid
// table only feeds the attention's linear_pos). Holds the table as pos_enc.
class Conv2dSubsampling : public Module {
 public:
  Conv2dSubsampling(U2ppInputLayer kind, int64_t input_dim, int64_t dim, int64_t pos_table_len);
  // x [B, T, F] -> [B, T', D]. Refuses T too short for the kernels.
  Tensor forward(const Tensor& x) const;
  // T' for T valid input frames (what WeNet's sliced input mask counts).
  int64_t output_frames(int64_t input_frames) const;
  // The fewest input frames that give one output frame (right_context + 1).
  int64_t min_input_frames() const { return geometry_.right_context + 1; }
  SubsamplingGeometry geometry() const { return geometry_; }
  const SinusoidalPositions& positions() const { return *pos_enc_; }

 private:
  // The stages from `first_stage` on over NCHW y, then the flatten and the
  // projection: [B, C, T, F] -> [B, T', D].
  Tensor forward_nchw(Tensor y, size_t first_stage = 0) const;
  struct Stage {
    std::shared_ptr<layers::Conv2d> conv;
    int64_t kernel;
    int64_t stride;
  };
  std::vector<Stage> stages_;
  std::shared_ptr<layers::Linear> projection_;
  std::shared_ptr<SinusoidalPositions> pos_enc_;
  SubsamplingGeometry geometry_;
  float xscale_;
};

// WeNet's ConvolutionModule, channels-last: pointwise_conv1 (C -> 2C), GLU,
// depthwise conv (causal: K-1 frames of left context, zeros or the CNN cache,
// prepended BEFORE pointwise_conv1 as WeNet does; otherwise symmetric zero
// padding), LayerNorm or BatchNorm over channels, activation,
// pointwise_conv2. Padded frames are zeroed on the way in and out.
class ConvolutionModule : public Module {
 public:
  ConvolutionModule(int64_t channels, int64_t kernel_size, Activation activation, U2ppConvNorm norm,
                    bool causal, bool bias, float norm_eps);

  struct Output {
    Tensor out;    // [B, T, C]
    Tensor cache;  // [B, C, K-1] (WeNet's layout), causal only and on request
  };
  // x [B, T, C]; valid_lengths undefined (no padding) or int64 [B] on x's
  // device, read only by the device; cache undefined/empty or [B, C, K-1].
  Output forward(const Tensor& x, const Tensor& valid_lengths, const Tensor& cache,
                 bool return_cache) const;
  // K-1 for a causal module, else 0 (WeNet's lorder).
  int64_t left_context() const { return left_context_; }

 private:
  int64_t channels_;
  int64_t kernel_size_;
  int64_t left_context_;
  Activation activation_;
  bool layer_norm_;
  std::shared_ptr<layers::PointwiseConv1d> pointwise_conv1_;
  std::shared_ptr<layers::DepthwiseConv1d> depthwise_conv_;
  std::shared_ptr<layers::LayerNorm> layer_norm_module_;
  std::shared_ptr<layers::BatchNorm1d> batch_norm_module_;
  std::shared_ptr<layers::PointwiseConv1d> pointwise_conv2_;
};

// WeNet's ConformerEncoderLayer (macaron FFN with half steps, relative
// position self-attention, convolution module, norm_final).
class ConformerEncoderLayer : public Module {
 public:
  explicit ConformerEncoderLayer(const U2ppEncoderConfig& config);

  struct Output {
    Tensor x;          // [B, T, D]
    Tensor att_cache;  // [B, H, cached + T, 2 d_k], on request
    Tensor cnn_cache;  // [B, D, K-1], on request (undefined without a causal conv module)
  };
  // valid_lengths as ConvolutionModule::forward takes them.
  Output forward(const Tensor& x, const Tensor& mask, const Tensor& pos_emb,
                 const Tensor& valid_lengths, const Tensor& att_cache, const Tensor& cnn_cache,
                 bool return_cache) const;

 private:
  bool normalize_before_;
  float ff_scale_;
  std::shared_ptr<layers::RelPositionMultiHeadAttention> self_attn_;
  std::shared_ptr<PositionwiseFeedForward> feed_forward_;
  std::shared_ptr<PositionwiseFeedForward> feed_forward_macaron_;
  std::shared_ptr<ConvolutionModule> conv_module_;
  std::shared_ptr<layers::LayerNorm> norm_ff_;
  std::shared_ptr<layers::LayerNorm> norm_mha_;
  std::shared_ptr<layers::LayerNorm> norm_ff_macaron_;
  std::shared_ptr<layers::LayerNorm> norm_conv_;
  std::shared_ptr<layers::LayerNorm> norm_final_;
};

class ConformerEncoder : public Module {
 public:
  explicit ConformerEncoder(const U2ppEncoderConfig& config);

  struct Output {
    Tensor out;      // [B, T', D]
    Tensor lengths;  // int64 [B]: valid encoder frames per row
  };
  // WeNet's BaseEncoder.forward at inference. feats float32 [B, T, F] fbank
  // (before CMVN; any device, converted to the model's dtype and device),
  // rows padded with anything after lengths[b] (int32/int64 [B], on the
  // host). The output is in the model's dtype on its device; lengths stay
  // on the host. decoding_chunk_size < 0: full attention; > 0: WeNet's chunk mask
  // with num_decoding_left_chunks (< 0: all left chunks) when the model was
  // trained with use_dynamic_chunk; static_chunk_size > 0 models always use
  // their static chunk. 0 (WeNet's random training chunk) is refused.
  // On CUDA the device work of a call is a CUDA graph replay from a
  // shape's second call on (core/device_graph_cache.h; OASR_CUDA_GRAPHS=0
  // turns it off), with the same bits as the eager run.
  Output forward(const Tensor& feats, const Tensor& lengths, int64_t decoding_chunk_size = -1,
                 int64_t num_decoding_left_chunks = -1) const;

  struct ChunkOutput {
    Tensor out;        // [1, chunk frames, D]
    Tensor att_cache;  // [num_blocks, H, kept frames, 2 d_k]
    Tensor cnn_cache;  // [num_blocks, 1, D, K-1] ([num_blocks, 0, 0, 0] without a causal conv)
  };
  // WeNet's BaseEncoder.forward_chunk: xs [1, frames, F] fbank, offset =
  // encoder frames already produced, required_cache_size (< 0: keep all
  // history, 0: none, > 0: that many frames), caches from the previous call
  // (undefined or empty on the first).
  ChunkOutput forward_chunk(const Tensor& xs, int64_t offset, int64_t required_cache_size,
                            const Tensor& att_cache, const Tensor& cnn_cache) const;

  // WeNet's forward_chunk_by_chunk (simulate_streaming): overlapping fbank
  // windows of (chunk - 1) * rate + right_context + 1 frames every
  // chunk * rate frames, caches carried between them. feats [1, T, F] ->
  // [1, T', D] (T' = 0 when T is shorter than one window's context).
  Tensor forward_chunk_by_chunk(const Tensor& feats, int64_t decoding_chunk_size,
                                int64_t num_decoding_left_chunks = -1) const;

  const U2ppEncoderConfig& config() const { return config_; }
  // What the CUDA graphs of forward() did so far (benchmarks, tests).
  DeviceGraphCache::Stats graph_stats() const { return graphs_->stats(); }
  SubsamplingGeometry subsampling() const { return embed_->geometry(); }
  // Rows of the positional table the offline forward indexes by absolute frame.
  int64_t position_rows() const { return embed_->positions().max_len(); }
  // The most feature frames whose subsampled frames the table still holds.
  int64_t longest_input_frames() const;
  int64_t output_size() const { return config_.output_size; }
  // The served dtype and device of the parameters (and so of the outputs).
  DType dtype() const;
  Device device() const;

 private:
  // (B, 1, 1|T, T) uint8 attention mask, or undefined when every key is
  // visible to every query (no padding, no chunking).
  Tensor attention_mask(std::span<const int64_t> lengths, int64_t frames,
                        int64_t decoding_chunk_size, int64_t num_decoding_left_chunks) const;
  Tensor embed_features(const Tensor& feats) const;
  // The device part of forward(): features in the served dtype, the host or
  // device mask, the position rows and the valid lengths (undefined when
  // nothing is padded) -> [B, T', D]. A pure function of its inputs'
  // contents, so a device graph can record it.
  Tensor encode(const Tensor& features, const Tensor& mask, const Tensor& pos_emb,
                const Tensor& valid_lengths) const;

  U2ppEncoderConfig config_;
  std::shared_ptr<GlobalCmvn> global_cmvn_;
  std::shared_ptr<Conv2dSubsampling> embed_;
  std::vector<std::shared_ptr<ConformerEncoderLayer>> encoders_;
  std::shared_ptr<layers::LayerNorm> after_norm_;
  bool apply_after_norm_;
  std::unique_ptr<DeviceGraphCache> graphs_ = std::make_unique<DeviceGraphCache>();
};

}  // namespace oasr::models
