// `oasr info` and `oasr --version`, run as a user would run the built binary,
// on checkpoints written by our writer (the PyPI-written case is in
// test_cli_info_pypi.cc, label oracle).
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_test_util.h"
#include "io/safetensors.h"
#include "unit/safetensors_test_util.h"

namespace oasr {
namespace {

using testing::line_listing;
using testing::refused_with;
using testing::run_oasr;
using testing::split_lines;
using testing::TempDir;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A small transformer-like checkpoint: name -> (dtype, shape).
std::vector<std::pair<std::string, Tensor>> small_model() {
  return {
      {"encoder.embed.weight", Tensor::zeros({8, 6}, DType::kF32)},
      {"encoder.layers.0.attn.q.weight", Tensor::zeros({6, 6}, DType::kF16)},
      {"encoder.layers.0.norm.bias", Tensor::zeros({6}, DType::kBF16)},
      {"encoder.layers.0.ffn.w1.weight", Tensor::zeros({12, 6}, DType::kI8)},
      {"encoder.layers.0.ffn.w1.weight_scale", Tensor::zeros({12}, DType::kF32)},
      {"encoder.layers.0.ffn.w1.weight_fp8", Tensor::zeros({3, 4}, DType::kF8E4M3)},
      {"decoder.vocab_ids", Tensor::zeros({5}, DType::kI64)},
      {"decoder.counts", Tensor::zeros({2, 2}, DType::kI32)},
      {"decoder.mask", Tensor::zeros({7}, DType::kU8)},
      {"decoder.step", Tensor::zeros({}, DType::kI64)},
      {"decoder.empty", Tensor::zeros({0, 4}, DType::kF32)},
      {"decoder.out.weight", Tensor::zeros({5, 6}, DType::kF32)},
  };
}

std::string dtype_label(DType dtype) {
  return std::string(dtype_safetensors_name(dtype)) + " (" + dtype_name(dtype) + ")";
}

TEST(CliVersion, PrintsOasrAndTheVersion) {
  const auto result = run_oasr({"--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, std::string("oasr ") + OASR_EXPECTED_VERSION + "\n");
}

TEST(CliInfo, ListsEveryTensorOfACheckpointDirectory) {
  TempDir dir;
  const auto model = small_model();
  io::save_safetensors(dir.path() / "model.safetensors", model, {{"format", "pt"}});
  const auto result = run_oasr({"info", dir.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // A folder no architecture claims: listed, and said so on stderr.
  EXPECT_EQ(split_lines(result.err).size(), 1u) << result.err;
  EXPECT_NE(result.err.find("not a checkpoint directory this build serves (no oasr_config.json"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.out.find("model: "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("tensors: 12\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("format = pt"), std::string::npos) << result.out;
  size_t total_bytes = 0;
  int64_t total_elements = 0;
  for (const auto& [name, tensor] : model) {
    const std::string line = line_listing(result.out, name);
    ASSERT_FALSE(line.empty()) << name << " is not listed:\n" << result.out;
    EXPECT_NE(line.find("  " + dtype_label(tensor.dtype()) + "  "), std::string::npos) << line;
    EXPECT_NE(line.find("  " + shape_str(tensor.shape()) + "  "), std::string::npos) << line;
    const std::string bytes = std::to_string(tensor.nbytes());
    EXPECT_EQ(line.substr(line.size() - bytes.size() - 2), "  " + bytes) << line;
    total_bytes += tensor.nbytes();
    total_elements += tensor.numel();
  }
  EXPECT_NE(result.out.find("total: 12 tensors, " + std::to_string(total_elements) + " elements, " +
                            std::to_string(total_bytes) + " bytes"),
            std::string::npos)
      << result.out;
}

TEST(CliInfo, AcceptsAFileAndAnIndexAndAShardedDirectory) {
  TempDir dir;
  io::save_safetensors(dir.path() / "a.safetensors",
                       {{"enc.w", Tensor::zeros({2, 3}, DType::kF32)}});
  io::save_safetensors(dir.path() / "b.safetensors", {{"dec.w", Tensor::zeros({4}, DType::kF16)}});
  write_text(dir.path() / "model.safetensors.index.json",
             R"({"weight_map": {"enc.w": "a.safetensors", "dec.w": "b.safetensors"}})");
  for (const std::string& path :
       {dir.path().string(), (dir.path() / "model.safetensors.index.json").string()}) {
    const auto result = run_oasr({"info", path});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("shards: 2"), std::string::npos) << result.out;
    EXPECT_NE(line_listing(result.out, "enc.w").find("F32 (float32)  [2, 3]"), std::string::npos)
        << result.out;
    EXPECT_NE(line_listing(result.out, "dec.w").find("F16 (float16)  [4]"), std::string::npos)
        << result.out;
  }
  const auto single = run_oasr({"info", (dir.path() / "b.safetensors").string()});
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_NE(single.out.find("tensors: 1\n"), std::string::npos) << single.out;
  EXPECT_TRUE(line_listing(single.out, "enc.w").empty());
}

TEST(CliInfo, SummaryCountsByDtypeAndShowsTheTenLargest) {
  TempDir dir;
  io::save_safetensors(dir.path() / "model.safetensors", small_model());
  const auto result = run_oasr({"info", "--summary", dir.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = split_lines(result.out);
  // A "by dtype" line: the label, padding, then the counts.
  auto has_dtype_line = [&](DType dtype, const std::string& counts) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.rfind("  " + dtype_label(dtype) + " ", 0) == 0 && line.size() > counts.size() &&
             line.compare(line.size() - counts.size(), counts.size(), counts) == 0 &&
             line.find_first_not_of(' ', 2 + dtype_label(dtype).size()) ==
                 line.size() - counts.size();
    });
  };
  // F32: embed 8x6 + weight_scale 12 + empty 0 + out 5x6 = 90 elements.
  EXPECT_TRUE(has_dtype_line(DType::kF32, "4 tensors, 90 elements, 360 bytes")) << result.out;
  EXPECT_TRUE(has_dtype_line(DType::kI64, "2 tensors, 6 elements, 48 bytes")) << result.out;
  EXPECT_TRUE(has_dtype_line(DType::kF8E4M3, "1 tensor, 12 elements, 12 bytes")) << result.out;
  EXPECT_TRUE(has_dtype_line(DType::kU8, "1 tensor, 7 elements, 7 bytes")) << result.out;
  // The ten largest, biggest first (ties in file order); no full listing.
  const auto largest = std::find(lines.begin(), lines.end(), "largest 10 tensors:");
  ASSERT_NE(largest, lines.end()) << result.out;
  ASSERT_EQ(lines.end() - largest, 12) << result.out;
  const char* const expected_order[] = {"encoder.embed.weight",
                                        "decoder.out.weight",
                                        "encoder.layers.0.attn.q.weight",
                                        "encoder.layers.0.ffn.w1.weight",
                                        "encoder.layers.0.ffn.w1.weight_scale",
                                        "decoder.vocab_ids",
                                        "decoder.counts",
                                        "encoder.layers.0.norm.bias",
                                        "encoder.layers.0.ffn.w1.weight_fp8",
                                        "decoder.step"};
  for (size_t i = 0; i < std::size(expected_order); ++i) {
    EXPECT_EQ(largest[2 + i].rfind(std::string("  ") + expected_order[i] + " ", 0), 0u)
        << "row " << i << ": " << largest[2 + i];
  }
  EXPECT_TRUE(line_listing(result.out, "decoder.mask").empty()) << result.out;
  EXPECT_TRUE(line_listing(result.out, "decoder.empty").empty()) << result.out;
}

TEST(CliInfo, PrintsTheConfigSummaryWhenTheDirectoryHasOne) {
  TempDir dir;
  io::save_safetensors(dir.path() / "model.safetensors", small_model());
  write_text(dir.path() / "oasr_config.json",
             R"({"format_version": 2, "architecture": "conformer",
                 "model": {"d_model": 256}, "quantization": {"scheme": "int8_w8a8"}})");
  const auto result = run_oasr({"info", dir.path().string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = split_lines(result.out);
  const auto config = std::find(lines.begin(), lines.end(),
                                "config: " + (dir.path() / "oasr_config.json").string());
  ASSERT_NE(config, lines.end()) << result.out;
  ASSERT_GE(lines.end() - config, 4);
  EXPECT_EQ(config[1], "  format_version: 2");
  EXPECT_EQ(config[2], "  architecture: conformer");
  EXPECT_EQ(config[3], "  keys: architecture, format_version, model, quantization");

  write_text(dir.path() / "oasr_config.json", R"({"model": {}})");
  const auto sparse = run_oasr({"info", dir.path().string()});
  ASSERT_EQ(sparse.exit_code, 0) << sparse.err;
  EXPECT_NE(sparse.out.find("  format_version: (not set)\n  architecture: (not set)\n"),
            std::string::npos)
      << sparse.out;
}

TEST(CliInfo, RefusesAMalformedConfigInOneLine) {
  TempDir dir;
  io::save_safetensors(dir.path() / "model.safetensors", small_model());
  write_text(dir.path() / "oasr_config.json", "{\"format_version\": 1,\n");
  EXPECT_TRUE(refused_with(run_oasr({"info", dir.path().string()}),
                           {"oasr_config.json", "not valid JSON"}));
  write_text(dir.path() / "oasr_config.json", "[1, 2]");
  EXPECT_TRUE(
      refused_with(run_oasr({"info", dir.path().string()}), {"oasr_config.json", "JSON object"}));
}

TEST(CliInfo, RefusesATruncatedFileInOneLine) {
  TempDir dir;
  const auto whole = dir.path() / "model.safetensors";
  io::save_safetensors(whole, small_model());
  const std::string bytes = testing::read_file_bytes(whole);
  const size_t data_start = io::SafeTensorsFile::open(whole).data_section_offset();
  for (size_t cut : {size_t{5}, data_start / 2, data_start + 10, bytes.size() - 1}) {
    const auto path = dir.path() / ("cut-" + std::to_string(cut) + ".safetensors");
    testing::write_file_bytes(path, bytes.substr(0, cut));
    EXPECT_TRUE(
        refused_with(run_oasr({"info", path.string()}), {path.filename().string(), "truncated"}))
        << "cut at " << cut;
  }
}

TEST(CliInfo, RefusesBadPathsAndCorruptHeadersInOneLine) {
  TempDir dir;
  EXPECT_TRUE(refused_with(run_oasr({"info", (dir.path() / "missing").string()}),
                           {"missing", "no such file"}));
  EXPECT_TRUE(refused_with(run_oasr({"info", dir.path().string()}),
                           {"model.safetensors", "model.safetensors.index.json"}));
  const auto bad = dir.path() / "bad.safetensors";
  testing::write_file_bytes(bad, testing::safetensors_bytes(R"({"a": {"dtype": "Q4", )", ""));
  EXPECT_TRUE(refused_with(run_oasr({"info", bad.string()}), {"bad.safetensors", "JSON"}));
  const auto absurd = dir.path() / "absurd.safetensors";
  testing::write_file_bytes(absurd, testing::le_u64(uint64_t{1} << 62) + "{}");
  EXPECT_TRUE(refused_with(run_oasr({"info", absurd.string()}), {"absurd.safetensors"}));
}

// A checkpoint of an architecture this build serves is loaded, so one
// missing a tensor fails (exit 1, naming it) instead of listing happily.
TEST(CliInfo, LoadsAServedCheckpointAndRefusesOneMissingATensor) {
  const std::filesystem::path bundled =
      std::filesystem::path(OASR_SOURCE_DIR) / "models" / "oasr-u2pp-char-8k";
  const auto whole = run_oasr({"info", "--summary", bundled.string()});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err, "");
  EXPECT_NE(whole.out.find("model: U2++ (loads"), std::string::npos) << whole.out;

  TempDir dir;
  const auto copy = dir.path() / "u2pp";
  std::filesystem::copy(bundled, copy);
  const std::string missing = "encoder.encoders.0.feed_forward.w_1.weight";
  std::vector<std::pair<std::string, Tensor>> kept;
  {
    const io::SafeTensorsFile weights = io::SafeTensorsFile::open(copy / "model.safetensors");
    for (const std::string& name : weights.names()) {
      if (name != missing) kept.emplace_back(name, weights.get(name).clone());
    }
  }
  io::save_safetensors(copy / "model.safetensors", kept);
  EXPECT_TRUE(refused_with(run_oasr({"info", copy.string()}), {missing}));
}

}  // namespace
}  // namespace oasr
