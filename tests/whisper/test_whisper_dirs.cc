// Whisper directories (models/whisper/whisper_dir.h) and the CTranslate2 converter
// (models/whisper/whisper_convert.h) against gen_whisper_dirs.py: random-weight
// models built by transformers, saved by transformers in each HF layout and
// written as CTranslate2 directories by the generator's own writer. Every
// tensor must come back bit-equal to the HF state dict (cast by torch, or
// dequantized by numpy for int8); configs and generation settings as the
// generator states them; defective directories refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/whisper/whisper_convert.h"
#include "models/whisper/whisper_dir.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using models::WhisperGeneration;
using models::WhisperSource;
using nlohmann::json;

const json& cases() {
  return testing::oracle_cases().cases;
}

fs::path case_dir(const std::string& name) {
  return testing::oracle_dir() / name;
}

void expect_config(const models::WhisperConfig& got, const json& want) {
  EXPECT_EQ(got.num_mel_bins, want["num_mel_bins"].get<int64_t>());
  EXPECT_EQ(got.d_model, want["d_model"].get<int64_t>());
  EXPECT_EQ(got.encoder_layers, want["encoder_layers"].get<int64_t>());
  EXPECT_EQ(got.encoder_attention_heads, want["encoder_attention_heads"].get<int64_t>());
  EXPECT_EQ(got.decoder_layers, want["decoder_layers"].get<int64_t>());
  EXPECT_EQ(got.decoder_attention_heads, want["decoder_attention_heads"].get<int64_t>());
  EXPECT_EQ(got.encoder_ffn_dim, want["encoder_ffn_dim"].get<int64_t>());
  EXPECT_EQ(got.decoder_ffn_dim, want["decoder_ffn_dim"].get<int64_t>());
  EXPECT_EQ(got.vocab_size, want["vocab_size"].get<int64_t>());
  EXPECT_EQ(got.max_source_positions, want["max_source_positions"].get<int64_t>());
  EXPECT_EQ(got.max_target_positions, want["max_target_positions"].get<int64_t>());
  EXPECT_EQ(got.activation_function, "gelu");
  EXPECT_FALSE(got.scale_embedding);
}

void expect_generation(const WhisperGeneration& got, const json& want) {
  EXPECT_EQ(got.decoder_start_token_id, want["decoder_start_token_id"].get<int64_t>());
  EXPECT_EQ(got.eos_token_id, want["eos_token_id"].get<int64_t>());
  EXPECT_EQ(got.pad_token_id, want["pad_token_id"].get<int64_t>());
  EXPECT_EQ(got.no_timestamps_token_id, want["no_timestamps_token_id"].get<int64_t>());
  EXPECT_EQ(got.is_multilingual, want["is_multilingual"].get<bool>());
  EXPECT_EQ(got.suppress_tokens, want["suppress_tokens"].get<std::vector<int64_t>>());
  EXPECT_EQ(got.begin_suppress_tokens, want["begin_suppress_tokens"].get<std::vector<int64_t>>());
  EXPECT_EQ(got.max_length, want["max_length"].get<int64_t>());
  std::vector<std::pair<int64_t, int64_t>> heads;
  for (const json& pair : want["alignment_heads"]) heads.emplace_back(pair[0], pair[1]);
  EXPECT_EQ(got.alignment_heads, heads);
  EXPECT_EQ(got.prev_sot_token_id, want["prev_sot_token_id"].get<int64_t>());
  EXPECT_EQ(got.lang_to_id, (want["lang_to_id"].get<std::map<std::string, int64_t>>()));
  const auto optional_id = [](const json& value) {
    return value.is_null() ? std::optional<int64_t>() : value.get<int64_t>();
  };
  EXPECT_EQ(got.transcribe_token_id, optional_id(want["transcribe_token_id"]));
  EXPECT_EQ(got.translate_token_id, optional_id(want["translate_token_id"]));
}

void expect_notes(const std::vector<std::string>& notes, const json& needles) {
  for (const json& needle : needles) {
    bool found = false;
    for (const std::string& note : notes)
      found |= note.find(needle.get<std::string>()) != std::string::npos;
    EXPECT_TRUE(found) << "no note mentions \"" << needle.get<std::string>() << "\"";
  }
}

// Every tensor of `weights` bit-equal to the expected set (cast to `dtype`
// when given). Names in HF's state-dict order, except for files transformers
// wrote (its safetensors files are sorted by name).
void expect_tensors(const TensorSource& weights, const json& info,
                    std::optional<DType> dtype = std::nullopt, bool state_dict_order = true) {
  const auto names = info["names"].get<std::vector<std::string>>();
  if (state_dict_order) {
    EXPECT_EQ(weights.names(), names);
  } else {
    std::vector<std::string> got = weights.names(), want = names;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
  }
  const std::string set = info["tensors"].get<std::string>();
  for (const std::string& name : names) {
    if (!weights.contains(name)) continue;
    Tensor want = testing::oracle_cases().file.get(set + "/" + name);
    if (dtype) want = want.to(*dtype);
    EXPECT_TRUE(testing::bit_equal(weights.get(name).contiguous(), want)) << name;
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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

ErrorCode code_named(const std::string& name) {
  if (name == "kUnsupported") return ErrorCode::kUnsupported;
  if (name == "kNotFound") return ErrorCode::kNotFound;
  return ErrorCode::kCorruptFile;
}

TEST(WhisperDirs, HfDirectoriesLoadInEveryLayout) {
  int checked = 0;
  for (const auto& [name, info] : cases().items()) {
    if (!info.contains("kind") || info["kind"] != "hf") continue;
    SCOPED_TRACE(name);
    EXPECT_TRUE(models::is_whisper_dir(case_dir(name)));
    const WhisperSource source = models::load_whisper_dir(case_dir(name));
    expect_config(source.config, info["config"]);
    expect_generation(source.generation, info["generation"]);
    expect_notes(source.notes, info["notes"]);
    expect_tensors(*source.weights, info, std::nullopt, /*state_dict_order=*/false);
    EXPECT_FALSE(source.weights->contains("proj_out.weight"));
    EXPECT_TRUE(source.tokenizer_json.empty() != source.vocab_json.empty());
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(WhisperDirs, VocabMergesTokenizerIsLocated) {
  const WhisperSource source = models::load_whisper_dir(case_dir("hf_en_torch"));
  EXPECT_EQ(source.vocab_json, case_dir("hf_en_torch") / "vocab.json");
  EXPECT_EQ(source.merges_txt, case_dir("hf_en_torch") / "merges.txt");
  EXPECT_EQ(source.added_tokens_json, case_dir("hf_en_torch") / "added_tokens.json");
  EXPECT_EQ(source.weights_path, case_dir("hf_en_torch") / "pytorch_model.bin");
}

TEST(WhisperDirs, Ct2DirectoriesReadUnderHfNames) {
  int checked = 0;
  for (const auto& [name, info] : cases().items()) {
    if (!info.contains("kind") || info["kind"] != "ct2") continue;
    SCOPED_TRACE(name);
    EXPECT_TRUE(models::is_ct2_whisper_dir(case_dir(name)));
    EXPECT_FALSE(models::is_whisper_dir(case_dir(name)));
    const models::Ct2WhisperDir ct2 = models::read_ct2_whisper_dir(case_dir(name));
    EXPECT_EQ(ct2.binary_version, 6u);
    EXPECT_EQ(ct2.aliases, 1u);
    expect_config(ct2.source.config, info["config"]);
    expect_generation(ct2.source.generation, info["generation"]);
    expect_notes(ct2.source.notes, info["notes"]);
    expect_tensors(*ct2.source.weights, info);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(WhisperDirs, ConvertedDirectoryReadsBackAsTheSameModel) {
  for (const char* name : {"ct2_en_f32", "ct2_multi_f16", "ct2_en_int8"}) {
    SCOPED_TRACE(name);
    const json& info = cases().at(name);
    const models::Ct2WhisperDir ct2 = models::read_ct2_whisper_dir(case_dir(name));
    testing::TempDir temp;
    const fs::path out = temp.path() / "converted";
    models::WhisperWriteOptions options;
    options.converted_from = "test";
    models::save_whisper_dir(ct2.source, out, options);
    for (const char* file : {"config.json", "generation_config.json", "model.safetensors",
                             "tokenizer.json", "preprocessor_config.json", "oasr_config.json"}) {
      EXPECT_TRUE(fs::is_regular_file(out / file)) << file;
    }
    EXPECT_FALSE(fs::exists(out / "vocabulary.txt"));  // CTranslate2's own file stays behind
    const json oasr = json::parse(read_text(out / "oasr_config.json"));
    EXPECT_EQ(
        oasr,
        (json{{"architecture", "whisper"}, {"format_version", 1}, {"converted_from", "test"}}));
    EXPECT_EQ(read_text(out / "tokenizer.json"), read_text(case_dir(name) / "tokenizer.json"));
    const io::SafeTensorsFile file = io::SafeTensorsFile::open(out / "model.safetensors");
    EXPECT_EQ(file.metadata().at("format"), "pt");
    const WhisperSource back = models::load_whisper_dir(out);
    expect_config(back.config, info["config"]);
    expect_generation(back.generation, info["generation"]);
    expect_tensors(*back.weights, info);
    // Nothing was left for the fallbacks: the written generation config is complete.
    for (const std::string& note : back.notes) ADD_FAILURE() << "unexpected note: " << note;
    // Siblings of the destination: no staging directory left behind.
    for (const auto& entry : fs::directory_iterator(temp.path())) {
      EXPECT_EQ(entry.path().filename(), "converted");
    }
  }
}

TEST(WhisperDirs, DtypeOptionCastsEveryTensor) {
  const json& info = cases().at("ct2_en_f32");
  const models::Ct2WhisperDir ct2 = models::read_ct2_whisper_dir(case_dir("ct2_en_f32"));
  testing::TempDir temp;
  models::WhisperWriteOptions half;
  half.dtype = DType::kF16;
  models::save_whisper_dir(ct2.source, temp.path() / "half", half);
  const WhisperSource back = models::load_whisper_dir(temp.path() / "half");
  expect_tensors(*back.weights, info, DType::kF16);
  EXPECT_EQ(json::parse(read_text(temp.path() / "half" / "config.json"))["torch_dtype"], "float16");
}

TEST(WhisperDirs, WritingRefusesToClobber) {
  const models::Ct2WhisperDir ct2 = models::read_ct2_whisper_dir(case_dir("ct2_en_f32"));
  testing::TempDir temp;
  const fs::path out = temp.path() / "out";
  models::save_whisper_dir(ct2.source, out);
  EXPECT_TRUE(throws([&] { models::save_whisper_dir(ct2.source, out); },
                     ErrorCode::kInvalidArgument, {"exists and is not empty", "--force"}));
  models::WhisperWriteOptions force;
  force.force = true;
  models::save_whisper_dir(ct2.source, out, force);  // an oasr directory: replaced
  EXPECT_TRUE(fs::is_regular_file(out / "model.safetensors"));
  const fs::path foreign = temp.path() / "foreign";
  fs::create_directories(foreign);
  std::ofstream(foreign / "notes.txt") << "keep me";
  EXPECT_TRUE(throws([&] { models::save_whisper_dir(ct2.source, foreign, force); },
                     ErrorCode::kInvalidArgument, {"not an oasr checkpoint directory"}));
  EXPECT_TRUE(fs::is_regular_file(foreign / "notes.txt"));
}

TEST(WhisperDirs, DefectiveDirectoriesAreRefusedByName) {
  int checked = 0;
  for (const auto& [name, info] : cases().items()) {
    if (!info.contains("refused")) continue;
    SCOPED_TRACE(name);
    std::vector<std::string> needles = info["refused"]["needles"].get<std::vector<std::string>>();
    const bool hf = info.value("loader", "") == "hf";
    EXPECT_TRUE(throws(
        [&] {
          if (hf) {
            models::load_whisper_dir(case_dir(name));
          } else {
            models::read_ct2_whisper_dir(case_dir(name));
          }
        },
        code_named(info["refused"]["code"]), needles));
    ++checked;
  }
  EXPECT_GE(checked, 11);
}

// An HF directory copied and edited, to check one defect at a time.
class EditedHfDir {
 public:
  explicit EditedHfDir(const std::string& base) : dir_(temp_.path() / "model") {
    fs::copy(case_dir(base), dir_, fs::copy_options::recursive);
  }
  const fs::path& dir() const { return dir_; }
  void edit_json(const std::string& file, const std::function<void(json&)>& change) {
    json document = json::parse(read_text(dir_ / file));
    change(document);
    std::ofstream(dir_ / file, std::ios::trunc) << document.dump(2);
  }

 private:
  testing::TempDir temp_;
  fs::path dir_;
};

TEST(WhisperDirs, HfDirectoryDefectsNameTheFileAndField) {
  const auto load = [](const fs::path& dir) { return [dir] { models::load_whisper_dir(dir); }; };
  {
    EditedHfDir d("hf_en_safetensors");
    d.edit_json("config.json", [](json& c) { c["model_type"] = "wav2vec2"; });
    EXPECT_FALSE(models::is_whisper_dir(d.dir()));
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kUnsupported, {"model_type", "wav2vec2"}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    d.edit_json("config.json", [](json& c) { c.erase("d_model"); });
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kCorruptFile, {"config.json", "\"d_model\""}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    d.edit_json("config.json", [](json& c) { c["activation_function"] = "gelu_new"; });
    EXPECT_TRUE(
        throws(load(d.dir()), ErrorCode::kUnsupported, {"activation_function", "gelu_new"}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    fs::remove(d.dir() / "model.safetensors");
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kNotFound, {"no weights", "model.safetensors"}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    fs::remove(d.dir() / "tokenizer.json");
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kNotFound, {"no tokenizer", "vocab.json"}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    fs::remove(d.dir() / "config.json");
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kNotFound, {"no config.json"}));
  }
  {
    EditedHfDir d("hf_en_safetensors");
    d.edit_json("generation_config.json", [](json& g) { g["eos_token_id"] = 99999; });
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kCorruptFile, {"eos_token_id 99999", "51864"}));
  }
  {
    EditedHfDir d("hf_en_torch");  // no generation fields to fall back on but the tokenizer
    fs::remove(d.dir() / "added_tokens.json");
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kCorruptFile,
                       {"no_timestamps_token_id", "<|notimestamps|>"}));
  }
  {
    EditedHfDir d("hf_en_torch");  // an untied output head is another model
    d.edit_json("config.json", [](json& c) { c["tie_word_embeddings"] = false; });
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kUnsupported, {"tie_word_embeddings"}));
  }
  {
    EditedHfDir d("ct2_en_f32");
    EXPECT_TRUE(throws(load(d.dir()), ErrorCode::kUnsupported, {"oasr convert --from ct2"}));
  }
}

}  // namespace
}  // namespace oasr
