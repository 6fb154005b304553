// WhisperConfig::from_hf_json and the generation-settings lookup
// (models/whisper/whisper_config.h, models/whisper/whisper_dir.h) on hand-written documents:
// which field is required, what each refusal names, which fallback fills
// which field, and the HF documents the converter writes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>

#include "core/error.h"
#include "models/whisper/whisper_config.h"
#include "models/whisper/whisper_dir.h"

namespace oasr {
namespace {

using models::WhisperConfig;
using models::WhisperGeneration;
using nlohmann::json;

json tiny_config() {
  return json{{"model_type", "whisper"},
              {"num_mel_bins", 80},
              {"d_model", 384},
              {"encoder_layers", 4},
              {"encoder_attention_heads", 6},
              {"decoder_layers", 4},
              {"decoder_attention_heads", 6},
              {"encoder_ffn_dim", 1536},
              {"decoder_ffn_dim", 1536},
              {"vocab_size", 51864},
              {"max_source_positions", 1500},
              {"max_target_positions", 448}};
}

// tiny.en's special tokens (OpenAI's English-only layout).
std::map<std::string, int64_t> english_tokens() {
  return {{"<|endoftext|>", 50256},   {"<|startoftranscript|>", 50257}, {"<|en|>", 50258},
          {"<|translate|>", 50357},   {"<|transcribe|>", 50358},        {"<|startofprev|>", 50360},
          {"<|notimestamps|>", 50362}};
}

std::map<std::string, int64_t> multilingual_tokens() {
  return {{"<|endoftext|>", 50257},   {"<|startoftranscript|>", 50258}, {"<|en|>", 50259},
          {"<|zh|>", 50260},          {"<|translate|>", 50358},         {"<|transcribe|>", 50359},
          {"<|notimestamps|>", 50363}};
}

::testing::AssertionResult throws(const std::function<void()>& action, ErrorCode code,
                                  const std::vector<std::string>& needles) {
  try {
    action();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure()
             << "code " << error_code_name(e.code()) << ": " << e.what();
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

WhisperGeneration resolve(const json* generation, const json& config,
                          const std::map<std::string, int64_t>& tokens,
                          std::vector<std::string>* notes_out = nullptr) {
  std::vector<std::string> notes;
  const WhisperConfig network = WhisperConfig::from_hf_json(config);
  WhisperGeneration out =
      models::resolve_whisper_generation(generation, config, tokens, network, "DIR", notes);
  if (notes_out != nullptr) *notes_out = notes;
  return out;
}

TEST(WhisperConfigJson, ReadsTheSizesAndDefaultsTheRest) {
  const WhisperConfig c = WhisperConfig::from_hf_json(tiny_config());
  EXPECT_EQ(c.d_model, 384);
  EXPECT_EQ(c.vocab_size, 51864);
  EXPECT_EQ(c.activation_function, "gelu");
  EXPECT_FALSE(c.scale_embedding);
  EXPECT_EQ(c.encoder_head_dim(), 64);
  json scaled = tiny_config();
  scaled["scale_embedding"] = true;
  EXPECT_TRUE(WhisperConfig::from_hf_json(scaled).scale_embedding);
}

TEST(WhisperConfigJson, RefusesEachDefectByName) {
  for (const char* key : {"d_model", "vocab_size", "decoder_ffn_dim", "max_target_positions"}) {
    json config = tiny_config();
    config.erase(key);
    EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config, "X/config.json"); },
                       ErrorCode::kCorruptFile, {"X/config.json", std::string("\"") + key + "\""}));
  }
  json config = tiny_config();
  config["d_model"] = "384";
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config); }, ErrorCode::kCorruptFile,
                     {"\"d_model\" must be an integer"}));
  config = tiny_config();
  config["encoder_attention_heads"] = 5;
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config); }, ErrorCode::kInvalidArgument,
                     {"not a multiple of encoder_attention_heads 5"}));
  config = tiny_config();
  config["decoder_layers"] = 0;
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config); }, ErrorCode::kInvalidArgument,
                     {"decoder_layers is 0"}));
  config = tiny_config();
  config["activation_function"] = "relu";
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config); }, ErrorCode::kUnsupported,
                     {"activation_function \"relu\""}));
  config = tiny_config();
  config["model_type"] = "wav2vec2";
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(config); }, ErrorCode::kUnsupported,
                     {"\"wav2vec2\""}));
  EXPECT_TRUE(throws([&] { WhisperConfig::from_hf_json(json::array()); }, ErrorCode::kCorruptFile,
                     {"not a JSON object"}));
}

TEST(WhisperGenerationLookup, GenerationConfigWinsOverConfigAndTokenizer) {
  const json generation = {
      {"decoder_start_token_id", 50257}, {"eos_token_id", {50256}},  {"pad_token_id", 50256},
      {"no_timestamps_token_id", 50362}, {"is_multilingual", false}, {"suppress_tokens", {1, 2}},
      {"begin_suppress_tokens", {220}},  {"max_length", 200},        {"alignment_heads", {{3, 5}}}};
  json config = tiny_config();
  config["decoder_start_token_id"] = 7;  // older exports; the generation config decides
  std::vector<std::string> notes;
  const WhisperGeneration g = resolve(&generation, config, english_tokens(), &notes);
  EXPECT_EQ(g.decoder_start_token_id, 50257);
  EXPECT_EQ(g.eos_token_id, 50256);  // a list of end tokens: the first
  EXPECT_EQ(g.suppress_tokens, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(g.begin_suppress_tokens, (std::vector<int64_t>{220}));
  EXPECT_EQ(g.max_length, 200);
  EXPECT_EQ(g.alignment_heads, (std::vector<std::pair<int64_t, int64_t>>{{3, 5}}));
  EXPECT_EQ(g.prev_sot_token_id, 50360);  // the tokenizer's <|startofprev|>
  EXPECT_TRUE(g.lang_to_id.empty());
  EXPECT_TRUE(notes.empty());
}

TEST(WhisperGenerationLookup, FallsBackToConfigThenTokenizer) {
  std::vector<std::string> notes;
  const WhisperGeneration g = resolve(nullptr, tiny_config(), english_tokens(), &notes);
  EXPECT_EQ(g.decoder_start_token_id, 50257);
  EXPECT_EQ(g.eos_token_id, 50256);
  EXPECT_EQ(g.pad_token_id, 50256);
  EXPECT_EQ(g.no_timestamps_token_id, 50362);
  EXPECT_FALSE(g.is_multilingual);  // vocab 51864
  EXPECT_TRUE(g.suppress_tokens.empty());
  EXPECT_EQ(g.begin_suppress_tokens, (std::vector<int64_t>{220, 50256}));
  EXPECT_EQ(g.max_length, 448);
  EXPECT_EQ(notes.size(), 3u);  // is_multilingual, suppress_tokens, begin_suppress_tokens

  json config = tiny_config();
  config["vocab_size"] = 51865;
  config["suppress_tokens"] = {5};
  config["pad_token_id"] = nullptr;  // null counts as absent
  const WhisperGeneration m = resolve(nullptr, config, multilingual_tokens());
  EXPECT_TRUE(m.is_multilingual);
  EXPECT_EQ(m.lang_to_id, (std::map<std::string, int64_t>{{"<|en|>", 50259}, {"<|zh|>", 50260}}));
  EXPECT_EQ(m.transcribe_token_id, 50359);
  EXPECT_EQ(m.translate_token_id, 50358);
  EXPECT_EQ(m.pad_token_id, 50257);
  EXPECT_EQ(m.suppress_tokens, (std::vector<int64_t>{5}));
}

TEST(WhisperGenerationLookup, UnresolvableOrOutOfRangeIdsAreErrors) {
  auto tokens = english_tokens();
  tokens.erase("<|notimestamps|>");
  EXPECT_TRUE(throws([&] { resolve(nullptr, tiny_config(), tokens); }, ErrorCode::kCorruptFile,
                     {"DIR", "no_timestamps_token_id", "<|notimestamps|>"}));
  tokens = english_tokens();
  tokens.erase("<|startoftranscript|>");
  EXPECT_TRUE(throws([&] { resolve(nullptr, tiny_config(), tokens); }, ErrorCode::kCorruptFile,
                     {"decoder_start_token_id", "<|startoftranscript|>"}));
  const json out_of_range = {{"suppress_tokens", {1, 60000}}};
  EXPECT_TRUE(throws([&] { resolve(&out_of_range, tiny_config(), english_tokens()); },
                     ErrorCode::kCorruptFile, {"suppress_tokens entry 60000", "51864"}));
  const json bad_heads = {{"alignment_heads", {{4, 0}}}};
  EXPECT_TRUE(throws([&] { resolve(&bad_heads, tiny_config(), english_tokens()); },
                     ErrorCode::kCorruptFile, {"alignment_heads", "layer 4"}));
  const json bad_type = {{"eos_token_id", "x"}};
  EXPECT_TRUE(throws([&] { resolve(&bad_type, tiny_config(), english_tokens()); },
                     ErrorCode::kCorruptFile, {"generation_config.json", "\"eos_token_id\""}));
  json multi = tiny_config();
  multi["vocab_size"] = 51865;
  auto no_task = multilingual_tokens();
  no_task.erase("<|transcribe|>");
  EXPECT_TRUE(throws([&] { resolve(nullptr, multi, no_task); }, ErrorCode::kCorruptFile,
                     {"<|transcribe|>", "task_to_id"}));
}

TEST(WhisperHfDocuments, WrittenAsHfCheckpointsHaveThem) {
  const WhisperGeneration english = resolve(nullptr, tiny_config(), english_tokens());
  const auto gen = english.to_hf_json();
  EXPECT_EQ(gen["forced_decoder_ids"], json::parse("[[1, 50362]]"));
  EXPECT_FALSE(gen.contains("lang_to_id"));
  EXPECT_EQ(gen["is_multilingual"], false);
  EXPECT_EQ(gen["no_timestamps_token_id"], 50362);
  // What the converter writes reads back to the same settings.
  const json written = json::parse(gen.dump());
  const WhisperGeneration back = resolve(&written, tiny_config(), {});
  EXPECT_EQ(back.decoder_start_token_id, english.decoder_start_token_id);
  EXPECT_EQ(back.begin_suppress_tokens, english.begin_suppress_tokens);
  EXPECT_EQ(back.prev_sot_token_id, english.prev_sot_token_id);

  json config = tiny_config();
  config["vocab_size"] = 51865;
  const WhisperGeneration multi = resolve(nullptr, config, multilingual_tokens());
  const auto multi_gen = multi.to_hf_json();
  EXPECT_EQ(multi_gen["forced_decoder_ids"], json::parse("[[1, null], [2, 50359]]"));
  EXPECT_EQ(multi_gen["task_to_id"], json::parse(R"({"transcribe": 50359, "translate": 50358})"));
  EXPECT_EQ(multi_gen["lang_to_id"]["<|zh|>"], 50260);

  const WhisperConfig network = WhisperConfig::from_hf_json(config);
  const auto hf = models::whisper_hf_config_json(network, multi, "float16");
  EXPECT_EQ(hf["model_type"], "whisper");
  EXPECT_EQ(hf["architectures"], json::parse(R"(["WhisperForConditionalGeneration"])"));
  EXPECT_EQ(hf["torch_dtype"], "float16");
  EXPECT_EQ(hf["decoder_start_token_id"], 50258);
  EXPECT_EQ(hf["num_hidden_layers"], 4);
  // The document reads back to the same network.
  const WhisperConfig round = WhisperConfig::from_hf_json(json::parse(hf.dump()));
  EXPECT_EQ(round.d_model, network.d_model);
  EXPECT_EQ(round.vocab_size, network.vocab_size);
  EXPECT_EQ(round.decoder_ffn_dim, network.decoder_ffn_dim);
}

}  // namespace
}  // namespace oasr
