// WeNet experiment directories (models/u2pp/wenet_config.h, models/u2pp/wenet_dir.h):
// train.yaml parsing with WeNet's defaults and refusals by name, which files
// are chosen and how recorded paths resolve, the symbol table, and CMVN
// computed as WeNet's load_cmvn computes it.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <tuple>

#include "core/error.h"
#include "models/u2pp/wenet_dir.h"
#include "support/test_support.h"
#include "unit/wenet_test_util.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using models::parse_wenet_train_yaml;
using testing::TempDir;
using testing::tiny_train_yaml;
using testing::write_text_file;

::testing::AssertionResult throws(const std::function<void()>& action, ErrorCode code,
                                  const std::vector<std::string>& needles) {
  try {
    action();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure() << "code " << error_code_name(e.code()) << " instead of "
                                           << error_code_name(code) << ": " << e.what();
    }
    for (const std::string& needle : needles) {
      if (std::string(e.what()).find(needle) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << needle << "\": " << e.what();
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error";
}

// tiny_train_yaml with one line replaced (the line must exist).
std::string edited(const std::string& from, const std::string& to) {
  std::string yaml = tiny_train_yaml();
  const size_t at = yaml.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? yaml : yaml.replace(at, from.size(), to);
}

TEST(WenetTrainYaml, ReadsEveryFieldOfARecipeConfig) {
  const auto parsed = parse_wenet_train_yaml(tiny_train_yaml(), "train.yaml");
  const models::WenetConfig& c = parsed.config;
  const models::U2ppEncoderConfig& e = c.model.encoder;
  EXPECT_EQ(e.input_dim, 8);
  EXPECT_EQ(e.output_size, 8);
  EXPECT_EQ(e.attention_heads, 2);
  EXPECT_EQ(e.linear_units, 16);
  EXPECT_EQ(e.num_blocks, 1);
  EXPECT_EQ(e.input_layer, models::U2ppInputLayer::kConv2d);
  EXPECT_TRUE(e.normalize_before);
  EXPECT_TRUE(e.macaron_style);  // not written: WeNet's default
  EXPECT_TRUE(e.use_cnn_module);
  EXPECT_EQ(e.cnn_module_kernel, 3);
  EXPECT_TRUE(e.causal);
  EXPECT_EQ(e.cnn_module_norm, models::U2ppConvNorm::kLayerNorm);
  EXPECT_EQ(e.activation, Activation::kSwish);
  EXPECT_TRUE(e.use_dynamic_chunk);
  EXPECT_TRUE(e.global_cmvn);
  const models::U2ppDecoderConfig& d = c.model.decoder;
  EXPECT_EQ(d.type, models::U2ppDecoderType::kBiTransformer);
  EXPECT_EQ(d.attention_heads, 2);
  EXPECT_EQ(d.linear_units, 16);
  EXPECT_EQ(d.num_blocks, 1);
  EXPECT_EQ(d.r_num_blocks, 1);
  EXPECT_EQ(d.activation, Activation::kRelu);
  EXPECT_EQ(c.model.vocab_size, 6);
  EXPECT_EQ(c.model.blank_id, 0);
  EXPECT_EQ(c.model.sos_id(), 5);
  EXPECT_EQ(c.model.eos_id(), 5);
  EXPECT_DOUBLE_EQ(c.ctc_weight, 0.3);
  EXPECT_DOUBLE_EQ(c.reverse_weight, 0.5);
  EXPECT_EQ(c.fbank.sample_rate, 16000);
  EXPECT_EQ(c.fbank.num_mel_bins, 8);
  EXPECT_DOUBLE_EQ(c.fbank.frame_length_ms, 25);
  EXPECT_DOUBLE_EQ(c.fbank.frame_shift_ms, 10);
  EXPECT_DOUBLE_EQ(c.fbank.dither, 1.0);
  EXPECT_EQ(c.tokenizer.type, models::TokenizerType::kChar);
  EXPECT_EQ(parsed.tokenizer, models::TokenizerType::kChar);
  EXPECT_EQ(parsed.paths.cmvn_file, "data/train/global_cmvn");
  EXPECT_TRUE(parsed.paths.is_json_cmvn);
  EXPECT_EQ(parsed.paths.symbol_table, "data/dict/lang_char.txt");
  EXPECT_EQ(parsed.paths.bpe_model, "");  // null
}

TEST(WenetTrainYaml, FillsWhatAFileLeavesOutWithWenetsDefaults) {
  const std::string yaml =
      "encoder_conf:\n  output_size: 8\n  attention_heads: 2\n"
      "decoder_conf:\n  attention_heads: 2\n"
      "dataset_conf:\n  fbank_conf: {}\n"
      "output_dim: 7\n"
      "cmvn_file: global_cmvn\n"  // WeNet 2.x spelling
      "is_json_cmvn: false\n";
  const auto parsed = parse_wenet_train_yaml(yaml, "train.yaml");
  const models::WenetConfig& c = parsed.config;
  EXPECT_EQ(c.fbank.num_mel_bins, 23);  // compute_fbank's default
  EXPECT_EQ(c.model.encoder.input_dim, 23);
  EXPECT_EQ(c.model.encoder.num_blocks, 6);
  EXPECT_EQ(c.model.encoder.linear_units, 2048);
  EXPECT_EQ(c.model.encoder.cnn_module_kernel, 15);
  EXPECT_EQ(c.model.encoder.cnn_module_norm, models::U2ppConvNorm::kBatchNorm);
  EXPECT_FALSE(c.model.encoder.causal);
  EXPECT_EQ(c.model.decoder.type, models::U2ppDecoderType::kBiTransformer);
  EXPECT_EQ(c.model.decoder.num_blocks, 6);
  EXPECT_EQ(c.model.decoder.r_num_blocks, 0);
  EXPECT_EQ(c.model.sos_id(), 6);  // vocab_size - 1 without special tokens
  EXPECT_DOUBLE_EQ(c.ctc_weight, 0.5);
  EXPECT_DOUBLE_EQ(c.fbank.dither, 0.0);
  EXPECT_EQ(c.fbank.sample_rate, 16000);
  EXPECT_FALSE(parsed.tokenizer.has_value());
  EXPECT_EQ(parsed.paths.cmvn_file, "global_cmvn");
  EXPECT_FALSE(parsed.paths.is_json_cmvn);
}

struct Refusal {
  const char* name;
  std::string yaml;
  ErrorCode code;
  std::vector<std::string> needles;
};

TEST(WenetTrainYaml, RefusesWhatOasrDoesNotImplementByName) {
  const std::vector<Refusal> cases = {
      {"linear input layer",
       edited("input_layer: conv2d", "input_layer: linear"),
       ErrorCode::kUnsupported,
       {"train.yaml", "input_layer 'linear'", "conv2d, conv2d6, conv2d8"}},
      {"conv2d4 input layer",
       edited("input_layer: conv2d", "input_layer: conv2d4"),
       ErrorCode::kUnsupported,
       {"input_layer 'conv2d4'"}},
      {"transformer encoder",
       edited("encoder: conformer", "encoder: transformer"),
       ErrorCode::kUnsupported,
       {"encoder 'transformer'"}},
      {"absolute positions",
       edited("pos_enc_layer_type: rel_pos", "pos_enc_layer_type: abs_pos"),
       ErrorCode::kUnsupported,
       {"encoder_conf.pos_enc_layer_type 'abs_pos'"}},
      {"plain attention",
       edited("selfattention_layer_type: rel_selfattn", "selfattention_layer_type: selfattn"),
       ErrorCode::kUnsupported,
       {"selfattention_layer_type 'selfattn'"}},
      {"selu",
       edited("activation_type: swish", "activation_type: selu"),
       ErrorCode::kUnsupported,
       {"encoder_conf.activation_type 'selu'", "swish, relu, gelu"}},
      {"group norm",
       edited("cnn_module_norm: layer_norm", "cnn_module_norm: group_norm"),
       ErrorCode::kUnsupported,
       {"cnn_module_norm 'group_norm'"}},
      {"rms norm",
       edited("  causal: true\n", "  causal: true\n  layer_norm_type: rms_norm\n"),
       ErrorCode::kUnsupported,
       {"encoder_conf.layer_norm_type = rms_norm"}},
      {"unknown key",
       edited("  causal: true\n", "  causal: true\n  funky_gate: 3\n"),
       ErrorCode::kUnsupported,
       {"unknown key encoder_conf.funky_gate"}},
      {"sanm decoder",
       edited("decoder: bitransformer", "decoder: sanm_decoder"),
       ErrorCode::kUnsupported,
       {"decoder 'sanm_decoder'"}},
      {"no decoder",
       edited("decoder: bitransformer", "decoder: null"),
       ErrorCode::kUnsupported,
       {"decoder is null"}},
      {"transducer",
       edited("model: asr_model", "model: transducer"),
       ErrorCode::kUnsupported,
       {"model 'transducer'"}},
      {"whisper tokenizer",
       edited("tokenizer: char", "tokenizer: whisper"),
       ErrorCode::kUnsupported,
       {"tokenizer 'whisper'"}},
      {"utterance cmvn",
       edited("cmvn: global_cmvn", "cmvn: utterance_cmvn"),
       ErrorCode::kUnsupported,
       {"cmvn 'utterance_cmvn'"}},
      {"mfcc",
       edited("  fbank_conf:", "  mfcc_conf:"),
       ErrorCode::kUnsupported,
       {"dataset_conf.mfcc_conf"}},
      {"malformed",
       edited("  num_blocks: 1\n  output_size", "  num_blocks: [1\n  output_size"),
       ErrorCode::kCorruptFile,
       {"train.yaml: malformed YAML at line"}},
      {"not an integer",
       edited("  num_blocks: 1\n  output_size", "  num_blocks: one\n  output_size"),
       ErrorCode::kCorruptFile,
       {"encoder_conf.num_blocks: expected an integer, found 'one'"}},
      {"vocab disagreement",
       edited("vocab_size: 6", "vocab_size: 7"),
       ErrorCode::kCorruptFile,
       {"output_dim 6 differs from vocab_size 7"}},
      {"heads",
       edited("  attention_heads: 2\n  causal", "  attention_heads: 3\n  causal"),
       ErrorCode::kInvalidArgument,
       {"train.yaml", "attention_heads 3"}},
      {"input dim",
       edited("input_dim: 8", "input_dim: 80"),
       ErrorCode::kInvalidArgument,
       {"input_dim 80 differs from the fbank's num_mel_bins 8"}},
      {"sos outside",
       edited("    <sos>: 5", "    <sos>: 9"),
       ErrorCode::kInvalidArgument,
       {"sos 9"}},
      {"a list", "- 1\n- 2\n", ErrorCode::kCorruptFile, {"not a YAML mapping"}},
  };
  for (const Refusal& refusal : cases) {
    EXPECT_TRUE(throws([&] { parse_wenet_train_yaml(refusal.yaml, "train.yaml"); }, refusal.code,
                       refusal.needles))
        << refusal.name;
  }
  std::string no_vocab = tiny_train_yaml();
  for (const char* line : {"output_dim: 6\n", "vocab_size: 6\n"})
    no_vocab.erase(no_vocab.find(line), std::strlen(line));
  EXPECT_TRUE(throws([&] { parse_wenet_train_yaml(no_vocab, "t.yaml"); }, ErrorCode::kCorruptFile,
                     {"neither output_dim nor vocab_size"}));
}

TEST(WenetTrainYaml, AcceptsTheOptionsTheModelImplements) {
  const std::string yaml =
      edited("  causal: true\n",
             "  causal: true\n  query_bias: false\n  conv_bias: false\n  norm_eps: 1.0e-12\n"
             "  gradient_checkpointing: true\n  use_sdpa: false\n  n_kv_head: 2\n");
  const auto c = parse_wenet_train_yaml(yaml, "train.yaml").config;
  EXPECT_FALSE(c.model.encoder.query_bias);
  EXPECT_TRUE(c.model.encoder.key_bias);
  EXPECT_FALSE(c.model.encoder.conv_bias);
  EXPECT_EQ(c.model.encoder.norm_eps, 1.0e-12f);
  const auto gelu =
      parse_wenet_train_yaml(edited("activation_type: swish", "activation_type: gelu"), "t");
  EXPECT_EQ(gelu.config.model.encoder.activation, Activation::kGeluErf);  // torch.nn.GELU: erf
  std::string wide = edited("input_layer: conv2d", "input_layer: conv2d6");
  wide.replace(wide.find("num_mel_bins: 8"), 15, "num_mel_bins: 80");
  wide.replace(wide.find("input_dim: 8"), 12, "input_dim: 80");
  const auto six = parse_wenet_train_yaml(wide, "t");
  EXPECT_EQ(six.config.model.encoder.input_layer, models::U2ppInputLayer::kConv2d6);
  // Without global_cmvn the encoder has no CMVN module.
  const auto none = parse_wenet_train_yaml(edited("cmvn: global_cmvn", "cmvn: null"), "t");
  EXPECT_FALSE(none.config.model.encoder.global_cmvn);
  EXPECT_EQ(none.paths.cmvn_file, "");
}

// ---- the directory ---------------------------------------------------------------

TEST(WenetDir, ChoosesFinalThenTheOnlyAverageElseRefusesListingCandidates) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(dir);
  EXPECT_TRUE(models::looks_like_wenet_dir(dir));
  fs::copy_file(dir / "final.pt", dir / "avg_5.pt");
  EXPECT_EQ(models::locate_wenet_dir(dir).checkpoint, dir / "final.pt");
  fs::remove(dir / "final.pt");
  EXPECT_EQ(models::locate_wenet_dir(dir).checkpoint, dir / "avg_5.pt");
  fs::copy_file(dir / "avg_5.pt", dir / "avg_10.pt");
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kInvalidArgument,
                     {"no final.pt and several avg_*.pt", "avg_10.pt, avg_5.pt", "pass the .pt"}));
  EXPECT_EQ(models::locate_wenet_dir(dir / "avg_10.pt").checkpoint, dir / "avg_10.pt");
  fs::remove(dir / "avg_5.pt");
  fs::rename(dir / "avg_10.pt", dir / "39.pt");
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kInvalidArgument,
                     {"no final.pt and no avg_*.pt", "candidates: 39.pt"}));
  fs::remove(dir / "39.pt");
  EXPECT_FALSE(models::looks_like_wenet_dir(dir));
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kNotFound, {"no *.pt"}));
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(tmp.path()); }, ErrorCode::kNotFound,
                     {"no train.yaml"}));
}

TEST(WenetDir, ResolvesRecordedPathsBesideTheCheckpointWhenAbsent) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(dir);
  const models::WenetDir located = models::locate_wenet_dir(dir);
  // Recorded data/train/global_cmvn and data/dict/lang_char.txt do not exist.
  EXPECT_EQ(located.cmvn, dir / "global_cmvn");
  EXPECT_EQ(located.units, dir / "units.txt");
  EXPECT_EQ(located.train_yaml, dir / "train.yaml");
  EXPECT_TRUE(located.bpe_model.empty());

  // The recorded symbol table's name beside the checkpoint wins over units.txt.
  write_text_file(dir / "lang_char.txt", testing::tiny_units());
  EXPECT_EQ(models::locate_wenet_dir(dir).units, dir / "lang_char.txt");
  fs::remove(dir / "lang_char.txt");
  fs::rename(dir / "units.txt", dir / "words.txt");
  EXPECT_EQ(models::locate_wenet_dir(dir).units, dir / "words.txt");
  fs::remove(dir / "words.txt");
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kNotFound,
                     {"no symbol table", "data/dict/lang_char.txt (as recorded in train.yaml)",
                      (dir / "lang_char.txt").string(), (dir / "units.txt").string(),
                      (dir / "words.txt").string(), (dir / "dict").string()}));
  write_text_file(dir / "units.txt", testing::tiny_units());

  // A recorded path that exists is used as recorded.
  const fs::path elsewhere = tmp.path() / "stats" / "other_cmvn";
  write_text_file(elsewhere, testing::cmvn_json(testing::tiny_stats(2.0)));
  write_text_file(dir / "train.yaml", tiny_train_yaml("", elsewhere.string()));
  EXPECT_EQ(models::locate_wenet_dir(dir).cmvn, elsewhere);
  const models::ModelSource source = models::load_wenet_dir(dir);
  EXPECT_TRUE(
      testing::bit_equal(source.cmvn.mean, testing::expected_cmvn(testing::tiny_stats(2.0)).first));

  // Missing both as recorded and beside: both places are named.
  write_text_file(dir / "train.yaml", tiny_train_yaml("", "/nonexistent/data/cmvn.json"));
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kNotFound,
                     {"the CMVN file '/nonexistent/data/cmvn.json' is missing",
                      "/nonexistent/data/cmvn.json (as recorded in train.yaml)",
                      (dir / "cmvn.json").string() + " (beside the checkpoint)"}));
}

TEST(WenetDir, FindsTheSentencepieceModelOfABpeTokenizer) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  std::string yaml = tiny_train_yaml();
  yaml.replace(yaml.find("tokenizer: char"), 15, "tokenizer: bpe");
  yaml.replace(yaml.find("bpe_path: null"), 14, "bpe_path: data/lang/train_unigram500.model");
  testing::write_tiny_wenet_dir(dir, yaml);
  EXPECT_TRUE(throws([&] { models::locate_wenet_dir(dir); }, ErrorCode::kNotFound,
                     {"tokenizer is bpe", "data/lang/train_unigram500.model (as recorded"}));
  write_text_file(dir / "train_unigram500.model", "sentencepiece bytes");
  const models::WenetDir located = models::locate_wenet_dir(dir);
  EXPECT_EQ(located.bpe_model, dir / "train_unigram500.model");
  EXPECT_EQ(located.yaml.config.tokenizer.type, models::TokenizerType::kBpe);

  // WeNet 2.x: no tokenizer key; a *.model beside the checkpoint means bpe.
  std::string v2 = tiny_train_yaml();
  v2.erase(v2.find("tokenizer: char\n"), 16);
  write_text_file(dir / "train.yaml", v2);
  EXPECT_EQ(models::locate_wenet_dir(dir).yaml.config.tokenizer.type, models::TokenizerType::kBpe);
  fs::remove(dir / "train_unigram500.model");
  EXPECT_EQ(models::locate_wenet_dir(dir).yaml.config.tokenizer.type, models::TokenizerType::kChar);
}

TEST(WenetDir, ReadsUnitsAndNamesTheLineOfEachDefect) {
  TempDir tmp;
  const fs::path units = tmp.path() / "units.txt";
  write_text_file(units, "b 1\n\na 0\nc 2\n");  // any order; blank lines skipped
  EXPECT_EQ(models::read_units(units, 3), (std::vector<std::string>{"a", "b", "c"}));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"a 0\nb 1\n", {"holds 2 units but the config's vocabulary has 3", "id 2 is missing"}},
      {"a 0\nb 1\nc 2\nd 3\n", {":4: id 3 is outside 0..2"}},
      {"a 0\nb 0\nc 2\n", {":2: id 0 appears twice"}},
      {"a 0\nb c 1\nd 2\n", {":2: expected \"<token> <id>\", found 3 fields"}},
      {"a 0\nb one\nd 2\n", {":2: id 'one' is not an integer"}},
  };
  for (const auto& [text, needles] : cases) {
    write_text_file(units, text);
    EXPECT_TRUE(throws([&] { models::read_units(units, 3); }, ErrorCode::kCorruptFile, needles))
        << text;
  }
  // An absurd vocabulary size (a damaged config) is refused by what the file
  // holds, without sizing a table for it (the fuzz finding: 2^40 units).
  write_text_file(units, "a 0\nb 1\n");
  EXPECT_TRUE(throws([&] { models::read_units(units, int64_t{1} << 40); }, ErrorCode::kCorruptFile,
                     {"holds 2 units but the config's vocabulary has 1099511627776", "id 2"}));
  write_text_file(units, "");
  EXPECT_TRUE(throws([&] { models::read_units(units, int64_t{1} << 40); }, ErrorCode::kCorruptFile,
                     {"holds 0 units", "id 0 is missing"}));
}

TEST(WenetDir, ComputesCmvnAsWenetDoesFromJsonAndKaldiText) {
  TempDir tmp;
  const testing::CmvnStats stats = testing::tiny_stats();
  const auto [mean, istd] = testing::expected_cmvn(stats);
  EXPECT_EQ(istd.data<float>()[7], 1e10f);  // the floored variance
  write_text_file(tmp.path() / "json", testing::cmvn_json(stats));
  write_text_file(tmp.path() / "kaldi", testing::cmvn_kaldi(stats));
  for (const char* name : {"json", "kaldi"}) {
    const models::Cmvn cmvn = models::load_cmvn_stats(tmp.path() / name);
    EXPECT_TRUE(testing::bit_equal(cmvn.mean, mean)) << name;
    EXPECT_TRUE(testing::bit_equal(cmvn.istd, istd)) << name;
  }
  const std::vector<std::tuple<std::string, ErrorCode, std::string>> broken = {
      {std::string("\0B", 2) + "FM ", ErrorCode::kUnsupported, "--binary=false"},
      {"{\"mean_stat\": [1, 2], \"var_stat\": [1]", ErrorCode::kCorruptFile, "malformed JSON"},
      {"{\"mean_stat\": [1, 2], \"var_stat\": [1], \"frame_num\": 3}", ErrorCode::kCorruptFile,
       "2 sums and 1 sums of squares"},
      {"{\"mean_stat\": [1], \"var_stat\": [1], \"frame_num\": 0}", ErrorCode::kCorruptFile,
       "frame count is 0"},
      {"{\"var_stat\": [1], \"frame_num\": 3}", ErrorCode::kCorruptFile,
       "lacks the array \"mean_stat\""},
      {" [ 1 2 10 \n 3 4 1 ]", ErrorCode::kCorruptFile, "last value is '1'"},
      {" [ 1 x 10 \n 3 4 0 ]", ErrorCode::kCorruptFile, "value #2 'x' is not a number"},
      {" [ 1 2 10 \n 3 4 ]", ErrorCode::kCorruptFile, "not a Kaldi text CMVN matrix"},
      {"mean 1 2 3", ErrorCode::kCorruptFile, "neither JSON"},
  };
  for (const auto& [text, code, needle] : broken) {
    write_text_file(tmp.path() / "bad", text);
    EXPECT_TRUE(throws([&] { models::load_cmvn_stats(tmp.path() / "bad"); }, code, {needle}))
        << text;
  }
}

TEST(WenetDir, LoadsTheStateDictAndAddsCmvnFromTheStatistics) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(dir);
  const models::ModelSource source = models::load_wenet_dir(dir);
  EXPECT_EQ(source.format, models::CheckpointFormat::kWenet);
  EXPECT_EQ(source.weights_path, dir / "final.pt");
  EXPECT_EQ(source.units.at(2), "\xe4\xbd\xa0");
  EXPECT_EQ(source.units.size(), 6u);
  EXPECT_TRUE(source.config.model.encoder.global_cmvn);
  const auto [mean, istd] = testing::expected_cmvn(testing::tiny_stats());
  EXPECT_TRUE(testing::bit_equal(source.cmvn.mean, mean));
  EXPECT_TRUE(testing::bit_equal(source.cmvn.istd, istd));
  // The state dict's order, then the CMVN buffers it lacked.
  const auto state = testing::tiny_state_dict();
  const std::vector<std::string> names = source.weights->names();
  ASSERT_EQ(names.size(), state.size() + 2);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(names[i], state[i].first);
    EXPECT_TRUE(testing::bit_equal(source.weights->get(names[i]), state[i].second));
  }
  EXPECT_EQ(names[state.size()], "encoder.global_cmvn.mean");
  EXPECT_TRUE(testing::bit_equal(source.weights->get("encoder.global_cmvn.istd"), istd));
}

TEST(WenetDir, PrefersTheCheckpointsCmvnBuffersAsWenetDoes) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  testing::write_tiny_wenet_dir(dir);
  auto state = testing::tiny_state_dict();
  const Tensor buffer_mean = Tensor::full({8}, 0.75f);
  const Tensor buffer_istd = Tensor::full({8}, 2.0f);
  state.insert(state.begin(), {"encoder.global_cmvn.istd", buffer_istd});
  state.insert(state.begin(), {"encoder.global_cmvn.mean", buffer_mean});
  testing::write_state_dict_pt(dir / "final.pt", state);
  const models::ModelSource source = models::load_wenet_dir(dir);
  EXPECT_TRUE(testing::bit_equal(source.cmvn.mean, buffer_mean));
  EXPECT_TRUE(testing::bit_equal(source.cmvn.istd, buffer_istd));
  EXPECT_EQ(source.weights->names().size(), state.size());  // nothing added
  EXPECT_EQ(source.weights->names().front(), "encoder.global_cmvn.mean");

  state.erase(state.begin() + 1);  // the istd buffer alone is missing
  testing::write_state_dict_pt(dir / "final.pt", state);
  EXPECT_TRUE(throws([&] { models::load_wenet_dir(dir); }, ErrorCode::kCorruptFile,
                     {"final.pt", "holds only one of"}));
}

TEST(WenetDir, RefusesAVocabularyTheUnitsDoNotMatch) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "exp";
  std::string yaml = edited("output_dim: 6", "output_dim: 7");
  yaml.replace(yaml.find("vocab_size: 6"), 13, "vocab_size: 7");
  testing::write_tiny_wenet_dir(dir, yaml);
  EXPECT_TRUE(throws([&] { models::load_wenet_dir(dir); }, ErrorCode::kCorruptFile,
                     {"units.txt", "holds 6 units but the config's vocabulary has 7"}));
  fs::remove(dir / "units.txt");
  write_text_file(dir / "train.yaml", tiny_train_yaml());
  EXPECT_TRUE(
      throws([&] { models::load_wenet_dir(dir); }, ErrorCode::kNotFound, {"no symbol table"}));
}

}  // namespace
}  // namespace oasr
