// U2ppConfig: the hyper-parameters of a WeNet U2++ model (Conformer encoder,
// CTC head, Transformer / bidirectional Transformer attention decoder), named
// as WeNet's train.yaml names them (encoder_conf / decoder_conf keys). The
// defaults are WeNet's class defaults, except where the U2++ recipe's
// train.yaml always sets a value (noted).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/activations.h"

namespace oasr::models {

// encoder_conf.input_layer: the Conv2d subsampling front end.
enum class U2ppInputLayer { kConv2d, kConv2d6, kConv2d8 };
// encoder_conf.cnn_module_norm
enum class U2ppConvNorm { kLayerNorm, kBatchNorm };
// decoder: "transformer" (decoder.decoders.*) or "bitransformer"
// (decoder.left_decoder.* and decoder.right_decoder.*).
enum class U2ppDecoderType { kTransformer, kBiTransformer };

// WeNet's spelling <-> enum; an unknown or unsupported name is refused with
// the list of supported ones (kUnsupported).
U2ppInputLayer parse_u2pp_input_layer(std::string_view name);
U2ppConvNorm parse_u2pp_conv_norm(std::string_view name);
U2ppDecoderType parse_u2pp_decoder_type(std::string_view name);
const char* u2pp_input_layer_name(U2ppInputLayer layer);
const char* u2pp_conv_norm_name(U2ppConvNorm norm);
const char* u2pp_decoder_type_name(U2ppDecoderType type);

struct U2ppEncoderConfig {
  int64_t input_dim = 80;  // fbank bins (train.yaml input_dim)
  int64_t output_size = 256;
  int64_t attention_heads = 4;
  int64_t linear_units = 2048;
  int64_t num_blocks = 6;
  U2ppInputLayer input_layer = U2ppInputLayer::kConv2d;
  bool normalize_before = true;
  bool macaron_style = true;
  bool use_cnn_module = true;
  int64_t cnn_module_kernel = 15;
  bool causal = false;                                      // U2++ recipes set true
  U2ppConvNorm cnn_module_norm = U2ppConvNorm::kBatchNorm;  // U2++ recipes: layer_norm
  Activation activation = Activation::kSwish;               // activation_type
  bool use_dynamic_chunk = false;                           // U2++ recipes set true
  int64_t static_chunk_size = 0;
  bool query_bias = true;  // linear_q and linear_out
  bool key_bias = true;
  bool value_bias = true;
  bool conv_bias = true;  // the conv module's three convolutions
  bool mlp_bias = true;   // feed_forward(_macaron).w_1 / w_2
  float norm_eps = 1e-5f;
  float conv_norm_eps = 1e-5f;
  bool final_norm = true;  // after_norm (applied when normalize_before)
  // encoder.global_cmvn.{mean, istd} are part of the model (WeNet stores
  // them in final.pt whenever train.yaml names a cmvn file).
  bool global_cmvn = true;
  // Rows of the sinusoid table (WeNet's max_len); a checkpoint that stores
  // the table as encoder.embed.pos_enc.pe must have exactly this many.
  int64_t pos_table_len = 5000;
};

struct U2ppDecoderConfig {
  U2ppDecoderType type = U2ppDecoderType::kBiTransformer;
  int64_t attention_heads = 4;
  int64_t linear_units = 2048;
  int64_t num_blocks = 6;
  int64_t r_num_blocks = 0;  // right_decoder blocks (bitransformer only)
  Activation activation = Activation::kRelu;
  bool normalize_before = true;
  float norm_eps = 1e-5f;
  int64_t pos_table_len = 5000;
};

struct U2ppConfig {
  int64_t vocab_size = 0;  // train.yaml output_dim
  U2ppEncoderConfig encoder;
  U2ppDecoderConfig decoder;
  // Special token ids: WeNet uses blank 0 and sos = eos = vocab_size - 1
  // unless tokenizer_conf.special_tokens says otherwise; -1 here means that
  // default (see sos_id() / eos_id()).
  int64_t blank_id = 0;
  int64_t sos = -1;
  int64_t eos = -1;

  int64_t sos_id() const { return sos >= 0 ? sos : vocab_size - 1; }
  int64_t eos_id() const { return eos >= 0 ? eos : vocab_size - 1; }

  // Refuses inconsistent sizes (kInvalidArgument) naming the field.
  void validate() const;
  // One line per field, for logs and error reports.
  std::string describe() const;
};

// The subsampling front end's geometry (WeNet's subsampling_rate and
// right_context): encoder frame i depends on input frames
// [i * rate, i * rate + right_context].
struct SubsamplingGeometry {
  int64_t rate;
  int64_t right_context;
};
SubsamplingGeometry subsampling_geometry(U2ppInputLayer layer);

}  // namespace oasr::models
