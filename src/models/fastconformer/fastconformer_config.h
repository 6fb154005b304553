// A NeMo FastConformer / Conformer ASR model's configuration, read from the
// model_config.yaml that NeMo's save_to() puts in a .nemo archive: the
// preprocessor (AudioToMelSpectrogramPreprocessor), the encoder
// (ConformerEncoder) and the head (ConvASRDecoder: CTC), with every value
// this implementation serves checked and every other one refused by its key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "audio/nemo_mel.h"
#include "core/activations.h"

namespace oasr::models {

struct FastConformerEncoderConfig {
  int64_t feat_in = 80;
  int64_t n_layers = 0;
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t ff_expansion_factor = 4;
  int64_t conv_kernel_size = 31;
  std::string conv_norm_type = "batch_norm";  // or "layer_norm"
  std::string subsampling = "dw_striding";
  int64_t subsampling_factor = 8;
  int64_t subsampling_conv_channels = 0;  // -1 in the yaml means d_model
  bool xscaling = true;
  int64_t pos_emb_max_len = 5000;
  bool use_bias = true;
  int64_t ff_dim() const { return d_model * ff_expansion_factor; }
};

enum class FastConformerHead {
  kCtc,   // ConvASRDecoder: a kernel-1 Conv1d to vocabulary + blank, log_softmax
  kRnnt,  // RNNTDecoder (embedding + LSTM predictor) and RNNTJoint
  kTdt,   // the same, the joint also giving duration logits (loss "tdt")
};

// A transducer head (RNNTDecoder + RNNTJoint) as NeMo's config names it.
struct FastConformerTransducerConfig {
  int64_t pred_hidden = 0;                    // decoder.prednet.pred_hidden
  int64_t pred_rnn_layers = 1;                // decoder.prednet.pred_rnn_layers
  int64_t joint_hidden = 0;                   // joint.jointnet.joint_hidden
  Activation activation = Activation::kRelu;  // joint.jointnet.activation: relu, tanh, sigmoid
  bool joint_has_dropout = false;
  // TDT: the durations (frames) the joint's extra outputs stand for, from
  // loss.tdt_kwargs.durations; empty for RNN-T.
  std::vector<int64_t> durations;
  // decoding.greedy.max_symbols: labels one frame may emit before the search
  // moves on (NeMo's default 10 where the key is absent).
  int64_t max_symbols = 10;
  // joint.joint_net's index of the output linear (after the activation and,
  // when dropout is configured, a Dropout).
  std::string output_linear_index() const { return joint_has_dropout ? "2" : "1"; }
};

struct FastConformerConfig {
  std::string target;  // the model class NeMo saved (cfg.target), for messages
  audio::NemoMelOptions preprocessor;
  FastConformerEncoderConfig encoder;
  FastConformerHead head = FastConformerHead::kCtc;
  FastConformerTransducerConfig transducer;  // kRnnt, kTdt
  bool is_transducer() const { return head != FastConformerHead::kCtc; }
  // A hybrid transducer (EncDecHybridRNNTCTCBPEModel) also has aux_ctc's CTC
  // head ("ctc_decoder."), over the same vocabulary.
  bool has_aux_ctc = false;
  bool has_ctc_head() const { return !is_transducer() || has_aux_ctc; }
  // The output vocabulary in id order (decoder.vocabulary, or
  // joint.vocabulary for a transducer); blank is the id after the last.
  std::vector<std::string> vocabulary;
  std::string vocabulary_key = "decoder.vocabulary";  // where it was read, for messages
  int64_t blank_id() const { return static_cast<int64_t>(vocabulary.size()); }
  // tokenizer.model_path with NeMo's "nemo:" prefix removed: the archive
  // member (or file in the unpacked directory) of the SentencePiece model.
  std::string tokenizer_model;
};

// Parses `text` (the yaml's contents; `file` names it in messages). Refuses,
// naming the key and what is served: a missing key that has no NeMo default,
// an unknown subsampling / self_attention_model / conv_norm_type / decoder
// class, a multi-blank transducer, limited-context (cache-aware
// streaming) attention, tied position biases (untie_biases: false), and
// values out of range.
FastConformerConfig parse_fastconformer_config(const std::string& text,
                                               const std::filesystem::path& file);

}  // namespace oasr::models
