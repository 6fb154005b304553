// The torch.save reader (io/torch_checkpoint.h) on archives assembled here
// byte by byte (unit/torch_test_util.h): every supported structure, and one
// precisely broken file per defect the reader must name. Files written by
// PyTorch itself are in tests/oracle/test_torch_checkpoint_oracle.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>

#include "core/error.h"
#include "io/torch_checkpoint.h"
#include "support/test_support.h"
#include "unit/torch_test_util.h"

namespace oasr {
namespace {

using io::load_torch_state_dict;
using testing::PickleBuilder;
using testing::TempDir;
using testing::write_zip;
using testing::ZipEntry;

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <typename T>
std::string le_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Expects load_torch_state_dict(path) to throw `code` with every needle.
void expect_refused(const std::filesystem::path& path, ErrorCode code,
                    const std::vector<std::string>& needles) {
  try {
    load_torch_state_dict(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << e.what();
    }
  }
}

// A pickle that holds {"w": <tensor of storage "0">} with the given view.
std::string one_tensor_pickle(const std::string& kind, int64_t numel, int64_t offset,
                              const std::vector<int64_t>& size,
                              const std::vector<int64_t>& stride) {
  PickleBuilder p;
  p.proto(2).empty_dict().put(0).text("w").tensor(kind, "0", numel, offset, size, stride);
  return p.setitem().stop().bytes();
}

TEST(TorchCheckpoint, ReadsAStateDictInFileOrderWithExactDtypes) {
  TempDir dir;
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"layer.weight", Tensor::from_vector<float>({1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 7.0f}, {2, 3})},
      {"layer.bias", Tensor::from_vector<float>({0.5f, -0.5f}, {2})},
      {"bn.num_batches_tracked", Tensor::from_vector<int64_t>({123456789012345}, {})},
      {"emb.half", Tensor::from_vector<Half>({Half{0x3c00}, Half{0xfc00}}, {2})},
      {"emb.bf16", Tensor::from_vector<BFloat16>({BFloat16{0x3f80}}, {1})},
      {"ids.i32", Tensor::from_vector<int32_t>({-7, 2147483647}, {2, 1})},
      {"ids.i8", Tensor::from_vector<int8_t>({-128, 127, 0}, {3})},
      {"ids.u8", Tensor::from_vector<uint8_t>({255, 1}, {2})},
      {"a.zzz_after_b", Tensor::from_vector<float>({9.0f}, {1, 1, 1})},
  };
  testing::write_state_dict_pt(dir.path() / "model.pt", tensors, "model");
  const io::TorchStateDict state = load_torch_state_dict(dir.path() / "model.pt");
  EXPECT_EQ(state.container_key, "");
  EXPECT_TRUE(state.converted.empty());
  ASSERT_EQ(state.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(state.tensors[i].first, tensors[i].first);  // the file's order, not sorted
    EXPECT_TRUE(testing::bit_equal(state.tensors[i].second, tensors[i].second)) << tensors[i].first;
  }
  ASSERT_NE(state.find("layer.bias"), nullptr);
  EXPECT_EQ(state.find("missing"), nullptr);
}

TEST(TorchCheckpoint, MaterializesStridedViewsOfSharedStorages) {
  TempDir dir;
  // One storage 0..11 viewed five ways, as torch.save writes views.
  std::vector<float> base(12);
  for (int i = 0; i < 12; ++i) base[i] = static_cast<float>(i);
  PickleBuilder p;
  p.proto(2).empty_dict().put(0).mark();
  p.text("full").tensor("FloatStorage", "0", 12, 0, {3, 4}, {4, 1});
  p.text("transposed").tensor("FloatStorage", "0", 12, 0, {4, 3}, {1, 4});
  p.text("sliced").tensor("FloatStorage", "0", 12, 6, {2, 2}, {4, 1});  // t[1:, 2:]
  p.text("rows").tensor("FloatStorage", "0", 12, 4, {2, 4}, {4, 1});    // t[1:3], contiguous
  p.text("every_other").tensor("FloatStorage", "0", 12, 1, {3, 2}, {4, 2});
  p.text("expanded").tensor("FloatStorage", "0", 12, 2, {2, 3}, {0, 1});  // stride 0
  p.text("scalar").tensor("FloatStorage", "0", 12, 11, {}, {});
  p.text("empty").tensor("FloatStorage", "0", 12, 0, {0, 5}, {5, 1});
  p.setitems().stop();
  write_zip(dir.path() / "views.pt",
            {{"views/data.pkl", p.bytes()}, {"views/data/0", le_bytes(base)}});
  const io::TorchStateDict state = load_torch_state_dict(dir.path() / "views.pt");
  auto expect = [&](const std::string& name, const std::vector<float>& values, const Shape& shape) {
    const Tensor* t = state.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_TRUE(t->is_contiguous()) << name;
    EXPECT_TRUE(testing::bit_equal(*t, Tensor::from_vector(values, shape))) << name;
  };
  expect("full", base, {3, 4});
  expect("transposed", {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, {4, 3});
  expect("sliced", {6, 7, 10, 11}, {2, 2});
  expect("rows", {4, 5, 6, 7, 8, 9, 10, 11}, {2, 4});
  expect("every_other", {1, 3, 5, 7, 9, 11}, {3, 2});
  expect("expanded", {2, 3, 4, 2, 3, 4}, {2, 3});
  expect("scalar", {11}, {});
  expect("empty", {}, {0, 5});
  // A contiguous view shares the storage's bytes instead of copying them.
  EXPECT_EQ(state.find("rows")->storage(), state.find("full")->storage());
  EXPECT_EQ(state.find("rows")->byte_offset(), 4 * sizeof(float));
}

TEST(TorchCheckpoint, ConvertsDoubleShortAndBoolAndSaysSo) {
  TempDir dir;
  const std::vector<double> doubles = {0.1, -1e300, 1e-300, 3.0};
  const std::vector<int16_t> shorts = {-32768, 32767, 5};
  const std::vector<uint8_t> bools = {1, 0, 1};
  PickleBuilder p;
  p.proto(2).empty_dict().put(0).mark();
  p.text("d").tensor("DoubleStorage", "d", 4, 0, {2, 2}, {1, 2});  // transposed too
  p.text("s").tensor("ShortStorage", "s", 3, 0, {3}, {1});
  p.text("b").tensor("BoolStorage", "b", 3, 0, {3}, {1});
  p.setitems().stop();
  write_zip(dir.path() / "c.pt", {{"c/data.pkl", p.bytes()},
                                  {"c/data/d", le_bytes(doubles)},
                                  {"c/data/s", le_bytes(shorts)},
                                  {"c/data/b", le_bytes(bools)}});
  const io::TorchStateDict state = load_torch_state_dict(dir.path() / "c.pt");
  EXPECT_TRUE(testing::bit_equal(
      *state.find("d"),
      Tensor::from_vector<float>({static_cast<float>(0.1), static_cast<float>(1e-300),
                                  -std::numeric_limits<float>::infinity(), 3.0f},
                                 {2, 2})));
  EXPECT_TRUE(
      testing::bit_equal(*state.find("s"), Tensor::from_vector<int32_t>({-32768, 32767, 5}, {3})));
  EXPECT_TRUE(testing::bit_equal(*state.find("b"), Tensor::from_vector<uint8_t>(bools, {3})));
  EXPECT_EQ(state.converted, (std::vector<std::string>{"d: float64 -> float32", "s: int16 -> int32",
                                                       "b: bool -> uint8"}));
}

// A checkpoint wrapping the state dict, as training scripts save it, written
// with the opcodes of several protocols and a class the reader cannot build.
TEST(TorchCheckpoint, PicksTheModelEntryOfAWrapperAndIgnoresTheRest) {
  TempDir dir;
  PickleBuilder p;
  p.proto(4).op(0x95).le(0, 8);          // FRAME (protocol 4 framing)
  p.empty_dict().op(0x94).mark();        // MEMOIZE
  p.short_text("epoch").integer(70000);  // BININT (BININT2 stops at 65535)
  p.short_text("step").integer(-5);
  p.short_text("big").op(0x8a).le(9, 1).raw(std::string("\x01\x00\x00\x00\x00\x00\x00\x00\x01", 9));
  p.short_text("lr").binfloat(0.25);
  p.short_text("flags").empty_list().mark().boolean(true).none().integer(300).appends();
  p.short_text("args")
      .short_text("argparse")
      .short_text("Namespace")
      .op(0x93)  // STACK_GLOBAL
      .tuple_n(0)
      .op(0x81)  // NEWOBJ
      .empty_dict()
      .short_text("lr")
      .binfloat(0.1)
      .setitem()
      .build();
  p.short_text("model").global("collections", "OrderedDict").long_put(300).tuple_n(0).reduce();
  p.mark().short_text("w").tensor("FloatStorage", "0", 2, 0, {2}, {1});
  p.short_text("v").tensor("FloatStorage", "0", 2, 1, {1}, {1}).setitems();
  p.short_text("scheduler").long_get(300).tuple_n(0).reduce();  // an empty OrderedDict again
  p.setitems().stop();
  write_zip(dir.path() / "wrapped.pt",
            {{"wrapped/data.pkl", p.bytes(), /*deflate=*/true},
             {"wrapped/data/0", le_bytes(std::vector<float>{4.0f, 5.0f}), true},
             {"wrapped/byteorder", "little"},
             {"wrapped/version", "3\n"}});
  const io::TorchStateDict state = load_torch_state_dict(dir.path() / "wrapped.pt");
  EXPECT_EQ(state.container_key, "model");
  ASSERT_EQ(state.tensors.size(), 2u);
  EXPECT_EQ(state.tensors[0].first, "w");
  EXPECT_TRUE(testing::bit_equal(state.tensors[1].second, Tensor::from_vector<float>({5.0f}, {1})));
}

TEST(TorchCheckpoint, PicksTheStateDictEntry) {
  TempDir dir;
  PickleBuilder p;
  p.proto(2).empty_dict().mark().text("state_dict").empty_dict();
  p.text("w").tensor("LongStorage", "0", 1, 0, {}, {}).setitem();
  p.text("hparams").empty_dict().text("depth").integer(3).setitem().setitems().stop();
  write_zip(dir.path() / "s.pt",
            {{"s/data.pkl", p.bytes()}, {"s/data/0", le_bytes(std::vector<int64_t>{42})}});
  const io::TorchStateDict state = load_torch_state_dict(dir.path() / "s.pt");
  EXPECT_EQ(state.container_key, "state_dict");
  EXPECT_TRUE(
      testing::bit_equal(state.tensors.at(0).second, Tensor::from_vector<int64_t>({42}, {})));
}

TEST(TorchCheckpoint, RefusesAWrapperWithoutAModelListingItsKeys) {
  TempDir dir;
  PickleBuilder p;
  p.proto(2).empty_dict().mark().text("weights").tensor("FloatStorage", "0", 1, 0, {1}, {1});
  p.text("epoch").integer(3).setitems().stop();
  write_zip(dir.path() / "x.pt",
            {{"x/data.pkl", p.bytes()}, {"x/data/0", le_bytes(std::vector<float>{1})}});
  expect_refused(dir.path() / "x.pt", ErrorCode::kCorruptFile,
                 {"x.pt", "no 'model' or 'state_dict'", "'weights' (tensor)", "'epoch' (int 3)"});
}

TEST(TorchCheckpoint, RefusesAStateDictValueBuiltByAnUnsupportedGlobal) {
  TempDir dir;
  PickleBuilder p;
  p.proto(2).empty_dict().mark().text("model").empty_dict();
  p.text("q").global("torch._utils", "_rebuild_qtensor").tuple_n(0).reduce().setitem();
  p.text("epoch").integer(1).setitems().stop();
  write_zip(dir.path() / "q.pt", {{"q/data.pkl", p.bytes()}});
  expect_refused(dir.path() / "q.pt", ErrorCode::kCorruptFile,
                 {"q.pt ['model']", "'q'", "unsupported global torch._utils._rebuild_qtensor"});
}

TEST(TorchCheckpoint, RefusesFilesThatAreNotTorchZips) {
  TempDir dir;
  expect_refused(dir.path() / "absent.pt", ErrorCode::kNotFound, {"absent.pt", "no such file"});
  write_bytes(dir.path() / "empty.pt", "");
  expect_refused(dir.path() / "empty.pt", ErrorCode::kCorruptFile, {"empty.pt", "empty file"});
  write_bytes(dir.path() / "text.pt", "hello, world\n");
  expect_refused(dir.path() / "text.pt", ErrorCode::kCorruptFile, {"text.pt", "not a zip archive"});
  // The legacy format starts with PROTO 2 and the LONG1 magic number.
  write_bytes(dir.path() / "legacy.pt",
              std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20", 10));
  expect_refused(dir.path() / "legacy.pt", ErrorCode::kUnsupported,
                 {"legacy.pt", "legacy torch.save format", "PyTorch >= 1.6"});
  write_bytes(dir.path() / "bare.pkl", std::string("\x80\x02}q\x00.", 6));
  expect_refused(dir.path() / "bare.pkl", ErrorCode::kCorruptFile, {"bare Python pickle"});
}

TEST(TorchCheckpoint, RefusesATruncatedZip) {
  TempDir dir;
  testing::write_state_dict_pt(dir.path() / "good.pt",
                               {{"w", Tensor::full({64}, 1.0f)}, {"b", Tensor::full({8}, 2.0f)}});
  const std::string bytes = read_bytes(dir.path() / "good.pt");
  write_bytes(dir.path() / "cut.pt", bytes.substr(0, bytes.size() / 2));
  expect_refused(dir.path() / "cut.pt", ErrorCode::kCorruptFile,
                 {"cut.pt", "truncated or damaged zip"});
}

TEST(TorchCheckpoint, RefusesAStorageWhoseBytesFailTheirChecksum) {
  TempDir dir;
  const std::vector<float> values(32, 3.0f);
  const std::string payload = le_bytes(values);
  write_zip(dir.path() / "crc.pt",
            {{"crc/data.pkl", one_tensor_pickle("FloatStorage", 32, 0, {32}, {1})},
             {"crc/data/0", payload}});
  std::string bytes = read_bytes(dir.path() / "crc.pt");
  const size_t at = bytes.find(payload);  // stored uncompressed
  ASSERT_NE(at, std::string::npos);
  bytes[at + 5] ^= 0x40;
  write_bytes(dir.path() / "crc.pt", bytes);
  expect_refused(dir.path() / "crc.pt", ErrorCode::kCorruptFile,
                 {"crc.pt", "crc/data/0", "damaged"});
}

TEST(TorchCheckpoint, NamesTheMissingOrUnusableArchiveParts) {
  TempDir dir;
  const auto& d = dir.path();
  write_zip(d / "nopkl.pt", {{"a/data/0", "xxxx"}, {"a/version", "3"}});
  expect_refused(d / "nopkl.pt", ErrorCode::kCorruptFile,
                 {"nopkl.pt", "missing data.pkl", "a/data/0"});

  const std::string pickle = one_tensor_pickle("FloatStorage", 2, 0, {2}, {1});
  write_zip(d / "nokey.pt", {{"k/data.pkl", pickle}});
  expect_refused(d / "nokey.pt", ErrorCode::kCorruptFile,
                 {"storage key '0' is missing", "k/data/0"});

  write_zip(d / "short.pt", {{"s/data.pkl", pickle}, {"s/data/0", "abcd"}});
  expect_refused(d / "short.pt", ErrorCode::kCorruptFile,
                 {"truncated storage s/data/0", "4 bytes for 2 float32 elements (8 bytes)"});

  write_zip(d / "outside.pt",
            {{"o/data.pkl", one_tensor_pickle("FloatStorage", 4, 2, {2, 2}, {2, 1})},
             {"o/data/0", std::string(16, '\0')}});
  expect_refused(d / "outside.pt", ErrorCode::kCorruptFile,
                 {"reaches element 5 of storage 0", "holds 4"});

  write_zip(d / "big.pt",
            {{"b/data.pkl", pickle}, {"b/data/0", std::string(8, '\0')}, {"b/byteorder", "big"}});
  expect_refused(d / "big.pt", ErrorCode::kUnsupported, {"big.pt", "big-endian"});

  write_zip(
      d / "order.pt",
      {{"b/data.pkl", pickle}, {"b/data/0", std::string(8, '\0')}, {"b/byteorder", "middle"}});
  expect_refused(d / "order.pt", ErrorCode::kCorruptFile, {"byteorder record is 'middle'"});

  write_zip(d / "version.pt",
            {{"v/data.pkl", pickle}, {"v/data/0", std::string(8, '\0')}, {"v/version", "three"}});
  expect_refused(d / "version.pt", ErrorCode::kCorruptFile, {"version record is 'three'"});

  write_zip(d / "complex.pt",
            {{"c/data.pkl", one_tensor_pickle("ComplexFloatStorage", 1, 0, {1}, {1})}});
  expect_refused(d / "complex.pt", ErrorCode::kUnsupported,
                 {"unsupported storage type torch.ComplexFloatStorage"});

  write_zip(d / "script.pt",
            {{"m/data.pkl", pickle}, {"m/constants.pkl", "x"}, {"m/code/__torch__.py", "x"}});
  expect_refused(d / "script.pt", ErrorCode::kUnsupported, {"TorchScript archive"});
}

TEST(TorchCheckpoint, NamesTheOffsetOfAPickleDefect) {
  TempDir dir;
  const auto& d = dir.path();
  PickleBuilder unknown;
  unknown.proto(2).empty_dict().op(0xff);
  write_zip(d / "op.pt", {{"p/data.pkl", unknown.bytes()}});
  expect_refused(d / "op.pt", ErrorCode::kCorruptFile,
                 {"op.pt: p/data.pkl", "unknown pickle opcode 0xff at offset 3"});

  const std::string good = one_tensor_pickle("FloatStorage", 2, 0, {2}, {1});
  write_zip(d / "cut.pt",
            {{"p/data.pkl", good.substr(0, good.size() - 6)}, {"p/data/0", std::string(8, '\0')}});
  expect_refused(d / "cut.pt", ErrorCode::kCorruptFile, {"cut.pt: p/data.pkl", "truncated"});

  PickleBuilder memo;
  memo.proto(2).get(7).stop();
  write_zip(d / "memo.pt", {{"p/data.pkl", memo.bytes()}});
  expect_refused(d / "memo.pt", ErrorCode::kCorruptFile,
                 {"opcode 0x68 at offset 2", "memo index 7"});

  PickleBuilder underflow;
  underflow.proto(2).empty_dict().setitem().stop();
  write_zip(d / "stack.pt", {{"p/data.pkl", underflow.bytes()}});
  expect_refused(d / "stack.pt", ErrorCode::kCorruptFile,
                 {"opcode 0x73 at offset 3", "empty stack"});

  PickleBuilder trailing;
  trailing.proto(2).empty_dict().stop().raw("junk");
  write_zip(d / "tail.pt", {{"p/data.pkl", trailing.bytes()}});
  expect_refused(d / "tail.pt", ErrorCode::kCorruptFile, {"4 bytes after the pickle's STOP"});

  PickleBuilder length;
  length.proto(2).op('X').le(1000000, 4).raw("abc");
  write_zip(d / "len.pt", {{"p/data.pkl", length.bytes()}});
  expect_refused(d / "len.pt", ErrorCode::kCorruptFile, {"a length of 1000000 runs past the end"});

  PickleBuilder not_dict;
  not_dict.proto(2).empty_list().stop();
  write_zip(d / "list.pt", {{"p/data.pkl", not_dict.bytes()}});
  expect_refused(d / "list.pt", ErrorCode::kCorruptFile, {"holds a list of 0, not a state dict"});

  PickleBuilder bad_pid;
  bad_pid.proto(2).empty_dict().text("w").global("torch._utils", "_rebuild_tensor_v2").mark();
  bad_pid.text("not a tuple").binpersid();
  write_zip(d / "pid.pt", {{"p/data.pkl", bad_pid.bytes()}});
  expect_refused(d / "pid.pt", ErrorCode::kCorruptFile, {"persistent id", "str 'not a tuple'"});
}

}  // namespace
}  // namespace oasr
