#include "models/u2pp/materialize.h"

#include "core/error.h"
#include "models/load_sequence.h"
#include "models/native_dir.h"
#include "models/u2pp/native_checkpoint.h"
#include "quantize/apply_links.h"

namespace oasr::models {

namespace {

using quant::GemmChain;
using quant::SmoothFold;
using quant::SmoothGroup;

// One Conformer block's groups and chains (spec "What is quantized").
void add_encoder_block(quant::QuantLayout& layout, const U2ppEncoderConfig& c,
                       const std::string& p) {
  // A pre-norm's output feeds only its GEMMs, so 1/s goes into its affine;
  // a post-norm's output is also the residual, so its GEMMs smooth at runtime.
  const bool pre_norm = c.normalize_before;
  auto norm_group = [&](const std::string& norm, std::vector<std::string> consumers,
                        bool fuse_output_quant) {
    SmoothGroup group;
    group.fold = pre_norm ? SmoothFold::kNormAffine : SmoothFold::kRuntime;
    group.producer = pre_norm ? p + norm : "";
    group.consumers = std::move(consumers);
    group.fuse_output_quant = pre_norm && fuse_output_quant;
    layout.smooth_groups.push_back(std::move(group));
  };
  auto ffn = [&](const std::string& norm, const std::string& ffn_path) {
    norm_group(norm, {p + ffn_path + ".w_1"}, true);
    // swish is not positively homogeneous: w_2 smooths its own input.
    layout.smooth_groups.push_back({SmoothFold::kRuntime, "", {p + ffn_path + ".w_2"}, false});
    layout.gemm_chains.push_back({p + ffn_path + ".w_1", p + ffn_path + ".w_2"});
  };
  if (c.macaron_style) ffn("norm_ff_macaron", "feed_forward_macaron");
  norm_group("norm_mha",
             {p + "self_attn.linear_q", p + "self_attn.linear_k", p + "self_attn.linear_v"}, true);
  layout.smooth_groups.push_back(
      {SmoothFold::kVToO, p + "self_attn.linear_v", {p + "self_attn.linear_out"}, false});
  if (c.use_cnn_module) {
    // The mask, the causal zero pad and the CNN-cache concatenation commute
    // with a per-channel scale (the cache holds the scaled norm output), but
    // they sit between norm_conv and pointwise_conv1, so the norm cannot
    // emit 8-bit output: pointwise_conv1 quantizes its own input.
    norm_group("norm_conv", {p + "conv_module.pointwise_conv1"}, false);
    layout.smooth_groups.push_back(
        {SmoothFold::kRuntime, "", {p + "conv_module.pointwise_conv2"}, false});
  }
  ffn("norm_ff", "feed_forward");
}

void add_decoder_layer(quant::QuantLayout& layout, const U2ppDecoderConfig& c,
                       const std::string& p) {
  const bool pre_norm = c.normalize_before;
  auto norm_group = [&](const std::string& norm, std::vector<std::string> consumers) {
    SmoothGroup group;
    group.fold = pre_norm ? SmoothFold::kNormAffine : SmoothFold::kRuntime;
    group.producer = pre_norm ? p + norm : "";
    group.consumers = std::move(consumers);
    group.fuse_output_quant = pre_norm;
    layout.smooth_groups.push_back(std::move(group));
  };
  norm_group("norm1",
             {p + "self_attn.linear_q", p + "self_attn.linear_k", p + "self_attn.linear_v"});
  layout.smooth_groups.push_back(
      {SmoothFold::kVToO, p + "self_attn.linear_v", {p + "self_attn.linear_out"}, false});
  norm_group("norm2", {p + "src_attn.linear_q"});
  // The encoder output also feeds the CTC head, so after_norm cannot absorb 1/s.
  layout.smooth_groups.push_back(
      {SmoothFold::kRuntime, "", {p + "src_attn.linear_k", p + "src_attn.linear_v"}, false});
  layout.smooth_groups.push_back(
      {SmoothFold::kVToO, p + "src_attn.linear_v", {p + "src_attn.linear_out"}, false});
  norm_group("norm3", {p + "feed_forward.w_1"});
  if (c.activation == Activation::kRelu) {
    layout.smooth_groups.push_back(
        {SmoothFold::kProducerRows, p + "feed_forward.w_1", {p + "feed_forward.w_2"}, false});
  } else {
    layout.smooth_groups.push_back({SmoothFold::kRuntime, "", {p + "feed_forward.w_2"}, false});
  }
  layout.gemm_chains.push_back({p + "feed_forward.w_1", p + "feed_forward.w_2"});
}

}  // namespace

quant::QuantLayout u2pp_quantization_layout(const U2ppConfig& config) {
  quant::QuantLayout layout;
  layout.architecture = "U2++ Conformer";
  layout.keep_full_precision = {
      {"encoder.embed.out.*",
       "the subsampling's output Linear (pinned to batch-invariant kernels)"},
      {"encoder.embed.linear",
       "the subsampling's output Linear (pinned to batch-invariant kernels)"},
      {"*.linear_pos", "the relative-position projection (pinned to batch-invariant kernels)"},
      {"ctc.*", "the CTC head"},
      {"decoder.*output_layer", "the decoder's output layer"},
  };
  layout.has_ar_kv_cache = false;
  const U2ppEncoderConfig& e = config.encoder;
  for (int64_t i = 0; i < e.num_blocks; ++i) {
    add_encoder_block(layout, e, "encoder.encoders." + std::to_string(i) + ".");
  }
  const U2ppDecoderConfig& d = config.decoder;
  if (d.type == U2ppDecoderType::kBiTransformer) {
    for (int64_t i = 0; i < d.num_blocks; ++i) {
      add_decoder_layer(layout, d, "decoder.left_decoder.decoders." + std::to_string(i) + ".");
    }
    for (int64_t i = 0; i < d.r_num_blocks; ++i) {
      add_decoder_layer(layout, d, "decoder.right_decoder.decoders." + std::to_string(i) + ".");
    }
  } else {
    for (int64_t i = 0; i < d.num_blocks; ++i) {
      add_decoder_layer(layout, d, "decoder.decoders." + std::to_string(i) + ".");
    }
  }
  layout.batch_invariant = {"encoder.embed.out.0", "encoder.embed.linear"};
  for (int64_t i = 0; i < e.num_blocks; ++i) {
    layout.batch_invariant.push_back("encoder.encoders." + std::to_string(i) +
                                     ".self_attn.linear_pos");
  }
  return layout;
}

MaterializedU2pp materialize_u2pp_model(const ModelSource& source,
                                        const quant::QuantizationConfig& quantization,
                                        const MaterializeOptions& options) {
  MaterializedU2pp out;
  const U2ppConfig& config = source.config.model;
  const std::filesystem::path config_file =
      source.dir / (source.format == CheckpointFormat::kNative ? kNativeConfigName : "train.yaml");
  const std::string encoder_key = source.format == CheckpointFormat::kNative
                                      ? "model.encoder.num_blocks"
                                      : "encoder_conf.num_blocks";
  const std::string decoder_key =
      source.format == CheckpointFormat::kNative ? "model.decoder." : "decoder_conf.";
  const std::vector<std::string> names = source.weights->names();
  check_block_count(names, "encoder.encoders.", config.encoder.num_blocks, encoder_key,
                    config_file);
  if (config.decoder.type == U2ppDecoderType::kBiTransformer) {
    check_block_count(names, "decoder.left_decoder.decoders.", config.decoder.num_blocks,
                      decoder_key + "num_blocks", config_file);
    check_block_count(names, "decoder.right_decoder.decoders.", config.decoder.r_num_blocks,
                      decoder_key + "r_num_blocks", config_file);
  } else {
    check_block_count(names, "decoder.decoders.", config.decoder.num_blocks,
                      decoder_key + "num_blocks", config_file);
  }
  out.model = std::make_unique<U2ppModel>(config);
  out.spec =
      load_model(*out.model, u2pp_quantization_layout(source.config.model),
                 {source.weights.get(), source.quantization, source.dir}, quantization, options);
  return out;
}

}  // namespace oasr::models
