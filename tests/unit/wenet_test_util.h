// A tiny WeNet experiment directory written by tests (final.pt assembled by
// unit/torch_test_util.h, train.yaml text, units.txt, global_cmvn), plus the
// CMVN arithmetic of WeNet's load_cmvn written out from its definition.
#pragma once

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "unit/torch_test_util.h"

namespace oasr::testing {

inline void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A WeNet 3.x train.yaml (as yaml.dump writes it: sorted keys) for a model
// of input_dim 8, width 8, 2 heads, vocabulary 6; `extra_encoder` lines are
// added to encoder_conf.
inline std::string tiny_train_yaml(const std::string& extra_encoder = "",
                                   const std::string& cmvn_file = "data/train/global_cmvn",
                                   const std::string& symbol_table = "data/dict/lang_char.txt") {
  return "accum_grad: 1\n"
         "cmvn: global_cmvn\n"
         "cmvn_conf:\n"
         "  cmvn_file: " +
         cmvn_file +
         "\n"
         "  is_json_cmvn: true\n"
         "ctc: ctc\n"
         "ctc_conf:\n"
         "  ctc_blank_id: 0\n"
         "dataset_conf:\n"
         "  batch_conf:\n"
         "    batch_size: 16\n"
         "  fbank_conf:\n"
         "    dither: 1.0\n"
         "    frame_length: 25\n"
         "    frame_shift: 10\n"
         "    num_mel_bins: 8\n"
         "  resample_conf:\n"
         "    resample_rate: 16000\n"
         "  spec_aug: true\n"
         "decoder: bitransformer\n"
         "decoder_conf:\n"
         "  attention_heads: 2\n"
         "  dropout_rate: 0.1\n"
         "  linear_units: 16\n"
         "  num_blocks: 1\n"
         "  r_num_blocks: 1\n"
         "  self_attention_dropout_rate: 0.1\n"
         "encoder: conformer\n"
         "encoder_conf:\n"
         "  activation_type: swish\n"
         "  attention_dropout_rate: 0.1\n"
         "  attention_heads: 2\n"
         "  causal: true\n"
         "  cnn_module_kernel: 3\n"
         "  cnn_module_norm: layer_norm\n"
         "  input_layer: conv2d\n"
         "  linear_units: 16\n"
         "  normalize_before: true\n"
         "  num_blocks: 1\n"
         "  output_size: 8\n"
         "  pos_enc_layer_type: rel_pos\n"
         "  selfattention_layer_type: rel_selfattn\n"
         "  use_cnn_module: true\n"
         "  use_dynamic_chunk: true\n"
         "  use_dynamic_left_chunk: false\n" +
         extra_encoder +
         "input_dim: 8\n"
         "model: asr_model\n"
         "model_conf:\n"
         "  ctc_weight: 0.3\n"
         "  lsm_weight: 0.1\n"
         "  reverse_weight: 0.5\n"
         "optim: adam\n"
         "output_dim: 6\n"
         "tokenizer: char\n"
         "tokenizer_conf:\n"
         "  bpe_path: null\n"
         "  non_lang_syms_path: null\n"
         "  special_tokens:\n"
         "    <blank>: 0\n"
         "    <eos>: 5\n"
         "    <sos>: 5\n"
         "    <unk>: 1\n"
         "  split_with_space: false\n"
         "  symbol_table_path: " +
         symbol_table +
         "\n"
         "vocab_size: 6\n";
}

inline std::string tiny_units() {
  return "<blank> 0\n<unk> 1\n\xe4\xbd\xa0 2\n\xe5\xa5\xbd 3\n\xe2\x96\x81"
         "a 4\n<sos/eos> 5\n";
}

// CMVN statistics of dimension 8 over `frames` frames.
struct CmvnStats {
  std::vector<double> sums;
  std::vector<double> sum_squares;
  double frames;
};

inline CmvnStats tiny_stats(double shift = 0.0) {
  CmvnStats s{{}, {}, 250};
  for (int i = 0; i < 8; ++i) {
    const double mean = 0.37 * i - 1.1 + shift;
    s.sums.push_back(mean * s.frames);
    s.sum_squares.push_back((mean * mean + 0.5 + 0.01 * i) * s.frames);
  }
  // A negative variance (rounding in real statistics): floored to 1e-20.
  s.sum_squares[7] = s.sums[7] * s.sums[7] / s.frames - 1.0;
  return s;
}

inline std::string number(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

inline std::string cmvn_json(const CmvnStats& s) {
  std::string out = "{\"mean_stat\": [";
  for (size_t i = 0; i < s.sums.size(); ++i) out += (i ? ", " : "") + number(s.sums[i]);
  out += "], \"var_stat\": [";
  for (size_t i = 0; i < s.sum_squares.size(); ++i)
    out += (i ? ", " : "") + number(s.sum_squares[i]);
  return out + "], \"frame_num\": " + number(s.frames) + "}";
}

// compute-cmvn-stats --binary=false layout.
inline std::string cmvn_kaldi(const CmvnStats& s) {
  std::string out = " [\n  ";
  for (double v : s.sums) out += number(v) + " ";
  out += number(s.frames) + "\n  ";
  for (double v : s.sum_squares) out += number(v) + " ";
  return out + "0 ]\n";
}

// WeNet's load_cmvn, from its definition: float64 arithmetic, then float32.
inline std::pair<Tensor, Tensor> expected_cmvn(const CmvnStats& s) {
  std::vector<float> mean;
  std::vector<float> istd;
  for (size_t i = 0; i < s.sums.size(); ++i) {
    const double m = s.sums[i] / s.frames;
    double v = s.sum_squares[i] / s.frames - m * m;
    if (v < 1.0e-20) v = 1.0e-20;
    mean.push_back(static_cast<float>(m));
    istd.push_back(static_cast<float>(1.0 / std::sqrt(v)));
  }
  const auto dim = static_cast<int64_t>(mean.size());
  return {Tensor::from_vector(mean, {dim}), Tensor::from_vector(istd, {dim})};
}

// A few tensors under WeNet's names (the directory loader does not check
// them against a model).
inline std::vector<std::pair<std::string, Tensor>> tiny_state_dict() {
  std::vector<float> weight(64);
  for (int i = 0; i < 64; ++i) weight[i] = 0.125f * static_cast<float>(i) - 3.0f;
  return {
      {"encoder.embed.out.0.weight", Tensor::from_vector(weight, {8, 8})},
      {"encoder.encoders.0.norm_ff.bias", Tensor::full({8}, 0.25f)},
      {"ctc.ctc_lo.weight", Tensor::full({6, 8}, -1.5f)},
      {"ctc.ctc_lo.bias", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {6})},
      {"decoder.left_decoder.embed.0.weight", Tensor::full({6, 8}, 0.5f)},
  };
}

// final.pt + train.yaml + units.txt + global_cmvn (JSON) in `dir`.
inline void write_tiny_wenet_dir(const std::filesystem::path& dir,
                                 const std::string& yaml = tiny_train_yaml()) {
  std::filesystem::create_directories(dir);
  write_state_dict_pt(dir / "final.pt", tiny_state_dict());
  write_text_file(dir / "train.yaml", yaml);
  write_text_file(dir / "units.txt", tiny_units());
  write_text_file(dir / "global_cmvn", cmvn_json(tiny_stats()));
}

}  // namespace oasr::testing
