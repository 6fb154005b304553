// The real Whisper tiny.en, converted from CTranslate2 by `oasr convert
// --from ct2` (the whisper_tiny_en fixture), read back by load_whisper_dir.
// The expected values are those of OpenAI's tiny.en as Hugging Face
// publishes it (openai/whisper-tiny.en config.json / generation_config.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "models/whisper/whisper_dir.h"
#include "whisper/whisper_test_util.h"

namespace oasr {
namespace {

TEST(WhisperTinyEn, ConvertedDirectoryHasOpenAIsSettings) {
  OASR_WHISPER_TINY_EN_DIR_OR_SKIP(dir);
  const models::WhisperSource source = models::load_whisper_dir(dir);
  const models::WhisperConfig& c = source.config;
  EXPECT_EQ(c.d_model, 384);
  EXPECT_EQ(c.num_mel_bins, 80);
  EXPECT_EQ(c.encoder_layers, 4);
  EXPECT_EQ(c.decoder_layers, 4);
  EXPECT_EQ(c.encoder_attention_heads, 6);
  EXPECT_EQ(c.decoder_attention_heads, 6);
  EXPECT_EQ(c.encoder_ffn_dim, 1536);
  EXPECT_EQ(c.decoder_ffn_dim, 1536);
  EXPECT_EQ(c.vocab_size, 51864);
  EXPECT_EQ(c.max_source_positions, 1500);
  EXPECT_EQ(c.max_target_positions, 448);

  const models::WhisperGeneration& g = source.generation;
  EXPECT_EQ(g.decoder_start_token_id, 50257);
  EXPECT_EQ(g.eos_token_id, 50256);
  EXPECT_EQ(g.pad_token_id, 50256);
  EXPECT_EQ(g.no_timestamps_token_id, 50362);
  EXPECT_EQ(g.prev_sot_token_id, 50360);
  EXPECT_FALSE(g.is_multilingual);
  EXPECT_TRUE(g.lang_to_id.empty());
  EXPECT_FALSE(g.transcribe_token_id.has_value());
  EXPECT_EQ(g.begin_suppress_tokens, (std::vector<int64_t>{220, 50256}));
  ASSERT_EQ(g.suppress_tokens.size(), 90u);
  EXPECT_EQ(g.suppress_tokens.front(), 1);
  EXPECT_EQ(g.suppress_tokens.back(), 50361);
  EXPECT_EQ(g.max_length, 448);
  EXPECT_EQ(g.alignment_heads.size(), 8u);
  EXPECT_TRUE(source.notes.empty()) << source.notes.front();

  // 4 + 4 layers of HF tensors, no tied proj_out, all float16 as in the source.
  const std::vector<std::string> names = source.weights->names();
  EXPECT_EQ(names.size(), 5u + 4u * 15u + 2u + 2u + 4u * 24u + 2u);
  for (const std::string& name : names) {
    EXPECT_EQ(source.weights->dtype(name), DType::kF16) << name;
  }
  EXPECT_EQ(source.weights->shape("model.decoder.layers.3.encoder_attn.v_proj.weight"),
            (Shape{384, 384}));
  EXPECT_FALSE(source.weights->contains("model.encoder.layers.0.self_attn.k_proj.bias"));

  std::ifstream in(dir / "oasr_config.json");
  const nlohmann::json oasr = nlohmann::json::parse(in);
  EXPECT_EQ(oasr["architecture"], "whisper");
  EXPECT_EQ(oasr["format_version"], 1);
  EXPECT_NE(oasr["converted_from"].get<std::string>().find("model.bin"), std::string::npos);
}

}  // namespace
}  // namespace oasr
