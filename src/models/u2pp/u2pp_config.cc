#include "models/u2pp/u2pp_config.h"

#include <sstream>

#include "core/error.h"

namespace oasr::models {

U2ppInputLayer parse_u2pp_input_layer(std::string_view name) {
  if (name == "conv2d") return U2ppInputLayer::kConv2d;
  if (name == "conv2d6") return U2ppInputLayer::kConv2d6;
  if (name == "conv2d8") return U2ppInputLayer::kConv2d8;
  OASR_THROW(kUnsupported, "U2++: encoder_conf.input_layer '", name,
             "' is not supported (supported: conv2d, conv2d6, conv2d8)");
}

U2ppConvNorm parse_u2pp_conv_norm(std::string_view name) {
  if (name == "layer_norm") return U2ppConvNorm::kLayerNorm;
  if (name == "batch_norm") return U2ppConvNorm::kBatchNorm;
  OASR_THROW(kUnsupported, "U2++: encoder_conf.cnn_module_norm '", name,
             "' is not supported (supported: layer_norm, batch_norm)");
}

U2ppDecoderType parse_u2pp_decoder_type(std::string_view name) {
  if (name == "transformer") return U2ppDecoderType::kTransformer;
  if (name == "bitransformer") return U2ppDecoderType::kBiTransformer;
  OASR_THROW(kUnsupported, "U2++: decoder '", name,
             "' is not supported (supported: transformer, bitransformer)");
}

const char* u2pp_input_layer_name(U2ppInputLayer layer) {
  switch (layer) {
    case U2ppInputLayer::kConv2d:
      return "conv2d";
    case U2ppInputLayer::kConv2d6:
      return "conv2d6";
    case U2ppInputLayer::kConv2d8:
      return "conv2d8";
  }
  return "?";
}

const char* u2pp_conv_norm_name(U2ppConvNorm norm) {
  return norm == U2ppConvNorm::kLayerNorm ? "layer_norm" : "batch_norm";
}

const char* u2pp_decoder_type_name(U2ppDecoderType type) {
  return type == U2ppDecoderType::kTransformer ? "transformer" : "bitransformer";
}

SubsamplingGeometry subsampling_geometry(U2ppInputLayer layer) {
  switch (layer) {
    case U2ppInputLayer::kConv2d:  // two (3, stride 2) convolutions
      return {4, 6};
    case U2ppInputLayer::kConv2d6:  // (3, 2) then (5, 3)
      return {6, 10};
    case U2ppInputLayer::kConv2d8:  // three (3, 2)
      return {8, 14};
  }
  return {1, 0};
}

void U2ppConfig::validate() const {
  const auto positive = [](int64_t value, const char* field) {
    OASR_CHECK(value > 0, kInvalidArgument, "U2++ config: ", field, " must be positive, got ",
               value);
  };
  positive(vocab_size, "vocab_size (train.yaml output_dim)");
  positive(encoder.input_dim, "input_dim");
  positive(encoder.output_size, "encoder_conf.output_size");
  positive(encoder.attention_heads, "encoder_conf.attention_heads");
  positive(encoder.linear_units, "encoder_conf.linear_units");
  positive(encoder.pos_table_len, "encoder positional table length");
  OASR_CHECK(encoder.num_blocks >= 0, kInvalidArgument,
             "U2++ config: encoder_conf.num_blocks must be >= 0, got ", encoder.num_blocks);
  OASR_CHECK(encoder.output_size % encoder.attention_heads == 0, kInvalidArgument,
             "U2++ config: encoder_conf.output_size ", encoder.output_size,
             " is not a multiple of attention_heads ", encoder.attention_heads);
  OASR_CHECK(encoder.output_size % 2 == 0, kInvalidArgument,
             "U2++ config: encoder_conf.output_size must be even for the sinusoid table, got ",
             encoder.output_size);
  if (encoder.use_cnn_module) {
    positive(encoder.cnn_module_kernel, "encoder_conf.cnn_module_kernel");
    OASR_CHECK(encoder.causal || (encoder.cnn_module_kernel - 1) % 2 == 0, kInvalidArgument,
               "U2++ config: a non-causal convolution module needs an odd cnn_module_kernel, got ",
               encoder.cnn_module_kernel);
  }
  // The subsampling convolutions must leave at least one frequency bin.
  int64_t freq = encoder.input_dim;
  const int64_t kernels[3][2] = {{3, 2}, {3, 2}, {3, 2}};
  const int64_t stages = encoder.input_layer == U2ppInputLayer::kConv2d8 ? 3 : 2;
  for (int64_t s = 0; s < stages; ++s) {
    int64_t kernel = kernels[s][0];
    int64_t stride = kernels[s][1];
    if (encoder.input_layer == U2ppInputLayer::kConv2d6 && s == 1) {
      kernel = 5;
      stride = 3;
    }
    OASR_CHECK(freq >= kernel, kInvalidArgument, "U2++ config: input_dim ", encoder.input_dim,
               " is too small for ", u2pp_input_layer_name(encoder.input_layer), " subsampling");
    freq = (freq - kernel) / stride + 1;
  }
  positive(decoder.attention_heads, "decoder_conf.attention_heads");
  positive(decoder.linear_units, "decoder_conf.linear_units");
  positive(decoder.pos_table_len, "decoder positional table length");
  OASR_CHECK(decoder.num_blocks >= 0 && decoder.r_num_blocks >= 0, kInvalidArgument,
             "U2++ config: decoder_conf.num_blocks / r_num_blocks must be >= 0");
  OASR_CHECK(encoder.output_size % decoder.attention_heads == 0, kInvalidArgument,
             "U2++ config: the decoder width (encoder output_size ", encoder.output_size,
             ") is not a multiple of decoder_conf.attention_heads ", decoder.attention_heads);
  OASR_CHECK(blank_id >= 0 && blank_id < vocab_size, kInvalidArgument, "U2++ config: blank id ",
             blank_id, " outside the vocabulary of ", vocab_size);
  OASR_CHECK(sos_id() >= 0 && sos_id() < vocab_size && eos_id() >= 0 && eos_id() < vocab_size,
             kInvalidArgument, "U2++ config: sos ", sos_id(), " / eos ", eos_id(),
             " outside the vocabulary of ", vocab_size);
}

std::string U2ppConfig::describe() const {
  std::ostringstream out;
  out << "vocab_size: " << vocab_size << " (blank " << blank_id << ", sos " << sos_id() << ", eos "
      << eos_id() << ")\n"
      << "encoder: input_dim " << encoder.input_dim << ", output_size " << encoder.output_size
      << ", heads " << encoder.attention_heads << ", linear_units " << encoder.linear_units
      << ", blocks " << encoder.num_blocks << ", input_layer "
      << u2pp_input_layer_name(encoder.input_layer) << "\n"
      << "  normalize_before " << encoder.normalize_before << ", macaron " << encoder.macaron_style
      << ", cnn_module " << encoder.use_cnn_module << " (kernel " << encoder.cnn_module_kernel
      << ", causal " << encoder.causal << ", norm " << u2pp_conv_norm_name(encoder.cnn_module_norm)
      << "), activation " << activation_name(encoder.activation) << "\n"
      << "  use_dynamic_chunk " << encoder.use_dynamic_chunk << ", static_chunk_size "
      << encoder.static_chunk_size << ", global_cmvn " << encoder.global_cmvn << "\n"
      << "decoder: " << u2pp_decoder_type_name(decoder.type) << ", heads "
      << decoder.attention_heads << ", linear_units " << decoder.linear_units << ", blocks "
      << decoder.num_blocks << " + " << decoder.r_num_blocks << " (right), activation "
      << activation_name(decoder.activation) << "\n";
  return out.str();
}

}  // namespace oasr::models
