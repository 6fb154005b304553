// safetensors reader and writer: round trips, a file assembled by hand from
// the format definition, every corruption the reader must refuse, and the
// atomicity of the writer. The sharded checkpoint is tested in
// test_safetensors_checkpoint.cc.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "core/error.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "support/test_support.h"
#include "unit/safetensors_test_util.h"

namespace oasr {
namespace {

using io::SafeTensorsFile;
using io::save_safetensors;
using testing::read_file_bytes;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::throws_error;
using testing::write_file_bytes;

// A tensor whose bytes follow a fixed pattern (any bit pattern is fine: the
// comparisons are bitwise, NaN payloads included).
Tensor patterned(const Shape& shape, DType dtype, unsigned seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 37 + seed);
  return t;
}

std::vector<std::string> entries_in_dir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// ---- round trips -------------------------------------------------------------

TEST(SafeTensors, RoundTripsEveryDtypeAndShape) {
  TempDir dir;
  const std::vector<Shape> shapes = {{2, 3}, {5}, {}, {0}, {3, 0, 2}, {1, 1, 7}};
  std::vector<std::pair<std::string, Tensor>> tensors;
  unsigned seed = 1;
  for (DType dtype : kAllDTypes) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      tensors.emplace_back(std::string(dtype_name(dtype)) + ".s" + std::to_string(s),
                           patterned(shapes[s], dtype, seed++));
    }
  }
  const auto path = dir.path() / "all.safetensors";
  save_safetensors(path, tensors);

  const SafeTensorsFile file = SafeTensorsFile::open(path);
  ASSERT_EQ(file.names().size(), tensors.size());
  // The writer lays tensors out in the given order, so file order is that order.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    EXPECT_EQ(file.names()[i], name);
    const io::TensorInfo& info = file.info(name);
    EXPECT_EQ(info.dtype, expected.dtype()) << name;
    EXPECT_EQ(info.shape, expected.shape()) << name;
    EXPECT_EQ(info.data_end - info.data_begin, expected.nbytes()) << name;
    const Tensor got = file.get(name);
    EXPECT_EQ(got.dtype(), expected.dtype()) << name;
    EXPECT_EQ(got.shape(), expected.shape()) << name;
    EXPECT_TRUE(got.device().is_cpu());
    EXPECT_TRUE(testing::bit_equal(got, expected)) << name;
  }
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(file.data_section_offset() % 8, 0u);
}

TEST(SafeTensors, GetBorrowsTheMappingAndOutlivesTheFileObject) {
  TempDir dir;
  const auto path = dir.path() / "w.safetensors";
  const Tensor expected = patterned({64, 3}, DType::kF32, 5);
  save_safetensors(path, {{"w", expected}});
  Tensor first;
  {
    const SafeTensorsFile file = SafeTensorsFile::open(path);
    first = file.get("w");
    // Zero-copy: both tensors point at the same mapped bytes.
    EXPECT_EQ(file.get("w").raw_data(), first.raw_data());
    const auto* base = static_cast<const char*>(first.raw_data()) - file.data_section_offset() -
                       file.info("w").data_begin;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 4096, 0u) << "not inside a page-aligned map";
  }
  // The file object is gone; the mapping must live on with the tensor.
  EXPECT_TRUE(testing::bit_equal(first, expected));
}

TEST(SafeTensors, MetadataRoundTrips) {
  TempDir dir;
  const auto path = dir.path() / "meta.safetensors";
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"empty", ""},
      {"unicode", "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93"},
      {"json", R"({"a": [1, 2], "q": "\"quoted\""})"}};
  save_safetensors(path, {{"x", Tensor::full({2}, 1.5f)}}, metadata);
  EXPECT_EQ(SafeTensorsFile::open(path).metadata(), metadata);
}

TEST(SafeTensors, WriterOmitsEmptyMetadataAndPadsTheHeader) {
  TempDir dir;
  const auto path = dir.path() / "pad.safetensors";
  save_safetensors(path, {{"zz.first", Tensor::full({3}, 2.0f)},
                          {"aa.second", Tensor::full({1}, 1.0f, DType::kBF16)},
                          {"mm.third", Tensor::zeros({2, 2}, DType::kI64)}});
  const std::string bytes = read_file_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | uint8_t(bytes[i]);
  EXPECT_EQ(header_length % 8, 0u);
  const std::string header = bytes.substr(8, header_length);
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
  // Padding is spaces after the closing brace of the JSON object.
  const size_t close = header.find_last_of('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
  // Entries in the given order with consecutive offsets.
  EXPECT_LT(header.find("zz.first"), header.find("aa.second"));
  EXPECT_LT(header.find("aa.second"), header.find("mm.third"));
  EXPECT_NE(header.find(R"("data_offsets":[0,12])"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("data_offsets":[12,14])"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("data_offsets":[14,46])"), std::string::npos) << header;
  EXPECT_EQ(bytes.size(), 8 + header_length + 46);
}

TEST(SafeTensors, WriterStoresStridedViewsContiguously) {
  TempDir dir;
  const auto path = dir.path() / "t.safetensors";
  const Tensor base = patterned({3, 5}, DType::kI32, 9);
  const Tensor transposed = base.transpose(0, 1);  // [5, 3], not contiguous
  ASSERT_FALSE(transposed.is_contiguous());
  save_safetensors(path, {{"t", transposed}});
  const Tensor got = SafeTensorsFile::open(path).get("t");
  EXPECT_EQ(got.shape(), (Shape{5, 3}));
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(got.data<int32_t>()[i * 3 + j], base.data<int32_t>()[j * 5 + i]);
    }
  }
}

// ---- a file assembled by hand -------------------------------------------------

// Tensors of several dtypes with known bit patterns, laid out back to back so
// some start at offsets not aligned for their element size.
std::string hand_built_header() {
  return R"({"__metadata__":{"format":"pt","note":"hand"},)"
         R"("ids":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
         R"("w":{"dtype":"F32","shape":[2],"data_offsets":[3,11]},)"
         R"("step":{"dtype":"I64","shape":[],"data_offsets":[11,19]},)"
         R"("h":{"dtype":"F16","shape":[2,1],"data_offsets":[19,23]},)"
         R"("bf":{"dtype":"BF16","shape":[1],"data_offsets":[23,25]},)"
         R"("q":{"dtype":"I8","shape":[3],"data_offsets":[25,28]},)"
         R"("f8":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[28,30]},)"
         R"("n":{"dtype":"I32","shape":[1],"data_offsets":[30,34]},)"
         R"("none":{"dtype":"F32","shape":[0,3],"data_offsets":[34,34]}})";
}

std::string hand_built_data() {
  const unsigned char data[] = {
      7,    8,    9,                                   // ids: u8 7, 8, 9
      0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // w: f32 1.5, -2.0
      0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // step: i64 -5
      0x00, 0x3c, 0x00, 0xb8,                          // h: f16 1.0, -0.5
      0x40, 0x40,                                      // bf: bf16 3.0
      0xff, 0x7f, 0x80,                                // q: i8 -1, 127, -128
      0x38, 0xc4,                                      // f8: e4m3 1.0, -3.0
      0x2a, 0x00, 0x00, 0x80,                          // n: i32 -2147483606
  };
  return std::string(reinterpret_cast<const char*>(data), sizeof(data));
}

// `pad` spaces after the JSON move the data section, so the same file is
// read once with aligned and once with misaligned data.
class HandBuiltFile : public ::testing::TestWithParam<int> {};

TEST_P(HandBuiltFile, IsReadAsTheFormatDefines) {
  TempDir dir;
  const auto path = dir.path() / "hand.safetensors";
  const std::string header = hand_built_header() + std::string(GetParam(), ' ');
  write_file_bytes(path, safetensors_bytes(header, hand_built_data()));

  const SafeTensorsFile file = SafeTensorsFile::open(path);
  EXPECT_EQ(file.data_section_offset(), 8 + header.size());
  EXPECT_EQ(file.names(),
            (std::vector<std::string>{"ids", "w", "step", "h", "bf", "q", "f8", "n", "none"}));
  EXPECT_EQ(file.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand"}}));
  const Tensor ids = file.get("ids");
  EXPECT_EQ(ids.dtype(), DType::kU8);
  EXPECT_EQ(ids.data<uint8_t>()[0], 7);
  EXPECT_EQ(ids.data<uint8_t>()[2], 9);
  const Tensor w = file.get("w");
  EXPECT_EQ(w.shape(), (Shape{2}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.raw_data()) % 4, 0u) << "misaligned float tensor";
  EXPECT_EQ(w.data<float>()[0], 1.5f);
  EXPECT_EQ(w.data<float>()[1], -2.0f);
  const Tensor step = file.get("step");
  EXPECT_EQ(step.dim(), 0);
  EXPECT_EQ(step.numel(), 1);
  EXPECT_EQ(step.data<int64_t>()[0], -5);
  const Tensor h = file.get("h");
  EXPECT_EQ(h.shape(), (Shape{2, 1}));
  EXPECT_EQ(h.item_float({0, 0}), 1.0f);
  EXPECT_EQ(h.item_float({1, 0}), -0.5f);
  EXPECT_EQ(file.get("bf").item_float({0}), 3.0f);
  const Tensor q = file.get("q");
  EXPECT_EQ(q.data<int8_t>()[0], -1);
  EXPECT_EQ(q.data<int8_t>()[1], 127);
  EXPECT_EQ(q.data<int8_t>()[2], -128);
  EXPECT_EQ(file.get("f8").item_float({0}), 1.0f);
  EXPECT_EQ(file.get("f8").item_float({1}), -3.0f);
  const Tensor n = file.get("n");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(n.raw_data()) % 4, 0u);
  EXPECT_EQ(n.data<int32_t>()[0], -2147483606);
  EXPECT_EQ(file.get("none").shape(), (Shape{0, 3}));
  EXPECT_EQ(file.get("none").numel(), 0);
}

INSTANTIATE_TEST_SUITE_P(Padding, HandBuiltFile, ::testing::Range(0, 8));

// ---- refusals -------------------------------------------------------------------

TEST(SafeTensors, MissingFileIsNotFound) {
  TempDir dir;
  const auto path = dir.path() / "absent.safetensors";
  EXPECT_TRUE(throws_error([&] { SafeTensorsFile::open(path); }, ErrorCode::kNotFound,
                           {"absent.safetensors"}));
}

TEST(SafeTensors, DirectoryIsRefused) {
  TempDir dir;
  EXPECT_TRUE(throws_error([&] { SafeTensorsFile::open(dir.path()); }, ErrorCode::kInvalidArgument,
                           {"directory"}));
}

TEST(SafeTensors, UnreadableFileIsAnIoError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  TempDir dir;
  const auto path = dir.path() / "locked.safetensors";
  save_safetensors(path, {{"x", Tensor::full({1}, 1.0f)}});
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  EXPECT_TRUE(
      throws_error([&] { SafeTensorsFile::open(path); }, ErrorCode::kIo, {"locked.safetensors"}));
}

TEST(SafeTensors, UnknownTensorNameIsNotFound) {
  TempDir dir;
  const auto path = dir.path() / "one.safetensors";
  save_safetensors(path, {{"x", Tensor::full({1}, 1.0f)}});
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  EXPECT_FALSE(file.contains("y"));
  EXPECT_TRUE(
      throws_error([&] { file.get("y"); }, ErrorCode::kNotFound, {"one.safetensors", "'y'"}));
}

TEST(SafeTensors, TruncatedFileIsRefusedAtEveryCut) {
  TempDir dir;
  const auto whole_path = dir.path() / "whole.safetensors";
  save_safetensors(whole_path, {{"enc.weight", patterned({16, 8}, DType::kF32, 1)},
                                {"enc.bias", patterned({8}, DType::kF16, 2)}});
  const std::string whole = read_file_bytes(whole_path);
  const size_t data_start = SafeTensorsFile::open(whole_path).data_section_offset();
  const size_t cuts[] = {0,
                         1,
                         7,
                         8,
                         9,
                         data_start / 2,
                         data_start - 1,
                         data_start,
                         data_start + 100,
                         whole.size() - 1};
  for (size_t cut : cuts) {
    const auto path = dir.path() / ("cut" + std::to_string(cut) + ".safetensors");
    write_file_bytes(path, whole.substr(0, cut));
    EXPECT_TRUE(throws_error([&] { SafeTensorsFile::open(path); }, ErrorCode::kCorruptFile,
                             {path.filename().string(), "truncated"}))
        << "cut at byte " << cut << " of " << whole.size();
  }
  // The tensor that runs past the end is named, with the sizes involved.
  const auto path = dir.path() / "short.safetensors";
  write_file_bytes(path, whole.substr(0, whole.size() - 1));
  EXPECT_TRUE(throws_error(
      [&] { SafeTensorsFile::open(path); }, ErrorCode::kCorruptFile,
      {"tensor 'enc.bias' data [512, 528)", "ends past the end of the file", "(527 data bytes)"}));
}

TEST(SafeTensors, AbsurdHeaderLengthIsRefused) {
  TempDir dir;
  const std::string tail =
      std::string(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})") + "\x01";
  const struct {
    uint64_t length;
    const char* words;
  } cases[] = {{0, "too small"},
               {1, "too small"},
               {100'000'001, "absurd"},
               {uint64_t{1} << 40, "absurd"},
               {~uint64_t{0}, "absurd"}};
  for (const auto& c : cases) {
    const auto path = dir.path() / ("len" + std::to_string(c.length) + ".safetensors");
    write_file_bytes(path, testing::le_u64(c.length) + tail);
    EXPECT_TRUE(throws_error([&] { SafeTensorsFile::open(path); }, ErrorCode::kCorruptFile,
                             {path.filename().string(), "header length", c.words}))
        << "length " << c.length;
  }
}

struct CorruptHeaderCase {
  const char* label;
  std::string header;
  size_t data_bytes;
  ErrorCode code;
  std::vector<std::string> words;
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::vector<CorruptHeaderCase> corrupt_header_cases() {
  const ErrorCode corrupt = ErrorCode::kCorruptFile;
  return {
      {"bad_json", R"({"a":{"dtype":"F32","shape":[1],)", 4, corrupt, {"not valid JSON"}},
      {"trailing_garbage",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}xx)",
       4,
       corrupt,
       {"not valid JSON"}},
      {"not_utf8", "{\"a\xff\":{}}", 0, corrupt, {"not valid JSON"}},
      {"array", "[1, 2, 3]", 0, corrupt, {"array", "expected an object"}},
      {"entry_not_object", R"({"a.weight":[1,2]})", 0, corrupt, {"'a.weight'", "array"}},
      {"no_dtype",
       R"({"a.weight":{"shape":[1],"data_offsets":[0,4]}})",
       4,
       corrupt,
       {"'a.weight'", "no \"dtype\""}},
      {"no_shape",
       R"({"a.weight":{"dtype":"F32","data_offsets":[0,4]}})",
       4,
       corrupt,
       {"'a.weight'", "no \"shape\""}},
      {"no_offsets",
       R"({"a.weight":{"dtype":"F32","shape":[1]}})",
       4,
       corrupt,
       {"'a.weight'", "no \"data_offsets\""}},
      {"unknown_dtype",
       "{" + entry("a.weight", "Q4", "[1]", "[0,1]") + "}",
       1,
       corrupt,
       {"'a.weight'", "unknown dtype 'Q4'"}},
      {"dtype_not_string",
       R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})",
       4,
       corrupt,
       {"'a'", "\"dtype\" must be a string"}},
      {"foreign_dtype",
       "{" + entry("a.weight", "F64", "[1]", "[0,8]") + "}",
       8,
       ErrorCode::kUnsupported,
       {"'a.weight'", "'F64'", "does not support"}},
      {"negative_dim",
       "{" + entry("a", "F32", "[-1]", "[0,4]") + "}",
       4,
       corrupt,
       {"'a'", "non-negative integers"}},
      {"float_dim",
       "{" + entry("a", "F32", "[2.5]", "[0,10]") + "}",
       10,
       corrupt,
       {"'a'", "non-negative integers"}},
      {"shape_not_array",
       "{" + entry("a", "F32", "4", "[0,16]") + "}",
       16,
       corrupt,
       {"'a'", "\"shape\" must be an array"}},
      {"one_offset",
       "{" + entry("a", "F32", "[1]", "[4]") + "}",
       4,
       corrupt,
       {"'a'", "two non-negative integers"}},
      {"negative_offset",
       "{" + entry("a", "F32", "[1]", "[-4,0]") + "}",
       4,
       corrupt,
       {"'a'", "two non-negative integers"}},
      {"begin_after_end",
       "{" + entry("a", "U8", "[0]", "[4,2]") + "}",
       4,
       corrupt,
       {"'a'", "[4, 2)", "begin after"}},
      {"wrong_byte_count",
       "{" + entry("a.weight", "F32", "[2,2]", "[0,12]") + "}",
       12,
       corrupt,
       {"'a.weight'", "holds 12 bytes", "needs 16"}},
      {"huge_shape",
       "{" + entry("a", "F32", "[4294967296,4294967296]", "[0,16]") + "}",
       16,
       corrupt,
       {"'a'", "too large"}},
      {"overlap",
       "{" + entry("a", "F32", "[4]", "[0,16]") + "," + entry("b", "F32", "[4]", "[8,24]") + "}",
       24,
       corrupt,
       {"'a' data [0, 16)", "'b' data [8, 24)", "overlap"}},
      {"overlap_contained",
       "{" + entry("big", "U8", "[32]", "[0,32]") + "," + entry("mid", "U8", "[4]", "[20,24]") +
           "," + entry("small", "U8", "[2]", "[30,32]") + "}",
       32,
       corrupt,
       {"'big'", "'mid'", "overlap"}},
      {"metadata_not_object", R"({"__metadata__":["a"]})", 0, corrupt, {"__metadata__"}},
      {"metadata_number",
       R"({"__metadata__":{"epoch":3}})",
       0,
       corrupt,
       {"__metadata__", "'epoch'", "must be a string"}},
      {"duplicate_name",
       "{" + entry("a", "U8", "[1]", "[0,1]") + "," + entry("a", "U8", "[1]", "[1,2]") + "}",
       2,
       corrupt,
       {"'a'", "twice"}},
  };
}

TEST(SafeTensors, CorruptHeadersAreRefusedNamingTheDefect) {
  TempDir dir;
  for (const CorruptHeaderCase& c : corrupt_header_cases()) {
    const auto path = dir.path() / (std::string(c.label) + ".safetensors");
    write_file_bytes(path, safetensors_bytes(c.header, std::string(c.data_bytes, '\0')));
    try {
      SafeTensorsFile::open(path);
      ADD_FAILURE() << c.label << ": was accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(e.code(), c.code) << c.label << ": " << message;
      EXPECT_NE(message.find(path.string()), std::string::npos) << c.label << ": " << message;
      for (const std::string& word : c.words) {
        EXPECT_NE(message.find(word), std::string::npos)
            << c.label << ": lacks \"" << word << "\": " << message;
      }
    }
  }
}

TEST(SafeTensors, AcceptsEmptyHeaderAndTouchingOrEmptyRanges) {
  TempDir dir;
  const auto empty_path = dir.path() / "empty.safetensors";
  write_file_bytes(empty_path, safetensors_bytes("{}", ""));
  EXPECT_TRUE(SafeTensorsFile::open(empty_path).names().empty());
  // Empty tensors may sit at any offset, even inside another's bytes; and a
  // gap between tensors is allowed.
  const auto path = dir.path() / "touching.safetensors";
  write_file_bytes(path, safetensors_bytes("{" + entry("a", "U8", "[4]", "[0,4]") + "," +
                                               entry("e", "F32", "[0]", "[2,2]") + "," +
                                               entry("b", "U8", "[4]", "[4,8]") + "," +
                                               entry("c", "U8", "[2]", "[10,12]") + "}",
                                           std::string(12, '\x05')));
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "e", "b", "c"}));
  EXPECT_EQ(file.get("c").data<uint8_t>()[1], 5);
}

// ---- the atomic writer -----------------------------------------------------------

TEST(SafeTensorsWriter, LeavesNoTemporaryFileAndReplacesAnExistingFile) {
  TempDir dir;
  const auto path = dir.path() / "model.safetensors";
  save_safetensors(path, {{"a", Tensor::full({2}, 1.0f)}});
  save_safetensors(path, {{"b", Tensor::full({3}, 2.0f)}});
  EXPECT_EQ(entries_in_dir(dir.path()), (std::vector<std::string>{"model.safetensors"}));
  const SafeTensorsFile file = SafeTensorsFile::open(path);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(file.get("b").item_float({2}), 2.0f);
}

TEST(SafeTensorsWriter, RefusesBadInputBeforeTouchingTheFile) {
  TempDir dir;
  const auto path = dir.path() / "keep.safetensors";
  save_safetensors(path, {{"orig", Tensor::full({4}, 3.0f)}});
  const std::string original = read_file_bytes(path);
  const Tensor x = Tensor::full({2}, 1.0f);
  const struct {
    const char* label;
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::map<std::string, std::string> metadata;
    std::string words;
  } cases[] = {
      {"duplicate", {{"a", x}, {"b", x}, {"a", x}}, {}, "'a' is given twice"},
      {"reserved", {{"__metadata__", x}}, {}, "reserved"},
      {"empty name", {{"", x}}, {}, "empty name"},
      {"undefined", {{"u", Tensor()}}, {}, "'u' is undefined"},
      {"not utf-8 name", {{"bad\xff", x}}, {}, "UTF-8"},
      {"not utf-8 metadata", {{"a", x}}, {{"k", "\xc3"}}, "UTF-8"},
  };
  for (const auto& c : cases) {
    EXPECT_TRUE(throws_error([&] { save_safetensors(path, c.tensors, c.metadata); },
                             ErrorCode::kInvalidArgument, {c.words}))
        << c.label;
    EXPECT_EQ(read_file_bytes(path), original) << c.label;
    EXPECT_EQ(entries_in_dir(dir.path()), (std::vector<std::string>{"keep.safetensors"}))
        << c.label;
  }
}

TEST(SafeTensorsWriter, MissingDirectoryIsAnIoErrorNamingThePath) {
  TempDir dir;
  const auto path = dir.path() / "no" / "such" / "dir" / "m.safetensors";
  EXPECT_TRUE(throws_error(
      [&] {
        save_safetensors(path, {{"a", Tensor::full({1}, 1.0f)}});
      },
      ErrorCode::kIo, {"m.safetensors"}));
}

TEST(SafeTensorsWriter, UnwritableDirectoryKeepsTheOriginal) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  TempDir dir;
  const auto path = dir.path() / "ro.safetensors";
  save_safetensors(path, {{"orig", Tensor::full({4}, 3.0f)}});
  const std::string original = read_file_bytes(path);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  EXPECT_TRUE(throws_error(
      [&] {
        save_safetensors(path, {{"a", Tensor::full({1}, 1.0f)}});
      },
      ErrorCode::kIo, {"ro.safetensors"}));
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(read_file_bytes(path), original);
  EXPECT_EQ(entries_in_dir(dir.path()), (std::vector<std::string>{"ro.safetensors"}));
}

// A write that fails half way (the process's file-size limit is hit while
// tensor bytes are written) must remove the temporary file and leave the
// previous checkpoint as it was. The limit is set in a child process so the
// test runner keeps its own; root is subject to RLIMIT_FSIZE too.
TEST(SafeTensorsWriter, FailureMidWriteRemovesTheTemporaryAndKeepsTheOriginal) {
  TempDir dir;
  const auto path = dir.path() / "big.safetensors";
  save_safetensors(path, {{"orig", Tensor::full({4}, 3.0f)}});
  const std::string original = read_file_bytes(path);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // make the oversize write fail with EFBIG instead
    const rlimit limit{16384, 16384};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    int status = 11;  // nothing thrown
    try {
      save_safetensors(path, {{"huge", Tensor::zeros({1 << 16}, DType::kF32)}});
    } catch (const Error& e) {
      const bool named = std::string(e.what()).find("big.safetensors") != std::string::npos;
      status = e.code() == ErrorCode::kIo && named ? 0 : 12;
    } catch (...) {
      status = 13;
    }
    ::_exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the writer was killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit failed, 11: no error, 12: wrong error, "
                                       "13: not an oasr::Error";
  EXPECT_EQ(read_file_bytes(path), original);
  EXPECT_EQ(entries_in_dir(dir.path()), (std::vector<std::string>{"big.safetensors"}));
}

}  // namespace
}  // namespace oasr
