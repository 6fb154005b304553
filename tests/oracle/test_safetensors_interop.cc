// Interoperability with the reference safetensors implementation (PyPI
// `safetensors`, driven by gen_safetensors_interop.py):
//  - files the reference wrote are read by our reader and compared with the
//    values the generator recorded separately in expected.json;
//  - a file our writer wrote is read back by the reference library.
// Tolerance: none. Reading and writing are byte copies, so every element is
// compared bit for bit; any difference is a bug, not rounding.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return json::parse(in);
}

// The raw element `i` of a CPU tensor as an unsigned integer of its width.
uint64_t element_bits(const Tensor& t, int64_t i) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data()) + i * t.element_size();
  uint64_t bits = 0;
  for (size_t b = 0; b < t.element_size(); ++b) bits |= uint64_t{bytes[b]} << (8 * b);
  return bits;
}

int64_t integer_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kI8:
      return t.data<int8_t>()[i];
    case DType::kU8:
      return t.data<uint8_t>()[i];
    case DType::kI32:
      return t.data<int32_t>()[i];
    case DType::kI64:
      return t.data<int64_t>()[i];
    default:
      ADD_FAILURE() << "not an integer dtype: " << t.str();
      return 0;
  }
}

// Compares one tensor with its expected.json record: dtype, shape, every
// element's bits, and (as a second view of the same fact) its value.
void expect_matches(const std::string& where, const Tensor& got, const json& want) {
  ASSERT_EQ(dtype_safetensors_name(got.dtype()), want.at("dtype").get<std::string>()) << where;
  ASSERT_EQ(got.shape(), want.at("shape").get<Shape>()) << where;
  const json& bits = want.at("bits");
  const json& values = want.at("values");
  ASSERT_EQ(static_cast<int64_t>(bits.size()), got.numel()) << where;
  const Tensor flat = got.contiguous();
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(element_bits(flat, i), bits[i].get<uint64_t>()) << where << " element " << i;
    if (!dtype_is_floating(got.dtype())) {
      EXPECT_EQ(integer_element(flat, i), values[i].get<int64_t>()) << where << " element " << i;
    } else if (!values[i].is_null()) {  // null: NaN or an infinity, covered by the bits
      EXPECT_EQ(flat.reshape({-1}).item_float({i}), values[i].get<double>())
          << where << " element " << i;
    }
  }
}

TEST(SafeTensorsInterop, ReadsFilesWrittenByTheReferenceLibrary) {
  const auto dir = testing::oracle_dir();
  const json expected = read_json(dir / "expected.json");
  int compared = 0;
  for (const auto& [relative, file_record] : expected.at("files").items()) {
    const io::SafeTensorsFile file = io::SafeTensorsFile::open(dir / relative);
    using Metadata = std::map<std::string, std::string>;
    EXPECT_EQ(file.metadata(), file_record.at("metadata").get<Metadata>()) << relative;
    std::vector<std::string> names = file.names();
    std::vector<std::string> expected_names;
    for (const auto& [name, record] : file_record.at("tensors").items()) {
      expected_names.push_back(name);
      expect_matches(relative + ":" + name, file.get(name), record);
      ++compared;
    }
    std::sort(names.begin(), names.end());
    std::sort(expected_names.begin(), expected_names.end());
    EXPECT_EQ(names, expected_names) << relative;
  }
  EXPECT_GE(compared, 16);
}

TEST(SafeTensorsInterop, ReadsAReferenceShardedCheckpoint) {
  const auto dir = testing::oracle_dir();
  const json expected = read_json(dir / "expected.json");
  const io::SafeTensorsCheckpoint ckpt = io::SafeTensorsCheckpoint::open(dir / "sharded");
  EXPECT_EQ(ckpt.files().size(), 2u);
  size_t expected_count = 0;
  for (const auto& [relative, file_record] : expected.at("files").items()) {
    if (relative.rfind("sharded/", 0) != 0) continue;
    for (const auto& [name, record] : file_record.at("tensors").items()) {
      ++expected_count;
      ASSERT_TRUE(ckpt.contains(name)) << name;
      expect_matches("sharded:" + name, ckpt.get(name), record);
    }
  }
  EXPECT_EQ(ckpt.names().size(), expected_count);
  EXPECT_EQ(expected_count, 4u);
}

// Values by definition: element i of each tensor is a small function of i,
// exactly representable in the tensor's dtype.
template <typename T>
Tensor defined_values(const Shape& shape, double (*value_of)(int64_t)) {
  std::vector<T> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(value_of(i));
  return Tensor::from_vector(values, shape);
}

TEST(SafeTensorsInterop, TheReferenceLibraryReadsOurWriter) {
  testing::TempDir dir;
  const auto quarter = [](int64_t i) { return (static_cast<double>(i) - 5.0) * 0.25; };
  const Tensor f32 = defined_values<float>({3, 4}, quarter);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"encoder.embed.weight", f32},
      {"encoder.norm.weight", f32.to(DType::kF16).reshape({12})},
      {"encoder.norm.bias", f32.to(DType::kBF16).reshape({2, 6})},
      {"quant.weight",
       defined_values<int8_t>({2, 5}, [](int64_t i) { return static_cast<double>(i * 25 - 120); })},
      {"quant.zero_point",
       defined_values<uint8_t>({4}, [](int64_t i) { return static_cast<double>(i * 80); })},
      {"quant.counts", defined_values<int32_t>(
                           {3}, [](int64_t i) { return static_cast<double>(i * 1000003 - 7); })},
      {"decoder.step", defined_values<int64_t>({}, [](int64_t) { return 123456789012.0; })},
      {"empty.rows", Tensor::zeros({0, 3}, DType::kF32)},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"writer", "oasr"}};
  const auto file = dir.path() / "from_oasr.safetensors";
  io::save_safetensors(file, tensors, metadata);

  // What the reference must find, written from the tensors' own values.
  json expected = {{"metadata", metadata}, {"tensors", json::object()}};
  for (const auto& [name, tensor] : tensors) {
    json values = json::array();
    const Tensor host = tensor.contiguous().reshape({-1});
    for (int64_t i = 0; i < host.numel(); ++i) {
      if (!dtype_is_floating(tensor.dtype())) {
        values.push_back(integer_element(host, i));
      } else {
        values.push_back(host.item_float({i}));
      }
    }
    expected["tensors"][name] = {{"dtype", dtype_safetensors_name(tensor.dtype())},
                                 {"shape", tensor.shape()},
                                 {"values", values}};
  }
  const auto expected_path = dir.path() / "expected_from_oasr.json";
  std::ofstream(expected_path) << expected.dump();

  const std::string command = std::string(OASR_ORACLE_PYTHON) + " " + OASR_SOURCE_DIR +
                              "/tests/oracle/gen_safetensors_interop.py --check '" + file.string() +
                              "' --expected '" + expected_path.string() + "'";
  const testing::CommandResult result = testing::run_command(command);
  EXPECT_FALSE(result.signaled) << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("interop check: ok (8 tensors)"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace oasr
