#include "models/u2pp/u2pp_encoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/concat.h"
#include "ops/conv2d.h"
#include "ops/elementwise.h"
#include "ops/sequence_mask.h"

namespace oasr::models {

using ops::concat;
using u2pp_detail::has_padding;
using u2pp_detail::to_like;

// ---- Conv2dSubsampling ------------------------------------------------------------

Conv2dSubsampling::Conv2dSubsampling(U2ppInputLayer kind, int64_t input_dim, int64_t dim,
                                     int64_t pos_table_len)
    : Module("Conv2dSubsampling"), geometry_(subsampling_geometry(kind)) {
  std::vector<std::pair<int64_t, int64_t>> kernel_stride = {{3, 2}, {3, 2}};
  if (kind == U2ppInputLayer::kConv2d6) kernel_stride = {{3, 2}, {5, 3}};
  if (kind == U2ppInputLayer::kConv2d8) kernel_stride = {{3, 2}, {3, 2}, {3, 2}};
  // WeNet's nn.Sequential interleaves ReLUs, so the convolutions are 0, 2, 4.
  auto conv = register_module("conv", std::make_shared<SequentialContainer>());
  int64_t channels = 1;
  int64_t freq = input_dim;
  for (size_t i = 0; i < kernel_stride.size(); ++i) {
    const auto [kernel, stride] = kernel_stride[i];
    auto layer = conv->register_module(
        std::to_string(2 * i),
        std::make_shared<layers::Conv2d>(channels, dim, kernel, kernel, stride, stride));
    stages_.push_back({layer, kernel, stride});
    channels = dim;
    freq = (freq - kernel) / stride + 1;
  }
  auto linear = std::make_shared<layers::Linear>(dim * freq, dim);
  if (kind == U2ppInputLayer::kConv2d) {
    // Conv2dSubsampling4 keeps its Linear inside a Sequential named "out".
    register_module("out", std::make_shared<SequentialContainer>())->register_module("0", linear);
  } else {
    register_module("linear", linear);
  }
  projection_ = linear;
  pos_enc_ = register_module("pos_enc", std::make_shared<SinusoidalPositions>(dim, pos_table_len));
  xscale_ = static_cast<float>(std::sqrt(static_cast<double>(dim)));
}

int64_t Conv2dSubsampling::output_frames(int64_t input_frames) const {
  int64_t frames = input_frames;
  for (const Stage& stage : stages_) {
    frames = frames >= stage.kernel ? (frames - stage.kernel) / stage.stride + 1 : 0;
  }
  return frames;
}

Tensor Conv2dSubsampling::forward(const Tensor& x) const {
  OASR_CHECK(x.dim() == 3, kInvalidArgument, path(), ": features must be [B, T, F], got ",
             shape_str(x.shape()));
  OASR_CHECK(x.size(1) >= min_input_frames(), kInvalidArgument, path(), ": ", x.size(1),
             " feature frames are too few for the subsampling (it needs at least ",
             min_input_frames(), ")");
  // CUDA, full precision: channels-last from the features ([B, T, F] is
  // [B, T, F, 1] NHWC) to the flatten, each ReLU inside its convolution, so
  // no layout copy runs between the stages. The stages from the first one it
  // does not serve (a quantized convolution) run NCHW.
  Tensor y = x.unsqueeze(3);
  size_t channels_last = 0;
  while (channels_last < stages_.size() && stages_[channels_last].conv->nhwc_served(y)) {
    y = stages_[channels_last++].conv->forward_nhwc_relu(y);
  }
  if (channels_last == stages_.size()) {
    // [B, T', F', C] -> [B, T', C * F'], channel-major within a frame as WeNet flattens.
    return ops::scale(projection_->forward(ops::flatten_nhwc_channel_major(y)), xscale_);
  }
  if (channels_last == 0 && x.device().is_cpu()) {
    // On the host, a long input runs in blocks of output frames: the first
    // stage's activation of 200 s alone is C x T/2 x F/2 floats (397 MB for
    // U2++ at 256 channels). Every output element is the same sum over its
    // own receptive field in any block (a convolution's GEMM row, the ReLU,
    // the flatten and the projection's row do not depend on other frames),
    // so the bits are the unblocked ones.
    constexpr int64_t kBlockFrames = 512;
    const int64_t frames = output_frames(x.size(1));
    if (frames > kBlockFrames) {
      std::vector<Tensor> blocks;
      for (int64_t begin = 0; begin < frames; begin += kBlockFrames) {
        const int64_t end = std::min(frames, begin + kBlockFrames);
        // The input frames [first, last) the output frames [begin, end) read.
        int64_t first = begin, last = end;
        for (auto stage = stages_.rbegin(); stage != stages_.rend(); ++stage) {
          first = first * stage->stride;
          last = (last - 1) * stage->stride + stage->kernel;
        }
        blocks.push_back(forward_nchw(x.narrow(1, first, last - first).unsqueeze(1)));
      }
      return ops::concat(blocks, 1);
    }
  }
  // [B, T, F, C] -> [B, C, T, F] (the features themselves when no stage ran).
  return forward_nchw(
      channels_last == 0 ? x.unsqueeze(1) : y.transpose(2, 3).transpose(1, 2).contiguous(),
      channels_last);
}

Tensor Conv2dSubsampling::forward_nchw(Tensor y, size_t first_stage) const {
  const int64_t batch = y.size(0);
  for (size_t i = first_stage; i < stages_.size(); ++i) {
    y = stages_[i].conv->forward(y);
    ops::activation_inplace(y, Activation::kRelu);
  }
  // [B, C, T', F'] -> [B, T', C * F'], channel-major within a frame as WeNet flattens.
  const int64_t frames = y.size(2);
  const Tensor flat = y.transpose(1, 2).contiguous().view({batch, frames, y.size(1) * y.size(3)});
  return ops::scale(projection_->forward(flat), xscale_);
}

int64_t ConformerEncoder::longest_input_frames() const {
  const int64_t rows = position_rows();
  // rows * rate frames subsample to at most rows (each stage divides by its
  // stride after losing its kernel's context); output_frames() is monotone.
  int64_t frames = rows * subsampling().rate;
  while (embed_->output_frames(frames + 1) <= rows) ++frames;
  return frames;
}

// ---- ConvolutionModule ----------------------------------------------------------

namespace {
// WeNet's masked_fill over padded frames; undefined lengths mean no padding.
Tensor zero_padded_frames(const Tensor& x, const Tensor& valid_lengths) {
  return valid_lengths.defined() ? ops::zero_tail_frames(x, valid_lengths) : x;
}
}  // namespace

ConvolutionModule::ConvolutionModule(int64_t channels, int64_t kernel_size, Activation activation,
                                     U2ppConvNorm norm, bool causal, bool bias, float norm_eps)
    : Module("ConvolutionModule"),
      channels_(channels),
      kernel_size_(kernel_size),
      left_context_(causal ? kernel_size - 1 : 0),
      activation_(activation),
      layer_norm_(norm == U2ppConvNorm::kLayerNorm) {
  pointwise_conv1_ = register_module(
      "pointwise_conv1", std::make_shared<layers::PointwiseConv1d>(channels, 2 * channels, bias));
  depthwise_conv_ = register_module(
      "depthwise_conv", std::make_shared<layers::DepthwiseConv1d>(channels, kernel_size, bias));
  if (layer_norm_) {
    layer_norm_module_ =
        register_module("norm", std::make_shared<layers::LayerNorm>(channels, norm_eps));
  } else {
    batch_norm_module_ =
        register_module("norm", std::make_shared<layers::BatchNorm1d>(channels, norm_eps));
  }
  pointwise_conv2_ = register_module(
      "pointwise_conv2", std::make_shared<layers::PointwiseConv1d>(channels, channels, bias));
}

ConvolutionModule::Output ConvolutionModule::forward(const Tensor& x, const Tensor& valid_lengths,
                                                     const Tensor& cache, bool return_cache) const {
  const int64_t batch = x.size(0);
  const int64_t frames = x.size(1);
  Tensor input = zero_padded_frames(x, valid_lengths);
  Output output;
  int64_t pad_left = 0;
  int64_t pad_right = 0;
  if (left_context_ > 0) {
    // WeNet prepends the left context to the module input, before
    // pointwise_conv1, so a zero frame there still becomes GLU(bias).
    Tensor context;
    if (cache.defined() && cache.numel() > 0) {
      OASR_CHECK(cache.dim() == 3 && cache.size(0) == batch && cache.size(1) == channels_ &&
                     cache.size(2) == left_context_,
                 kInvalidArgument, path(), ": cnn_cache must be [", batch, ", ", channels_, ", ",
                 left_context_, "], got ", shape_str(cache.shape()));
      context = cache.transpose(1, 2);  // [B, K-1, C]
    } else {
      context = Tensor::zeros({batch, left_context_, channels_}, x.dtype(), x.device());
    }
    input = concat({context, input}, 1);
    if (return_cache) {
      output.cache = input.narrow(1, input.size(1) - left_context_, left_context_)
                         .transpose(1, 2)
                         .contiguous();
    }
  } else {
    pad_left = pad_right = (kernel_size_ - 1) / 2;
  }
  const Tensor expanded = pointwise_conv1_->forward(input);  // [B, T + lorder, 2C]
  // GLU then the depthwise convolution over time, channels-last in and out
  // (one pass on CUDA; ops/depthwise_conv1d.h).
  const Tensor convolved =
      depthwise_conv_->glu_forward_channels_last(expanded, pad_left, pad_right);  // [B, T, C]
  OASR_CHECK(convolved.size(1) == frames, kInternal, path(), ": depthwise output has ",
             convolved.size(1), " frames, expected ", frames);
  Tensor normalized =
      layer_norm_ ? layer_norm_module_->forward(convolved) : batch_norm_module_->forward(convolved);
  ops::activation_inplace(normalized, activation_);
  output.out = zero_padded_frames(pointwise_conv2_->forward(normalized), valid_lengths);
  return output;
}

// ---- ConformerEncoderLayer ------------------------------------------------------

ConformerEncoderLayer::ConformerEncoderLayer(const U2ppEncoderConfig& c)
    : Module("ConformerEncoderLayer"),
      normalize_before_(c.normalize_before),
      ff_scale_(c.macaron_style ? 0.5f : 1.0f) {
  const int64_t d = c.output_size;
  self_attn_ = register_module(
      "self_attn", make_wenet_rel_position_attention(c.attention_heads, d, c.query_bias, c.key_bias,
                                                     c.value_bias));
  feed_forward_ = register_module("feed_forward", std::make_shared<PositionwiseFeedForward>(
                                                      d, c.linear_units, c.activation, c.mlp_bias));
  if (c.macaron_style) {
    feed_forward_macaron_ = register_module(
        "feed_forward_macaron",
        std::make_shared<PositionwiseFeedForward>(d, c.linear_units, c.activation, c.mlp_bias));
  }
  if (c.use_cnn_module) {
    conv_module_ = register_module(
        "conv_module",
        std::make_shared<ConvolutionModule>(d, c.cnn_module_kernel, c.activation, c.cnn_module_norm,
                                            c.causal, c.conv_bias, c.conv_norm_eps));
  }
  norm_ff_ = register_module("norm_ff", std::make_shared<layers::LayerNorm>(d, c.norm_eps));
  norm_mha_ = register_module("norm_mha", std::make_shared<layers::LayerNorm>(d, c.norm_eps));
  if (c.macaron_style) {
    norm_ff_macaron_ =
        register_module("norm_ff_macaron", std::make_shared<layers::LayerNorm>(d, c.norm_eps));
  }
  if (c.use_cnn_module) {
    norm_conv_ = register_module("norm_conv", std::make_shared<layers::LayerNorm>(d, c.norm_eps));
    norm_final_ = register_module("norm_final", std::make_shared<layers::LayerNorm>(d, c.norm_eps));
  }
  // Pre-norm: norm_mha adds the macaron FFN's output when there is one and
  // norm_ff always adds the previous sub-block's (the fused kernel a linked
  // norm runs: add_layer_norm_residual_quant, else layer_norm_quant).
  norm_mha_->set_adds_residual(c.macaron_style);
  norm_ff_->set_adds_residual(true);
}

ConformerEncoderLayer::Output ConformerEncoderLayer::forward(
    const Tensor& x_in, const Tensor& mask, const Tensor& pos_emb, const Tensor& valid_lengths,
    const Tensor& att_cache, const Tensor& cnn_cache, bool return_cache) const {
  Output output;
  Tensor x = x_in;
  if (normalize_before_) {
    // Pre-norm: each residual sum is fused with the next block's LayerNorm,
    // so `h` is always the normalized input of the next sub-block.
    // The norms feeding only GEMMs (norm_ff_macaron, norm_mha, norm_ff) hand
    // them a layers::GemmInput: their 8-bit output when link_quantization
    // armed them, the served-dtype tensor otherwise.
    layers::GemmInput h = x;
    if (feed_forward_macaron_) {
      const Tensor y = feed_forward_macaron_->forward(norm_ff_macaron_->forward_to_gemm(x));
      auto next = norm_mha_->add_scaled_forward_to_gemm(y, x, ff_scale_);
      x = next.sum;
      h = std::move(next.normalized);
    } else {
      h = norm_mha_->forward_to_gemm(x);
    }
    auto attention = self_attn_->forward(h, mask, pos_emb, att_cache, return_cache);
    output.att_cache = attention.cache;
    if (conv_module_) {
      auto next = norm_conv_->add_forward(attention.out, x);
      auto conv = conv_module_->forward(next.normalized, valid_lengths, cnn_cache, return_cache);
      output.cnn_cache = conv.cache;
      auto after_conv = norm_ff_->add_forward_to_gemm(conv.out, next.sum);
      const Tensor y = feed_forward_->forward(after_conv.normalized);
      output.x = norm_final_->add_scaled_forward(y, after_conv.sum, ff_scale_).normalized;
    } else {
      auto next = norm_ff_->add_forward_to_gemm(attention.out, x);
      const Tensor y = feed_forward_->forward(next.normalized);
      output.x = ops::add_scaled(next.sum, y, ff_scale_);
    }
    return output;
  }
  // Post-norm: x = norm(x + block(x)) for each sub-block.
  if (feed_forward_macaron_) {
    x = norm_ff_macaron_->add_scaled_forward(feed_forward_macaron_->forward(x), x, ff_scale_)
            .normalized;
  }
  auto attention = self_attn_->forward(x, mask, pos_emb, att_cache, return_cache);
  output.att_cache = attention.cache;
  x = norm_mha_->add_forward(attention.out, x).normalized;
  if (conv_module_) {
    auto conv = conv_module_->forward(x, valid_lengths, cnn_cache, return_cache);
    output.cnn_cache = conv.cache;
    x = norm_conv_->add_forward(conv.out, x).normalized;
  }
  x = norm_ff_->add_scaled_forward(feed_forward_->forward(x), x, ff_scale_).normalized;
  output.x = conv_module_ ? norm_final_->forward(x) : x;
  return output;
}

// ---- ConformerEncoder -------------------------------------------------------------

ConformerEncoder::ConformerEncoder(const U2ppEncoderConfig& config)
    : Module("ConformerEncoder"), config_(config) {
  if (config.global_cmvn) {
    global_cmvn_ = register_module("global_cmvn", std::make_shared<GlobalCmvn>(config.input_dim));
  }
  embed_ = register_module(
      "embed", std::make_shared<Conv2dSubsampling>(config.input_layer, config.input_dim,
                                                   config.output_size, config.pos_table_len));
  // WeNet always holds after_norm but applies it only to pre-norm stacks.
  after_norm_ = register_module(
      "after_norm", std::make_shared<layers::LayerNorm>(config.output_size, config.norm_eps));
  apply_after_norm_ = config.normalize_before && config.final_norm;
  auto encoders = register_module("encoders", std::make_shared<SequentialContainer>());
  for (int64_t i = 0; i < config.num_blocks; ++i) {
    encoders_.push_back(encoders->register_module(std::to_string(i),
                                                  std::make_shared<ConformerEncoderLayer>(config)));
  }
}

DType ConformerEncoder::dtype() const {
  return after_norm_->param("weight").dtype();
}

Device ConformerEncoder::device() const {
  return after_norm_->param("weight").device();
}

Tensor ConformerEncoder::embed_features(const Tensor& feats) const {
  OASR_CHECK(feats.dim() == 3 && feats.size(2) == config_.input_dim, kInvalidArgument,
             "U2++ encoder: features must be float32 [B, T, ", config_.input_dim, "], got ",
             shape_str(feats.shape()));
  // The fbank arrives as host float32; the encoder runs in the served dtype
  // on the model's device (a no-op for the CPU float32 model).
  const Tensor x = to_like(feats, after_norm_->param("weight"));
  return embed_->forward(global_cmvn_ ? global_cmvn_->forward(x) : x);
}

Tensor ConformerEncoder::attention_mask(std::span<const int64_t> lengths, int64_t frames,
                                        int64_t decoding_chunk_size,
                                        int64_t num_decoding_left_chunks) const {
  // WeNet's add_optional_chunk_mask at inference.
  int64_t chunk = 0;
  int64_t left_chunks = -1;
  if (config_.use_dynamic_chunk) {
    OASR_CHECK(decoding_chunk_size != 0, kInvalidArgument,
               "U2++ encoder: decoding_chunk_size 0 means WeNet's random training chunk; use -1 "
               "for full attention or a positive chunk size");
    if (decoding_chunk_size > 0) {
      chunk = decoding_chunk_size;
      left_chunks = num_decoding_left_chunks;
    }
  } else if (config_.static_chunk_size > 0) {
    chunk = config_.static_chunk_size;
    left_chunks = num_decoding_left_chunks;
  }
  const int64_t batch = static_cast<int64_t>(lengths.size());
  const bool padded = has_padding(lengths, frames);
  if (chunk <= 0 || chunk >= frames) {
    // One chunk covering the whole utterance (WeNet's full-context case)
    // leaves only the padding to mask.
    if (!padded) return Tensor();
    Tensor mask = Tensor::empty({batch, 1, 1, frames}, DType::kU8);
    uint8_t* m = mask.data<uint8_t>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < frames; ++t) m[b * frames + t] = t < lengths[b] ? 1 : 0;
    }
    return mask;
  }
  Tensor mask = Tensor::empty({batch, 1, frames, frames}, DType::kU8);
  uint8_t* m = mask.data<uint8_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < frames; ++i) {
      const int64_t chunk_index = i / chunk;
      const int64_t start =
          left_chunks < 0 ? 0 : std::max<int64_t>((chunk_index - left_chunks) * chunk, 0);
      const int64_t end = std::min((chunk_index + 1) * chunk, frames);
      uint8_t* row = m + (b * frames + i) * frames;
      for (int64_t j = 0; j < frames; ++j) {
        row[j] = (j >= start && j < end && j < lengths[b]) ? 1 : 0;
      }
    }
  }
  return mask;
}

ConformerEncoder::Output ConformerEncoder::forward(const Tensor& feats, const Tensor& lengths,
                                                   int64_t decoding_chunk_size,
                                                   int64_t num_decoding_left_chunks) const {
  const std::vector<int64_t> input_lengths = u2pp_detail::lengths_vector(lengths, "U2++ lengths");
  OASR_CHECK(feats.dim() == 3 && static_cast<int64_t>(input_lengths.size()) == feats.size(0),
             kInvalidArgument, "U2++ encoder: lengths has ", input_lengths.size(),
             " entries for features ", shape_str(feats.shape()));
  for (int64_t n : input_lengths) {
    OASR_CHECK(n >= 0 && n <= feats.size(1), kInvalidArgument, "U2++ encoder: length ", n,
               " outside [0, ", feats.size(1), "]");
  }
  const int64_t batch = feats.size(0);
  const int64_t frames = embed_->output_frames(feats.size(1));
  std::vector<int64_t> out_lengths;
  for (int64_t n : input_lengths) out_lengths.push_back(std::min(embed_->output_frames(n), frames));
  // The mask is built on the host as uint8 and moved once per call; the
  // convolution modules zero padded frames only when something is padded.
  const Tensor mask =
      attention_mask(out_lengths, frames, decoding_chunk_size, num_decoding_left_chunks);
  const Tensor valid = has_padding(out_lengths, frames)
                           ? Tensor::from_vector<int64_t>(out_lengths, {batch})
                           : Tensor();
  const std::vector<Tensor> inputs = {feats.device() == device() ? feats : feats.to(dtype()), mask,
                                      embed_->positions().rows(0, frames, dtype(), device()),
                                      valid};
  const DeviceWork work = [this](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{encode(in[0], in[1], in[2], in[3])};
  };
  const std::string key = "u2pp_encoder chunk " + std::to_string(decoding_chunk_size) + " left " +
                          std::to_string(num_decoding_left_chunks);
  // Eager where graphs do not apply (the CPU, OASR_CUDA_GRAPHS=0).
  Tensor x = graphs_->run(key, device(), work, inputs).front();
  return {x, Tensor::from_vector<int64_t>(out_lengths, {batch})};
}

Tensor ConformerEncoder::encode(const Tensor& features, const Tensor& mask, const Tensor& pos_emb,
                                const Tensor& valid_lengths) const {
  Tensor x = embed_features(features);
  const Tensor device_mask = mask.defined() ? mask.to(x.device()) : Tensor();
  const Tensor device_valid = valid_lengths.defined() ? valid_lengths.to(x.device()) : Tensor();
  for (const auto& layer : encoders_) {
    x = layer->forward(x, device_mask, pos_emb, device_valid, Tensor(), Tensor(), false).x;
  }
  if (apply_after_norm_) x = after_norm_->forward(x);
  return x;
}

ConformerEncoder::ChunkOutput ConformerEncoder::forward_chunk(const Tensor& xs, int64_t offset,
                                                              int64_t required_cache_size,
                                                              const Tensor& att_cache,
                                                              const Tensor& cnn_cache) const {
  OASR_CHECK(xs.dim() == 3 && xs.size(0) == 1, kInvalidArgument,
             "U2++ forward_chunk: one utterance at a time, xs [1, frames, F], got ",
             shape_str(xs.shape()));
  OASR_CHECK(offset >= 0, kInvalidArgument, "U2++ forward_chunk: offset ", offset, " < 0");
  const int64_t layers_count = static_cast<int64_t>(encoders_.size());
  const int64_t heads = config_.attention_heads;
  const int64_t d_k = config_.output_size / heads;
  const bool has_att_cache = att_cache.defined() && att_cache.numel() > 0;
  const bool has_cnn_cache = cnn_cache.defined() && cnn_cache.numel() > 0;
  int64_t cached = 0;
  if (has_att_cache) {
    OASR_CHECK(att_cache.dim() == 4 && att_cache.size(0) == layers_count &&
                   att_cache.size(1) == heads && att_cache.size(3) == 2 * d_k,
               kInvalidArgument, "U2++ forward_chunk: att_cache must be [", layers_count, ", ",
               heads, ", cached frames, ", 2 * d_k, "], got ", shape_str(att_cache.shape()));
    cached = att_cache.size(2);
  }
  if (has_cnn_cache) {
    OASR_CHECK(cnn_cache.dim() == 4 && cnn_cache.size(0) == layers_count, kInvalidArgument,
               "U2++ forward_chunk: cnn_cache must be [", layers_count, ", 1, ",
               config_.output_size, ", ", config_.cnn_module_kernel - 1, "], got ",
               shape_str(cnn_cache.shape()));
  }
  OASR_CHECK(offset >= cached, kInvalidArgument, "U2++ forward_chunk: offset ", offset,
             " is smaller than the ", cached, " cached frames");

  Tensor x = embed_features(xs);
  const int64_t chunk_frames = x.size(1);
  const int64_t keys = cached + chunk_frames;
  const Tensor pos_emb = embed_->positions().rows(offset - cached, keys, x.dtype(), x.device());
  int64_t next_cache_start = 0;
  if (required_cache_size == 0) {
    next_cache_start = keys;
  } else if (required_cache_size > 0) {
    next_cache_start = std::max<int64_t>(keys - required_cache_size, 0);
  }

  std::vector<Tensor> new_att;
  std::vector<Tensor> new_cnn;
  for (int64_t i = 0; i < layers_count; ++i) {
    const Tensor layer_att = has_att_cache ? att_cache.narrow(0, i, 1) : Tensor();
    const Tensor layer_cnn = has_cnn_cache ? cnn_cache.select(0, i) : Tensor();
    auto out = encoders_[static_cast<size_t>(i)]->forward(x, Tensor(), pos_emb, Tensor(), layer_att,
                                                          layer_cnn, true);
    x = out.x;
    new_att.push_back(out.att_cache.narrow(2, next_cache_start, keys - next_cache_start));
    if (out.cnn_cache.defined()) new_cnn.push_back(out.cnn_cache.unsqueeze(0));
  }
  if (apply_after_norm_) x = after_norm_->forward(x);

  ChunkOutput output;
  output.out = x;
  output.att_cache = layers_count > 0
                         ? concat(new_att, 0)
                         : Tensor::empty({0, heads, 0, 2 * d_k}, x.dtype(), x.device());
  output.cnn_cache = !new_cnn.empty()
                         ? concat(new_cnn, 0)
                         : Tensor::empty({layers_count, 0, 0, 0}, x.dtype(), x.device());
  return output;
}

Tensor ConformerEncoder::forward_chunk_by_chunk(const Tensor& feats, int64_t decoding_chunk_size,
                                                int64_t num_decoding_left_chunks) const {
  OASR_CHECK(decoding_chunk_size > 0, kInvalidArgument,
             "U2++ forward_chunk_by_chunk: decoding_chunk_size must be positive, got ",
             decoding_chunk_size);
  OASR_CHECK(config_.use_dynamic_chunk || config_.static_chunk_size > 0, kUnsupported,
             "U2++ forward_chunk_by_chunk: the model was trained without chunks "
             "(use_dynamic_chunk false, static_chunk_size 0), so it cannot stream");
  OASR_CHECK(feats.dim() == 3 && feats.size(0) == 1, kInvalidArgument,
             "U2++ forward_chunk_by_chunk: one utterance, feats [1, T, F], got ",
             shape_str(feats.shape()));
  const SubsamplingGeometry geometry = embed_->geometry();
  const int64_t context = geometry.right_context + 1;
  const int64_t stride = geometry.rate * decoding_chunk_size;
  const int64_t window = (decoding_chunk_size - 1) * geometry.rate + context;
  const int64_t total = feats.size(1);
  const int64_t required_cache_size = decoding_chunk_size * num_decoding_left_chunks;

  std::vector<Tensor> outputs;
  Tensor att_cache;
  Tensor cnn_cache;
  int64_t offset = 0;
  for (int64_t start = 0; start + context <= total; start += stride) {
    const int64_t end = std::min(start + window, total);
    ChunkOutput chunk = forward_chunk(feats.slice(1, start, end), offset, required_cache_size,
                                      att_cache, cnn_cache);
    offset += chunk.out.size(1);
    att_cache = chunk.att_cache;
    cnn_cache = chunk.cnn_cache;
    outputs.push_back(chunk.out);
  }
  if (outputs.empty()) return Tensor::empty({1, 0, config_.output_size}, dtype(), device());
  return outputs.size() == 1 ? outputs.front() : concat(outputs, 1);
}

}  // namespace oasr::models
