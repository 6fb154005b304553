// SafeTensorsCheckpoint: a single file, a directory, and shards tied together
// by an index whose JSON the tests write by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "support/test_support.h"
#include "unit/safetensors_test_util.h"

namespace oasr {
namespace {

using io::SafeTensorsCheckpoint;
using io::save_safetensors;
using testing::TempDir;
using testing::throws_error;
using testing::write_file_bytes;

Tensor filled(const Shape& shape, float value) {
  return Tensor::full(shape, value);
}

// Two shards and an index: shard 1 holds a, b; shard 2 holds c, d.
class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    save_safetensors(dir_.path() / "model-00001-of-00002.safetensors",
                     {{"enc.a", filled({2, 2}, 1.0f)}, {"enc.b", filled({3}, 2.0f)}});
    save_safetensors(dir_.path() / "model-00002-of-00002.safetensors",
                     {{"dec.c", filled({4}, 3.0f)}, {"dec.d", filled({1}, 4.0f)}});
  }

  void write_index(const std::string& weight_map_json,
                   const std::string& file = "model.safetensors.index.json") {
    write_file_bytes(dir_.path() / file,
                     R"({"metadata": {"total_size": 40}, "weight_map": )" + weight_map_json + "}");
  }

  static std::string full_weight_map() {
    return R"({"enc.a": "model-00001-of-00002.safetensors",
               "enc.b": "model-00001-of-00002.safetensors",
               "dec.c": "model-00002-of-00002.safetensors",
               "dec.d": "model-00002-of-00002.safetensors"})";
  }

  TempDir dir_;
};

TEST_F(ShardedCheckpoint, ReadsEveryTensorThroughTheDirectoryOrTheIndex) {
  write_index(full_weight_map());
  for (const auto& path : {dir_.path(), dir_.path() / "model.safetensors.index.json"}) {
    const SafeTensorsCheckpoint ckpt = SafeTensorsCheckpoint::open(path);
    std::vector<std::string> names = ckpt.names();
    EXPECT_EQ(names, (std::vector<std::string>{"enc.a", "enc.b", "dec.c", "dec.d"}));
    EXPECT_EQ(ckpt.files().size(), 2u);
    EXPECT_EQ(ckpt.mapped_files().size(), 2u);
    EXPECT_EQ(ckpt.index_path().filename(), "model.safetensors.index.json");
    const std::pair<const char*, float> expected[] = {
        {"enc.a", 1.0f}, {"enc.b", 2.0f}, {"dec.c", 3.0f}, {"dec.d", 4.0f}};
    for (const auto& [name, value] : expected) {
      ASSERT_TRUE(ckpt.contains(name));
      const Tensor t = ckpt.get(name);
      EXPECT_EQ(t.shape(), ckpt.info(name).shape);
      EXPECT_TRUE(testing::bit_equal(t, filled(t.shape(), value))) << name;
    }
    EXPECT_FALSE(ckpt.contains("enc.zz"));
    EXPECT_TRUE(throws_error([&] { ckpt.get("enc.zz"); }, ErrorCode::kNotFound, {"'enc.zz'"}));
  }
}

TEST_F(ShardedCheckpoint, AnIndexWithAnotherNameIsOpenedByPath) {
  write_index(full_weight_map(), "custom.safetensors.index.json");
  const auto ckpt = SafeTensorsCheckpoint::open(dir_.path() / "custom.safetensors.index.json");
  EXPECT_EQ(ckpt.names().size(), 4u);
  // The directory itself has neither standard file name.
  EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir_.path()); }, ErrorCode::kNotFound,
                           {"model.safetensors", "model.safetensors.index.json"}));
}

TEST_F(ShardedCheckpoint, ShardTensorsOutsideTheWeightMapAreListedOnce) {
  // dec.d is not in the weight map; enc.b is mapped to shard 1 and a second
  // copy in shard 3 must not be listed again nor win.
  save_safetensors(dir_.path() / "extra.safetensors",
                   {{"enc.b", filled({3}, 9.0f)}, {"only.here", filled({2}, 5.0f)}});
  write_index(R"({"enc.a": "model-00001-of-00002.safetensors",
                  "enc.b": "model-00001-of-00002.safetensors",
                  "dec.c": "model-00002-of-00002.safetensors",
                  "only.here": "extra.safetensors"})");
  const SafeTensorsCheckpoint ckpt = SafeTensorsCheckpoint::open(dir_.path());
  std::vector<std::string> names = ckpt.names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dec.c", "dec.d", "enc.a", "enc.b", "only.here"}));
  EXPECT_EQ(ckpt.get("enc.b").item_float({0}), 2.0f);
  EXPECT_EQ(ckpt.get("dec.d").item_float({0}), 4.0f);
  EXPECT_EQ(ckpt.files().size(), 3u);
}

TEST_F(ShardedCheckpoint, AnUnmappedTensorInTwoShardsIsAmbiguous) {
  // dec.d is in shard 2 and in extra.safetensors, and the weight map names
  // neither: which copy is meant cannot be known.
  save_safetensors(dir_.path() / "extra.safetensors",
                   {{"dec.d", filled({1}, 7.0f)}, {"z", filled({1}, 0.0f)}});
  write_index(R"({"enc.a": "model-00001-of-00002.safetensors",
                  "dec.c": "model-00002-of-00002.safetensors",
                  "z": "extra.safetensors"})");
  EXPECT_TRUE(throws_error(
      [&] { SafeTensorsCheckpoint::open(dir_.path()); }, ErrorCode::kCorruptFile,
      {"'dec.d'", "extra.safetensors", "model-00002-of-00002.safetensors", "does not say which"}));
}

TEST_F(ShardedCheckpoint, AMissingShardIsRefusedNamingIt) {
  write_index(R"({"enc.a": "model-00001-of-00002.safetensors",
                  "dec.c": "model-00003-of-00002.safetensors"})");
  EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir_.path()); }, ErrorCode::kNotFound,
                           {"model.safetensors.index.json", "model-00003-of-00002.safetensors"}));
}

TEST_F(ShardedCheckpoint, ATensorMissingFromItsShardIsRefused) {
  write_index(R"({"enc.a": "model-00001-of-00002.safetensors",
                  "dec.c": "model-00001-of-00002.safetensors"})");
  EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir_.path()); },
                           ErrorCode::kCorruptFile,
                           {"model.safetensors.index.json", "'dec.c'",
                            "model-00001-of-00002.safetensors", "no such tensor"}));
}

TEST_F(ShardedCheckpoint, MalformedIndexesAreRefused) {
  const struct {
    const char* text;
    const char* words;
  } cases[] = {
      {R"({"weight_map": {"a": )", "not valid JSON"},
      {R"([1])", "expected an object"},
      {R"({"metadata": {}})", "no \"weight_map\""},
      {R"({"weight_map": ["a"]})", "\"weight_map\" must be an object"},
      {R"({"weight_map": {"enc.a": 3}})", "'enc.a'"},
      {R"({"weight_map": {"enc.a": ""}})", "'enc.a'"},
  };
  const auto index = dir_.path() / "model.safetensors.index.json";
  for (const auto& c : cases) {
    write_file_bytes(index, c.text);
    EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir_.path()); },
                             ErrorCode::kCorruptFile, {index.string(), c.words}))
        << c.text;
  }
}

TEST_F(ShardedCheckpoint, ACorruptShardIsRefusedNamingTheShard) {
  write_index(full_weight_map());
  const auto shard = dir_.path() / "model-00002-of-00002.safetensors";
  const std::string bytes = testing::read_file_bytes(shard);
  write_file_bytes(shard, bytes.substr(0, bytes.size() - 2));
  EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir_.path()); },
                           ErrorCode::kCorruptFile,
                           {"model-00002-of-00002.safetensors", "truncated"}));
}

TEST(SafeTensorsCheckpoint, OpensASingleFileDirectlyOrThroughItsDirectory) {
  TempDir dir;
  const auto file = dir.path() / "model.safetensors";
  save_safetensors(file, {{"w", filled({2}, 1.25f)}, {"b", filled({1}, -1.0f)}});
  for (const auto& path : {dir.path(), file}) {
    const SafeTensorsCheckpoint ckpt = SafeTensorsCheckpoint::open(path);
    EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"w", "b"}));
    EXPECT_EQ(ckpt.files(), (std::vector<std::filesystem::path>{file}));
    EXPECT_TRUE(ckpt.index_path().empty());
    EXPECT_EQ(ckpt.get("w").item_float({1}), 1.25f);
    EXPECT_EQ(ckpt.info("b").dtype, DType::kF32);
  }
}

TEST(SafeTensorsCheckpoint, RefusesMissingPathsAndEmptyDirectories) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { SafeTensorsCheckpoint::open(dir.path() / "nope"); },
                           ErrorCode::kNotFound, {"nope"}));
  EXPECT_TRUE(
      throws_error([&] { SafeTensorsCheckpoint::open(dir.path()); }, ErrorCode::kNotFound,
                   {dir.path().string(), "model.safetensors", "model.safetensors.index.json"}));
}

}  // namespace
}  // namespace oasr
