// NeMo FastConformer CTC (src/models/fastconformer) against NeMo itself: a
// random-weight 2-layer FastConformer that fastconformer/
// make_fastconformer_case.py builds with NeMo 3.0 and saves with save_to
// (committed under fastconformer/data, since NeMo needs a torch newer than
// Debian's; ctest -L regen with OASR_REGEN=1 re-makes it where .venv-nemo
// exists). Per utterance of real speech: NeMo's features, encoder output,
// CTC log-probabilities and greedy tokens; and the three encoded together as
// one padded batch; and NeMo's CTC token offsets (ctc_timestamps.json).
//
// Tolerances, float32 on both sides (different GEMM blockings, FFT and
// summation orders; the measured differences are printed): the features
// come from our FFT against torch.stft, the encoder and log-probs from our
// GEMMs against MKL's. Greedy tokens must be identical: the generator
// reports the smallest top-1 / top-2 log-prob margin over the frames, far
// above the float32 noise.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "audio/nemo_mel.h"
#include "core/error.h"
#include "engine/asr_engine.h"
#include "io/safetensors.h"
#include "io/tar_archive.h"
#include "models/fastconformer/fastconformer_model.h"
#include "models/fastconformer/nemo_source.h"
#include "ops/concat.h"
#include "oracle/fastconformer/unpacked_nemo.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr float kFeatureAtol = 1e-3f;
constexpr float kEncodedAtol = 2e-4f;
constexpr float kLogProbAtol = 2e-4f;
constexpr float kBatchAtol = 2e-4f;
const char* const kUtterances[] = {"u00", "u01", "u02"};

struct Case {
  models::NemoSource source;
  std::unique_ptr<models::FastConformerModel> model;
  io::SafeTensorsFile reference;
  json summary;
  json timestamps;  // NeMo's CTC token offsets per utterance
};

fs::path nemo_file() {
  return testing::oracle_dir() / "ctc.nemo";
}

const Case& the_case() {
  static const Case* loaded = [] {
    auto* c = new Case{};
    c->source = models::load_nemo_checkpoint(nemo_file());
    c->model = std::make_unique<models::FastConformerModel>(c->source.config);
    c->model->load_state_dict(*c->source.weights);
    c->reference = io::SafeTensorsFile::open(testing::oracle_dir() / "reference.safetensors");
    std::ifstream in(testing::oracle_dir() / "summary.json");
    c->summary = json::parse(in);
    std::ifstream offsets(testing::oracle_dir() / "ctc_timestamps.json");
    c->timestamps = json::parse(offsets);
    return c;
  }();
  return *loaded;
}

using testing::int64_values;

// The largest difference, after checking the shapes agree.
float max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  return a.shape() == b.shape() ? testing::max_abs_difference(a, b) : INFINITY;
}

// NeMo's features [F, T] as the encoder takes them: [1, T, F].
Tensor frames_first(const Tensor& features) {
  return features.transpose(0, 1).contiguous().unsqueeze(0);
}

TEST(FastConformerOracle, ArchiveReadAsSaved) {
  const Case& c = the_case();
  const models::FastConformerConfig& config = c.source.config;
  EXPECT_EQ(config.encoder.n_layers, 2);
  EXPECT_EQ(config.encoder.d_model, 64);
  EXPECT_EQ(config.encoder.subsampling_conv_channels, 32);
  EXPECT_EQ(config.encoder.conv_kernel_size, 9);
  EXPECT_EQ(config.vocabulary.size(), 48u);
  EXPECT_EQ(config.blank_id(), 48);
  EXPECT_EQ(config.preprocessor.win_length, 400);
  EXPECT_EQ(config.preprocessor.hop_length, 160);
  EXPECT_EQ(c.source.mel_filterbank.shape(), (Shape{1, 80, 257}));
  // The weights file is read in place inside the tar.
  const io::TarArchive tar = io::read_tar_archive(nemo_file());
  ASSERT_NE(tar.find("model_weights.ckpt"), nullptr);
  EXPECT_GT(tar.find("model_weights.ckpt")->offset, 0u);
}

TEST(FastConformerOracle, FeaturesMatchNemo) {
  const Case& c = the_case();
  for (const char* key : kUtterances) {
    const Tensor audio = c.reference.get(std::string(key) + ".audio");
    const Tensor expected = c.reference.get(std::string(key) + ".features");
    const audio::NemoMelSpectrogram mel(c.source.config.preprocessor, c.source.mel_window,
                                        c.source.mel_filterbank);
    const Tensor ours = mel.compute(
        std::span<const float>(audio.data<float>(), static_cast<size_t>(audio.numel())));
    const float diff = max_abs_diff(ours, expected);
    std::cout << key << ": features max |diff| " << diff << "\n";
    EXPECT_LE(diff, kFeatureAtol) << key;
  }
}

TEST(FastConformerOracle, EncoderAndCtcHeadMatchNemo) {
  const Case& c = the_case();
  for (const char* key : kUtterances) {
    const Tensor features = c.reference.get(std::string(key) + ".features");
    const int64_t frames = features.size(1);
    const auto out = c.model->forward(frames_first(features), std::vector<int64_t>{frames});
    const Tensor expected = c.reference.get(std::string(key) + ".log_probs");
    ASSERT_EQ(out.lengths.front(), expected.size(0)) << key;
    const float diff = max_abs_diff(out.log_probs.select(0, 0), expected);
    std::cout << key << ": log-probs max |diff| " << diff << "\n";
    EXPECT_LE(diff, kLogProbAtol) << key;
    const auto encoded =
        c.model->encoder().forward(frames_first(features), std::vector<int64_t>{frames});
    const float enc_diff =
        max_abs_diff(encoded.out.select(0, 0), c.reference.get(std::string(key) + ".encoded"));
    std::cout << key << ": encoder max |diff| " << enc_diff << "\n";
    EXPECT_LE(enc_diff, kEncodedAtol) << key;
  }
}

TEST(FastConformerOracle, TranscribesAudioAsNemo) {
  const Case& c = the_case();
  engine::EngineConfig config;
  config.ckpt_dir = nemo_file();
  engine::ASREngine engine(config);
  std::vector<std::vector<float>> waves;
  for (const char* key : kUtterances) {
    const Tensor audio = c.reference.get(std::string(key) + ".audio");
    waves.emplace_back(audio.data<float>(), audio.data<float>() + audio.numel());
  }
  // All three in one call (a padded batch) and each alone: NeMo's tokens.
  const auto together = engine.transcribe(waves);
  for (size_t i = 0; i < waves.size(); ++i) {
    const std::string key = kUtterances[i];
    const std::vector<int64_t> expected = int64_values(c.reference.get(key + ".greedy"));
    const json& u = c.summary.at("utterances").at(key);
    EXPECT_EQ(together[i].tokens, expected) << key;
    EXPECT_EQ(together[i].text, u.at("greedy_text").get<std::string>()) << key;
    const auto alone = engine.transcribe(std::vector<std::vector<float>>{waves[i]});
    EXPECT_EQ(alone.front().tokens, expected) << key;
    // NeMo's CTC timestamps (compute_timestamps, its "char" offsets, in
    // 80 ms encoder frames): ctc_timestamps.json, made by NeMo's own
    // decoding from these log-probabilities.
    const json& offsets = c.timestamps.at(key);
    const auto starts = offsets.at("start_frame").get<std::vector<int64_t>>();
    const auto ends = offsets.at("end_frame").get<std::vector<int64_t>>();
    ASSERT_EQ(together[i].token_times.size(), starts.size()) << key;
    for (size_t k = 0; k < starts.size(); ++k) {
      EXPECT_NEAR(together[i].token_times[k].start, 0.08 * static_cast<double>(starts[k]), 1e-9)
          << key << " token " << k;
      EXPECT_NEAR(together[i].token_times[k].end, 0.08 * static_cast<double>(ends[k]), 1e-9)
          << key << " token " << k;
    }
  }
}

TEST(FastConformerOracle, CudaIsRefusedByNameUntilItRanOnADevice) {
  engine::EngineConfig config;
  config.ckpt_dir = nemo_file();
  config.device = "cuda";
  try {
    engine::ASREngine engine(config);
    FAIL() << "--device cuda was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NeMo FastConformer"), std::string::npos) << e.what();
  }
}

TEST(FastConformerOracle, PaddedBatchRowsAreTheirAloneBits) {
  const Case& c = the_case();
  std::vector<Tensor> rows;
  std::vector<int64_t> lengths;
  int64_t longest = 0;
  for (const char* key : kUtterances) {
    rows.push_back(frames_first(c.reference.get(std::string(key) + ".features")));
    lengths.push_back(rows.back().size(1));
    longest = std::max(longest, lengths.back());
  }
  Tensor batch = Tensor::zeros({3, longest, rows.front().size(2)}, DType::kF32);
  for (int64_t b = 0; b < 3; ++b) {
    batch.select(0, b).narrow(0, 0, lengths[b]).copy_(rows[b].select(0, 0));
  }
  const auto together = c.model->encoder().forward(batch, lengths);
  const Tensor nemo_batch = c.reference.get("batch.encoded");
  const std::vector<int64_t> nemo_lengths = int64_values(c.reference.get("batch.lengths"));
  EXPECT_EQ(together.lengths, nemo_lengths);
  for (int64_t b = 0; b < 3; ++b) {
    const auto alone = c.model->encoder().forward(rows[b], std::vector<int64_t>{lengths[b]});
    const int64_t n = together.lengths[b];
    EXPECT_TRUE(testing::bit_equal(together.out.select(0, b).narrow(0, 0, n).contiguous(),
                                   alone.out.select(0, 0).contiguous()))
        << "row " << b << " depends on its neighbours";
    const float diff = max_abs_diff(together.out.select(0, b).narrow(0, 0, n),
                                    nemo_batch.select(0, b).narrow(0, 0, n));
    std::cout << "batch row " << b << ": max |diff| vs NeMo's batch " << diff << "\n";
    EXPECT_LE(diff, kBatchAtol);
  }
}

// An unpacked copy of the archive, to plant defects in.
fs::path unpacked_copy(const std::string& name) {
  return testing::unpacked_nemo_copy(nemo_file(), "ctc_" + name);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void replace_in(const fs::path& p, const std::string& from, const std::string& to) {
  std::string text = read_text(p);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(p) << text;
}

std::string refusal(const fs::path& path) {
  try {
    models::load_nemo_checkpoint(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(FastConformerOracle, UnpackedDirectoryServesTheSame) {
  const fs::path dir = unpacked_copy("dir");
  const models::NemoSource source = models::load_nemo_checkpoint(dir);
  EXPECT_EQ(source.config.vocabulary, the_case().source.config.vocabulary);
  EXPECT_TRUE(models::is_nemo_checkpoint(dir));
  fs::remove_all(dir);
}

TEST(FastConformerOracle, RefusesBadCheckpointsByName) {
  {
    const fs::path dir = unpacked_copy("missing");
    fs::remove(dir / "model_config.yaml");
    EXPECT_FALSE(models::is_nemo_checkpoint(dir));
    EXPECT_NE(refusal(dir).find("model_config.yaml"), std::string::npos) << refusal(dir);
    fs::remove_all(dir);
  }
  {
    const fs::path dir = unpacked_copy("subsampling");
    replace_in(dir / "model_config.yaml", "subsampling: dw_striding", "subsampling: vggnet");
    const std::string why = refusal(dir);
    EXPECT_NE(why.find("encoder.subsampling"), std::string::npos) << why;
    EXPECT_NE(why.find("vggnet"), std::string::npos) << why;
    fs::remove_all(dir);
  }
  {
    const fs::path dir = unpacked_copy("normalize");
    replace_in(dir / "model_config.yaml", "normalize: per_feature", "normalize: per_frame");
    const std::string why = refusal(dir);
    EXPECT_NE(why.find("preprocessor.normalize"), std::string::npos) << why;
    EXPECT_NE(why.find("per_frame"), std::string::npos) << why;
    fs::remove_all(dir);
  }
  {
    const fs::path dir = unpacked_copy("decoder");
    replace_in(dir / "model_config.yaml", "nemo.collections.asr.modules.ConvASRDecoder",
               "nemo.collections.asr.modules.RNNTDecoder");
    const std::string why = refusal(dir);
    EXPECT_NE(why.find("decoder._target_"), std::string::npos) << why;
    fs::remove_all(dir);
  }
  {
    // A tokenizer with other pieces than the head's vocabulary.
    const fs::path dir = unpacked_copy("tokenizer");
    replace_in(dir / "model_config.yaml", "  - ▁the\n", "  - ▁thx\n");
    const std::string why = refusal(dir);
    EXPECT_NE(why.find("does not belong to this model"), std::string::npos) << why;
    fs::remove_all(dir);
  }
  {
    // A truncated archive.
    const fs::path file = fs::temp_directory_path() / "oasr_fastconformer_truncated.nemo";
    fs::copy_file(nemo_file(), file, fs::copy_options::overwrite_existing);
    fs::resize_file(file, fs::file_size(file) / 2);
    const std::string why = refusal(file);
    EXPECT_NE(why.find("truncated"), std::string::npos) << why;
    fs::remove(file);
  }
}

}  // namespace
}  // namespace oasr
