// Files written by PyTorch's torch.save (gen_torch_checkpoint.py) read by
// oasr's reader, compared with the values PyTorch loads from them. Every
// comparison is bitwise (tolerance 0): reading a checkpoint is a copy, and
// the only arithmetic -- float64 -> float32, the CMVN statistics -- is
// specified to round exactly as PyTorch / WeNet's float64 code rounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "models/u2pp/native_checkpoint.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;

class TorchCheckpointOracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    expected_ = new io::SafeTensorsFile(
        io::SafeTensorsFile::open(testing::oracle_dir() / "cases.safetensors"));
    cases_ = new nlohmann::json(nlohmann::json::parse(expected_->metadata().at("cases")));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete cases_;
  }
  static Tensor expected(const std::string& case_name, const std::string& tensor) {
    return expected_->get(case_name + "/" + tensor);
  }
  static const nlohmann::json& meta(const std::string& case_name) { return cases_->at(case_name); }

  static io::SafeTensorsFile* expected_;
  static nlohmann::json* cases_;
};

io::SafeTensorsFile* TorchCheckpointOracle::expected_ = nullptr;
nlohmann::json* TorchCheckpointOracle::cases_ = nullptr;

TEST_F(TorchCheckpointOracle, EveryStateDictReadsAsPyTorchLoadsIt) {
  size_t checked = 0;
  for (const auto& [name, info] : cases_->items()) {
    if (!info["refused"].is_null()) continue;
    SCOPED_TRACE(name);
    const io::TorchStateDict state =
        io::load_torch_state_dict(testing::oracle_dir() / info["file"].get<std::string>());
    EXPECT_EQ(state.container_key, info["container"].get<std::string>());
    EXPECT_EQ(state.converted, info["converted"].get<std::vector<std::string>>());
    const auto names = info["names"].get<std::vector<std::string>>();
    ASSERT_EQ(state.tensors.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(state.tensors[i].first, names[i]);
      // (An empty tensor is skipped: core's is_contiguous() says false for
      // Tensor::empty({2, 0, 3}), whose strides contiguous_strides() made.)
      const Tensor& got = state.tensors[i].second;
      EXPECT_TRUE(got.numel() == 0 || got.is_contiguous()) << names[i];
      EXPECT_TRUE(testing::bit_equal(state.tensors[i].second, expected(name, names[i])))
          << names[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);  // the dtype, module and WeNet cases all ran
}

TEST_F(TorchCheckpointOracle, RefusesWhatItCannotReadWithAReason) {
  for (const auto& [name, info] : cases_->items()) {
    if (info["refused"].is_null()) continue;
    SCOPED_TRACE(name);
    const fs::path path = testing::oracle_dir() / info["file"].get<std::string>();
    const ErrorCode code = info["refused"]["code"] == "unsupported" ? ErrorCode::kUnsupported
                                                                    : ErrorCode::kCorruptFile;
    try {
      io::load_torch_state_dict(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      for (const auto& needle : info["refused"]["needles"]) {
        EXPECT_NE(std::string(e.what()).find(needle.get<std::string>()), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST_F(TorchCheckpointOracle, WenetDirectoriesLoadAndConvertToNativeBitForBit) {
  for (const char* name : {"wenet_v3", "wenet_v2", "wenet_kaldi"}) {
    SCOPED_TRACE(name);
    const nlohmann::json& info = meta(name);
    const fs::path dir = testing::oracle_dir() / info["dir"].get<std::string>();
    const models::ModelSource wenet = models::load_checkpoint_dir(dir);
    EXPECT_EQ(wenet.format, models::CheckpointFormat::kWenet);
    EXPECT_EQ(wenet.weights_path.filename(), info["checkpoint"].get<std::string>());
    EXPECT_EQ(wenet.units, info["units"].get<std::vector<std::string>>());

    const nlohmann::json& c = info["config"];
    const models::U2ppConfig& m = wenet.config.model;
    EXPECT_EQ(m.encoder.input_dim, c["input_dim"]);
    EXPECT_EQ(m.vocab_size, c["vocab_size"]);
    EXPECT_EQ(m.encoder.output_size, c["output_size"]);
    EXPECT_EQ(m.encoder.attention_heads, c["attention_heads"]);
    EXPECT_EQ(m.encoder.linear_units, c["linear_units"]);
    EXPECT_EQ(m.encoder.num_blocks, c["num_blocks"]);
    EXPECT_EQ(m.encoder.cnn_module_kernel, c["cnn_module_kernel"]);
    EXPECT_EQ(m.encoder.causal, c["causal"]);
    EXPECT_EQ(models::u2pp_conv_norm_name(m.encoder.cnn_module_norm), c["cnn_module_norm"]);
    EXPECT_EQ(m.decoder.num_blocks, c["decoder_num_blocks"]);
    EXPECT_EQ(m.decoder.r_num_blocks, c["decoder_r_num_blocks"]);
    EXPECT_EQ(m.sos_id(), c["sos"]);
    EXPECT_EQ(m.eos_id(), c["eos"]);
    EXPECT_DOUBLE_EQ(wenet.config.ctc_weight, c["ctc_weight"].get<double>());
    EXPECT_DOUBLE_EQ(wenet.config.reverse_weight, c["reverse_weight"].get<double>());
    EXPECT_TRUE(m.encoder.global_cmvn);

    // CMVN as WeNet computes it from the statistics (JSON or Kaldi text).
    EXPECT_TRUE(testing::bit_equal(wenet.cmvn.mean, expected(name, "cmvn_mean")));
    EXPECT_TRUE(testing::bit_equal(wenet.cmvn.istd, expected(name, "cmvn_istd")));

    // Every tensor of final.pt, in its order; the Kaldi case's state dict
    // lacks the CMVN buffers, which the loader appends from the statistics.
    std::vector<std::string> names = info["names"].get<std::vector<std::string>>();
    if (std::string(name) == "wenet_kaldi") {
      names.push_back("encoder.global_cmvn.mean");
      names.push_back("encoder.global_cmvn.istd");
    }
    ASSERT_EQ(wenet.weights->names(), names);
    for (const std::string& tensor : info["names"].get<std::vector<std::string>>()) {
      EXPECT_TRUE(testing::bit_equal(wenet.weights->get(tensor), expected(name, tensor))) << tensor;
    }

    testing::TempDir tmp;
    models::save_native_checkpoint(wenet, tmp.path() / "native");
    const models::ModelSource native = models::load_checkpoint_dir(tmp.path() / "native");
    EXPECT_EQ(native.format, models::CheckpointFormat::kNative);
    ASSERT_EQ(native.weights->names(), names);
    for (const std::string& tensor : names) {
      EXPECT_TRUE(testing::bit_equal(native.weights->get(tensor), wenet.weights->get(tensor)))
          << tensor;
    }
    EXPECT_TRUE(testing::bit_equal(native.cmvn.mean, expected(name, "cmvn_mean")));
    EXPECT_TRUE(testing::bit_equal(native.cmvn.istd, expected(name, "cmvn_istd")));
    EXPECT_EQ(native.units, wenet.units);
    nlohmann::ordered_json a = models::native_config_json(wenet);
    nlohmann::ordered_json b = models::native_config_json(native);
    a.erase("source");
    b.erase("source");
    EXPECT_EQ(a.dump(), b.dump());
  }
}

}  // namespace
}  // namespace oasr
