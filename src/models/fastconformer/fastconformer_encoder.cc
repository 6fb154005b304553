#include "models/fastconformer/fastconformer_encoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/elementwise.h"
#include "ops/sequence_mask.h"

namespace oasr::models {

namespace {

// A stride-2, kernel-3, padding-1 stage's valid frames: NeMo's calc_length,
// floor((L + 2 - 3) / 2 + 1), 0 for none.
int64_t stage_frames(int64_t frames) {
  return frames > 0 ? (frames - 1) / 2 + 1 : 0;
}

bool any_padding(std::span<const int64_t> lengths, int64_t frames) {
  return std::any_of(lengths.begin(), lengths.end(), [&](int64_t n) { return n < frames; });
}

// NCHW x with frames (dim 2) of plane p past plane_lengths[p] zeroed, as
// MaskedConvSequential multiplies them by its mask; x itself where no row is
// padded (plane_lengths undefined).
Tensor zero_padded_frames_nchw(const Tensor& x, const Tensor& plane_lengths) {
  if (!plane_lengths.defined()) return x;
  const Tensor planes = x.contiguous().view({x.size(0) * x.size(1), x.size(2), x.size(3)});
  return ops::zero_tail_frames(planes, plane_lengths.to(x.device())).view(x.shape());
}

Tensor to_model(const Tensor& x, DType dtype, Device device) {
  if (device.is_cpu()) return x.to(device).to(dtype);
  return x.to(dtype).to(device);
}

}  // namespace

// ---- DwStridingSubsampling ------------------------------------------------------

DwStridingSubsampling::DwStridingSubsampling(const FastConformerEncoderConfig& c)
    : Module("ConvSubsampling"),
      stages_(static_cast<int64_t>(std::lround(std::log2(c.subsampling_factor)))),
      channels_(c.subsampling_conv_channels) {
  const int64_t channels = c.subsampling_conv_channels;
  // NeMo's Sequential: conv 0, ReLU 1, then (depthwise, pointwise, ReLU) per
  // further stage: depthwise at 2 + 3i, pointwise at 3 + 3i.
  auto conv = register_module("conv", std::make_shared<Module>("MaskedConvSequential"));
  first_ = conv->register_module(
      "0", std::make_shared<layers::Conv2d>(1, channels, 3, 3, 2, 2, true, 1, 1));
  for (int64_t i = 0; i + 1 < stages_; ++i) {
    depthwise_.push_back(conv->register_module(
        std::to_string(2 + 3 * i),
        std::make_shared<layers::DepthwiseConv2d>(channels, 3, 3, 2, 2, 1, 1)));
    pointwise_.push_back(
        conv->register_module(std::to_string(3 + 3 * i),
                              std::make_shared<layers::Conv2d>(channels, channels, 1, 1, 1, 1)));
  }
  int64_t freq = c.feat_in;
  for (int64_t i = 0; i < stages_; ++i) freq = stage_frames(freq);
  out_ = register_module("out", std::make_shared<layers::Linear>(channels * freq, c.d_model));
}

int64_t DwStridingSubsampling::output_frames(int64_t input_frames) const {
  int64_t frames = input_frames;
  for (int64_t i = 0; i < stages_; ++i) frames = stage_frames(frames);
  return frames;
}

std::vector<std::vector<int64_t>> DwStridingSubsampling::stage_lengths(
    std::span<const int64_t> lengths) const {
  std::vector<std::vector<int64_t>> stages{{lengths.begin(), lengths.end()}};
  for (int64_t i = 0; i < stages_; ++i) {
    std::vector<int64_t> next = stages.back();
    for (int64_t& n : next) n = stage_frames(n);
    stages.push_back(std::move(next));
  }
  return stages;
}

Tensor DwStridingSubsampling::forward(const Tensor& x,
                                      std::span<const Tensor> plane_lengths) const {
  OASR_CHECK(x.dim() == 3, kInvalidArgument, path(), ": features must be [B, T, F], got ",
             shape_str(x.shape()));
  OASR_CHECK(static_cast<int64_t>(plane_lengths.size()) == stages_ + 1, kInternal, path(), ": ",
             plane_lengths.size(), " stages of plane lengths for ", stages_ + 1);
  Tensor y = zero_padded_frames_nchw(x.unsqueeze(1), plane_lengths[0]);  // [B, 1, T, F]
  y = zero_padded_frames_nchw(first_->forward(y), plane_lengths[1]);
  ops::activation_inplace(y, Activation::kRelu);
  for (size_t i = 0; i < depthwise_.size(); ++i) {
    const Tensor& lengths = plane_lengths[i + 2];
    y = zero_padded_frames_nchw(depthwise_[i]->forward(y), lengths);
    y = zero_padded_frames_nchw(pointwise_[i]->forward(y), lengths);
    ops::activation_inplace(y, Activation::kRelu);
  }
  // [B, C, T', F'] -> [B, T', C * F'], channel-major within a frame.
  const int64_t batch = y.size(0);
  const int64_t frames = y.size(2);
  const Tensor flat = y.transpose(1, 2).contiguous().view({batch, frames, y.size(1) * y.size(3)});
  return out_->forward(flat);
}

// ---- NemoConvolutionModule -----------------------------------------------------

NemoConvolutionModule::NemoConvolutionModule(int64_t channels, int64_t kernel_size, bool bias)
    : Module("ConformerConvolution"), kernel_size_(kernel_size) {
  pointwise_conv1_ = register_module(
      "pointwise_conv1", std::make_shared<layers::PointwiseConv1d>(channels, 2 * channels, bias));
  depthwise_conv_ = register_module(
      "depthwise_conv", std::make_shared<layers::DepthwiseConv1d>(channels, kernel_size, bias));
  batch_norm_ = register_module("batch_norm", std::make_shared<layers::BatchNorm1d>(channels));
  pointwise_conv2_ = register_module(
      "pointwise_conv2", std::make_shared<layers::PointwiseConv1d>(channels, channels, bias));
}

Tensor NemoConvolutionModule::forward(const Tensor& x, const Tensor& valid_lengths) const {
  Tensor expanded = pointwise_conv1_->forward(x);  // [B, T, 2D]
  // NeMo zeroes the GLU's output on padded frames; a zero pair gives
  // 0 * sigmoid(0) = 0, so zeroing its input is the same.
  if (valid_lengths.defined()) expanded = ops::zero_tail_frames(expanded, valid_lengths);
  const int64_t pad = (kernel_size_ - 1) / 2;
  Tensor normalized =
      batch_norm_->forward(depthwise_conv_->glu_forward_channels_last(expanded, pad, pad));
  ops::activation_inplace(normalized, Activation::kSwish);
  return pointwise_conv2_->forward(normalized);
}

// ---- NemoFeedForward -----------------------------------------------------------

NemoFeedForward::NemoFeedForward(int64_t dim, int64_t hidden, bool bias)
    : Module("ConformerFeedForward"),
      ffn_(*this, {dim, hidden, Activation::kSwish, bias, "linear1", "linear2"}) {}

// ---- FastConformerLayer ----------------------------------------------------------

namespace {

layers::AttentionSpec nemo_attention_spec(int64_t heads, int64_t dim, bool bias) {
  using layers::AttentionProjection;
  layers::AttentionSpec spec;
  spec.type_name = "RelPositionMultiHeadAttention";
  spec.dim = dim;
  spec.heads = heads;
  spec.projections = {{AttentionProjection::kQuery, "linear_q", bias},
                      {AttentionProjection::kKey, "linear_k", bias},
                      {AttentionProjection::kValue, "linear_v", bias},
                      {AttentionProjection::kOut, "linear_out", bias}};
  spec.scaling = layers::ScoreScaling::kScores;
  // NeMo divides the summed scores by sqrt(d_k); here they are multiplied by
  // its float32 reciprocal (a last-bit difference, inside the oracle's
  // tolerance).
  spec.score_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim / heads)));
  return spec;
}

}  // namespace

FastConformerLayer::FastConformerLayer(const FastConformerEncoderConfig& c)
    : Module("ConformerLayer") {
  const int64_t d = c.d_model;
  feed_forward1_ = register_module("feed_forward1",
                                   std::make_shared<NemoFeedForward>(d, c.ff_dim(), c.use_bias));
  self_attn_ =
      register_module("self_attn", std::make_shared<layers::RelPositionMultiHeadAttention>(
                                       nemo_attention_spec(c.n_heads, d, c.use_bias), "linear_pos",
                                       layers::RelativeShift::kTransformerXl));
  conv_ = register_module(
      "conv", std::make_shared<NemoConvolutionModule>(d, c.conv_kernel_size, c.use_bias));
  feed_forward2_ = register_module("feed_forward2",
                                   std::make_shared<NemoFeedForward>(d, c.ff_dim(), c.use_bias));
  norm_feed_forward1_ =
      register_module("norm_feed_forward1", std::make_shared<layers::LayerNorm>(d));
  norm_self_att_ = register_module("norm_self_att", std::make_shared<layers::LayerNorm>(d));
  norm_conv_ = register_module("norm_conv", std::make_shared<layers::LayerNorm>(d));
  norm_feed_forward2_ =
      register_module("norm_feed_forward2", std::make_shared<layers::LayerNorm>(d));
  norm_out_ = register_module("norm_out", std::make_shared<layers::LayerNorm>(d));
  // Each residual sum is fused with the next sub-block's LayerNorm (the
  // fused kernel a linked norm runs: add_layer_norm_residual_quant).
  norm_self_att_->set_adds_residual(true);
  norm_feed_forward2_->set_adds_residual(true);
}

Tensor FastConformerLayer::forward(const Tensor& x, const Tensor& mask, const Tensor& pos_emb,
                                   const Tensor& valid_lengths) const {
  // residual + 0.5 * ff1(norm(residual)), then norm_self_att of that sum.
  const Tensor y1 = feed_forward1_->forward(norm_feed_forward1_->forward_to_gemm(x));
  auto attention_in = norm_self_att_->add_scaled_forward_to_gemm(y1, x, 0.5f);
  const Tensor attended = self_attn_
                              ->forward(attention_in.normalized, mask, pos_emb, Tensor(),
                                        /*return_cache=*/false)
                              .out;
  auto conv_in = norm_conv_->add_forward(attended, attention_in.sum);
  const Tensor convolved = conv_->forward(conv_in.normalized, valid_lengths);
  auto ff2_in = norm_feed_forward2_->add_forward_to_gemm(convolved, conv_in.sum);
  const Tensor y2 = feed_forward2_->forward(ff2_in.normalized);
  return norm_out_->add_scaled_forward(y2, ff2_in.sum, 0.5f).normalized;
}

// ---- FastConformerEncoder ---------------------------------------------------------

FastConformerEncoder::FastConformerEncoder(const FastConformerEncoderConfig& c)
    : Module("ConformerEncoder"), config_(c) {
  pre_encode_ = register_module("pre_encode", std::make_shared<DwStridingSubsampling>(c));
  auto layers = register_module("layers", std::make_shared<Module>("ModuleList"));
  for (int64_t i = 0; i < c.n_layers; ++i) {
    layers_.push_back(
        layers->register_module(std::to_string(i), std::make_shared<FastConformerLayer>(c)));
  }
  // NeMo's create_pe: exp(arange(0, d, 2) * -(ln(10000) / d)) in float32.
  const float factor = static_cast<float>(-(std::log(10000.0) / static_cast<double>(c.d_model)));
  for (int64_t i = 0; i < c.d_model; i += 2) {
    frequencies_.push_back(std::exp(static_cast<float>(i) * factor));
  }
}

// The LayerNorms stay in the served dtype on the served device whatever
// quantization does to the GEMMs.
DType FastConformerEncoder::dtype() const {
  return layers_.front()->param_of_norm_out().dtype();
}
Device FastConformerEncoder::device() const {
  return layers_.front()->param_of_norm_out().device();
}

Tensor FastConformerEncoder::relative_positions(int64_t frames) const {
  const int64_t rows = 2 * frames - 1;
  const int64_t d = config_.d_model;
  Tensor table = Tensor::empty({1, rows, d}, DType::kF32);
  float* out = table.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float position = static_cast<float>(frames - 1 - r);
    for (int64_t i = 0; i < d / 2; ++i) {
      const float angle = position * frequencies_[static_cast<size_t>(i)];
      out[r * d + 2 * i] = std::sin(angle);
      out[r * d + 2 * i + 1] = std::cos(angle);
    }
  }
  return table;
}

Tensor FastConformerEncoder::encode(const std::vector<Tensor>& in) const {
  const Device device = this->device();
  Tensor x = pre_encode_->forward(in[0], std::span<const Tensor>(in).subspan(4));
  if (config_.xscaling) {
    x = ops::scale(x, static_cast<float>(std::sqrt(static_cast<double>(config_.d_model))));
  }
  // Eager runs (the CPU, graphs off) get the host mask and lengths as given.
  const Tensor mask = in[2].defined() ? in[2].to(device) : Tensor();
  const Tensor valid_lengths = in[3].defined() ? in[3].to(device) : Tensor();
  for (const auto& layer : layers_) x = layer->forward(x, mask, in[1], valid_lengths);
  return x;
}

FastConformerEncoder::Output FastConformerEncoder::forward(const Tensor& feats,
                                                           std::span<const int64_t> lengths) const {
  OASR_CHECK(feats.dim() == 3 && feats.size(2) == config_.feat_in, kInvalidArgument, path(),
             ": features must be [B, T, ", config_.feat_in, "], got ", shape_str(feats.shape()));
  OASR_CHECK(static_cast<int64_t>(lengths.size()) == feats.size(0), kInvalidArgument, path(), ": ",
             lengths.size(), " lengths for a batch of ", feats.size(0));
  for (int64_t n : lengths) {
    OASR_CHECK(n >= 1 && n <= feats.size(1), kInvalidArgument, path(), ": a row length of ", n,
               " outside [1, ", feats.size(1), "]");
  }
  const int64_t frames = pre_encode_->output_frames(feats.size(1));
  OASR_CHECK(frames <= config_.pos_emb_max_len, kInvalidArgument, path(), ": ", frames,
             " encoder frames are more than the position table's ", config_.pos_emb_max_len,
             " (encoder.pos_emb_max_len); split the audio");
  const DType dtype = this->dtype();
  const Device device = this->device();
  const int64_t batch = feats.size(0);
  const std::vector<std::vector<int64_t>> stages = pre_encode_->stage_lengths(lengths);
  Output output;
  output.lengths = stages.back();
  Tensor mask;
  Tensor valid_lengths;
  if (any_padding(output.lengths, frames)) {
    Tensor host_mask = Tensor::zeros({batch, 1, 1, frames}, DType::kU8);
    uint8_t* m = host_mask.data<uint8_t>();
    for (int64_t b = 0; b < batch; ++b) {
      std::fill(m + b * frames, m + b * frames + output.lengths[static_cast<size_t>(b)], 1);
    }
    mask = host_mask;
    valid_lengths = Tensor::from_vector(output.lengths, {batch});
  }
  std::vector<Tensor> inputs = {to_model(feats, dtype, device),
                                to_model(relative_positions(frames), dtype, device), mask,
                                valid_lengths};
  // Which stages are padded decides which masking kernels run: it is part of
  // the graph's key.
  std::string key = "fastconformer_encoder padded stages";
  int64_t stage_frames_count = feats.size(1);
  for (int64_t s = 0; s <= pre_encode_->stages(); ++s) {
    if (s > 0) stage_frames_count = stage_frames(stage_frames_count);
    const std::vector<int64_t>& valid = stages[static_cast<size_t>(s)];
    if (!any_padding(valid, stage_frames_count)) {
      inputs.emplace_back();
      continue;
    }
    key += " " + std::to_string(s);
    const int64_t planes = s == 0 ? 1 : pre_encode_->channels();
    std::vector<int64_t> per_plane;
    per_plane.reserve(static_cast<size_t>(batch * planes));
    for (int64_t b = 0; b < batch; ++b) {
      per_plane.insert(per_plane.end(), static_cast<size_t>(planes), valid[static_cast<size_t>(b)]);
    }
    inputs.push_back(Tensor::from_vector(per_plane, {batch * planes}));
  }
  const DeviceWork work = [this](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{encode(in)};
  };
  output.out = graphs_->run(key, device, work, inputs).front();
  return output;
}

}  // namespace oasr::models
