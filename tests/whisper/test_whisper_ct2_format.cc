// oasr's CTranslate2 model.bin reader (io/ct2_model.h) against files written
// by gen_whisper_ct2_format.py from CTranslate2's format definition: every
// binary version 1-6, every CTranslate2 dtype, aliases (an alias of an
// alias, a scale companion), and refusals that name the offset and size
// the generator computed while writing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/ct2_model.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace oasr {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json& cases() {
  return testing::oracle_cases().cases;
}

Tensor expected(const std::string& case_name, const std::string& name) {
  return testing::oracle_cases().file.get(case_name + "/" + name);
}

io::Ct2Model open_case(const std::string& case_name) {
  return io::Ct2Model::open(testing::oracle_dir() /
                            cases().at(case_name)["file"].get<std::string>());
}

ErrorCode code_named(const std::string& name) {
  return name == "kUnsupported" ? ErrorCode::kUnsupported : ErrorCode::kCorruptFile;
}

TEST(Ct2ModelFormat, ReadsEveryVersionAndDtypeAsWritten) {
  size_t checked = 0;
  for (const auto& [case_name, info] : cases().items()) {
    if (!info["refused"].is_null()) continue;
    SCOPED_TRACE(case_name);
    const io::Ct2Model model = open_case(case_name);
    EXPECT_EQ(model.binary_version(), info["version"].get<uint32_t>());
    EXPECT_EQ(model.spec_name(), info["spec"].get<std::string>());
    EXPECT_EQ(model.spec_revision(), info["revision"].get<uint32_t>());
    EXPECT_EQ(model.file_size(), info["size"].get<size_t>());
    const json& variables = info["variables"];
    ASSERT_EQ(model.variables().size(), variables.size());
    for (size_t i = 0; i < variables.size(); ++i) {
      const std::string name = variables[i]["name"].get<std::string>();
      SCOPED_TRACE(name);
      const io::Ct2VariableInfo& got = model.variables()[i];
      EXPECT_EQ(got.name, name);  // file order
      EXPECT_EQ(io::ct2_dtype_name(got.dtype), variables[i]["dtype"].get<std::string>());
      EXPECT_EQ(got.shape, variables[i]["shape"].get<Shape>());
      EXPECT_EQ(got.data_offset, variables[i]["offset"].get<size_t>());
      const Tensor tensor = model.get(name);
      const Tensor want = expected(case_name, name);
      EXPECT_EQ(tensor.dtype(), io::ct2_tensor_dtype(got.dtype));
      if (want.numel() == 0) {
        EXPECT_EQ(tensor.shape(), want.shape());
      } else {
        EXPECT_TRUE(testing::bit_equal(tensor, want));
      }
      ++checked;
    }
    std::vector<std::pair<std::string, std::string>> aliases;
    for (const json& pair : info["aliases"]) aliases.emplace_back(pair[0], pair[1]);
    EXPECT_EQ(model.aliases(), aliases);
  }
  EXPECT_GE(checked, 3u * 13u + 3u * 4u);  // v4-v6 rich, v1-v3 old
}

TEST(Ct2ModelFormat, ResolvesAliasesAsCTranslate2Does) {
  const io::Ct2Model model = open_case("v6");
  // q -> p -> h/weight: CTranslate2 resolves the chain when registering.
  EXPECT_EQ(model.resolve("q/weight"), "h/weight");
  EXPECT_EQ(model.resolve("p/weight"), "h/weight");
  EXPECT_TRUE(testing::bit_equal(model.get("q/weight"), expected("v6", "h/weight")));
  // The scale of an aliased weight is reachable under the alias.
  EXPECT_TRUE(model.contains("p/weight_scale"));
  EXPECT_EQ(model.resolve("p/weight_scale"), "h/weight_scale");
  EXPECT_FALSE(model.contains("p/weight_zero"));  // no such companion stored
  EXPECT_EQ(model.resolve("r"), "a/float32");
  EXPECT_EQ(model.info("r").name, "a/float32");
  try {
    model.get("no/such");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("'no/such'"), std::string::npos) << e.what();
  }
}

TEST(Ct2ModelFormat, ReadsScalarsAndBorrowsAlignedPayloads) {
  const io::Ct2Model model = open_case("v6");
  EXPECT_EQ(model.scalar_int("encoder/num_heads"), 6);
  EXPECT_EQ(model.scalar_int("decoder/activation"), 3);
  EXPECT_THROW(model.scalar_int("a/float32"), Error);
  // Tensors stay valid after the model object is gone (they own the mapping).
  Tensor kept;
  {
    const io::Ct2Model scoped = open_case("v6");
    kept = scoped.get("g/int32");
  }
  EXPECT_TRUE(testing::bit_equal(kept, expected("v6", "g/int32")));
  const io::Ct2Model old = open_case("v1");
  EXPECT_EQ(old.scalar_int("x/scalar"), 4);
  EXPECT_EQ(old.get("x/int16").dtype(), DType::kI32);  // widened: oasr has no int16
}

TEST(Ct2ModelFormat, RefusesDamagedFilesNamingOffsetAndSize) {
  size_t checked = 0;
  for (const auto& [case_name, info] : cases().items()) {
    if (info["refused"].is_null()) continue;
    SCOPED_TRACE(case_name);
    try {
      open_case(case_name);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code_named(info["refused"]["code"])) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find(info["file"].get<std::string>()), std::string::npos) << message;
      for (const json& needle : info["refused"]["needles"]) {
        EXPECT_NE(message.find(needle.get<std::string>()), std::string::npos)
            << "lacks \"" << needle.get<std::string>() << "\": " << message;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 13u);
}

TEST(Ct2ModelFormat, MissingFileIsNotFound) {
  try {
    io::Ct2Model::open(testing::oracle_dir() / "absent.bin");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

}  // namespace
}  // namespace oasr
