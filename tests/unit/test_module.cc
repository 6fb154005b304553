#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "io/safetensors.h"
#include "layers/checkpoint_source.h"
#include "layers/module.h"
#include "support/test_support.h"

namespace oasr {
namespace {

// A two-level toy tree shaped like a Conformer block: encoder.encoders.{0,1}.ff.{w_1,w_2}.
std::shared_ptr<Module> make_linear(int64_t out, int64_t in) {
  auto m = std::make_shared<Module>("Linear");
  m->register_parameter("weight", {out, in});
  m->register_parameter("bias", {out});
  return m;
}

std::shared_ptr<Module> make_tree() {
  auto root = std::make_shared<Module>("Model");
  auto encoder = std::make_shared<Module>("Encoder");
  auto encoders = std::make_shared<Module>("ModuleList");
  for (int i = 0; i < 2; ++i) {
    auto block = std::make_shared<Module>("Block");
    auto ff = std::make_shared<Module>("FeedForward");
    ff->register_module("w_1", make_linear(8, 4));
    ff->register_module("w_2", make_linear(4, 8));
    block->register_module("ff", ff);
    encoders->register_module(std::to_string(i), block);
  }
  // Registered after its children were built: paths must still be full.
  encoder->register_module("encoders", encoders);
  root->register_module("encoder", encoder);
  root->register_parameter("scale", {1}, DType::kF32, DTypePolicy::kExact);
  return root;
}

std::map<std::string, Tensor> full_state(Module& root) {
  std::map<std::string, Tensor> state;
  float v = 0.f;
  for (auto& [name, slot] : root.named_parameters()) {
    state[name] = Tensor::full(slot->shape, v += 1.f);
  }
  return state;
}

TEST(Module, PathsAndNamedParametersInRegistrationOrder) {
  auto root = make_tree();
  auto params = root->named_parameters();
  std::vector<std::string> names;
  for (auto& [n, s] : params) names.push_back(n);
  const std::vector<std::string> expected = {"scale",
                                             "encoder.encoders.0.ff.w_1.weight",
                                             "encoder.encoders.0.ff.w_1.bias",
                                             "encoder.encoders.0.ff.w_2.weight",
                                             "encoder.encoders.0.ff.w_2.bias",
                                             "encoder.encoders.1.ff.w_1.weight",
                                             "encoder.encoders.1.ff.w_1.bias",
                                             "encoder.encoders.1.ff.w_2.weight",
                                             "encoder.encoders.1.ff.w_2.bias"};
  EXPECT_EQ(names, expected);
  auto modules = root->named_modules();
  ASSERT_EQ(modules.size(), 1u + 1 + 1 + 2 * 4);
  EXPECT_EQ(modules[0].first, "");
  EXPECT_EQ(root->child("encoder")->child("encoders")->child("1")->path(), "encoder.encoders.1");
}

TEST(Module, GlobSelectionFollowsFnmatch) {
  auto root = make_tree();
  auto paths = [&](const std::string& glob) {
    std::vector<std::string> out;
    for (Module* m : root->select_modules(glob)) out.push_back(m->path());
    return out;
  };
  EXPECT_EQ(paths("encoder.encoders.0.*"),
            (std::vector<std::string>{"encoder.encoders.0.ff", "encoder.encoders.0.ff.w_1",
                                      "encoder.encoders.0.ff.w_2"}));
  // '*' crosses dots, as Python's fnmatch does.
  EXPECT_EQ(paths("*.w_2"),
            (std::vector<std::string>{"encoder.encoders.0.ff.w_2", "encoder.encoders.1.ff.w_2"}));
  EXPECT_EQ(paths("encoder.encoders.[!0].ff"), (std::vector<std::string>{"encoder.encoders.1.ff"}));
  EXPECT_EQ(paths("encoder.encoders.?.ff.w_1"),
            (std::vector<std::string>{"encoder.encoders.0.ff.w_1", "encoder.encoders.1.ff.w_1"}));
  EXPECT_TRUE(paths("decoder.*").empty());
  EXPECT_TRUE(glob_match("a.b", "a.b"));
  EXPECT_FALSE(glob_match("a.b", "a.bc"));
}

TEST(Module, StrictLoadFillsEverySlot) {
  auto root = make_tree();
  auto state = full_state(*root);
  root->load_state_dict(MapTensorSource(state));
  for (auto& [name, slot] : root->named_parameters()) {
    ASSERT_TRUE(slot->value.defined()) << name;
    EXPECT_TRUE(testing::bit_equal(slot->value, state[name])) << name;
  }
  auto* w1 = root->child("encoder")->child("encoders")->child("0")->child("ff")->child("w_1");
  EXPECT_EQ(w1->param("weight").item_float({7, 3}),
            state["encoder.encoders.0.ff.w_1.weight"].item_float({7, 3}));
}

TEST(Module, StrictLoadReportsEveryDefectAtOnce) {
  auto root = make_tree();
  auto state = full_state(*root);
  state.erase("encoder.encoders.0.ff.w_1.bias");                             // missing
  state.erase("encoder.encoders.1.ff.w_2.weight");                           // missing
  state["encoder.encoders.0.ff.extra"] = Tensor::full({2}, 1.f);             // unexpected
  state["encoder.encoders.1.ff.w_1.weight"] = Tensor::full({4, 8}, 1.f);     // wrong shape
  state["encoder.encoders.1.ff.w_1.bias"] = Tensor::zeros({8}, DType::kI8);  // wrong dtype
  state["scale"] = Tensor::full({1}, 1.f, DType::kF16);  // exact slot: wrong dtype
  try {
    root->load_state_dict(MapTensorSource(state));
    FAIL() << "load accepted a mismatching checkpoint";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(msg.find("2 missing, 1 unexpected, 3 with the wrong shape or dtype"),
              std::string::npos)
        << msg;
    for (const char* name :
         {"encoder.encoders.0.ff.w_1.bias", "encoder.encoders.1.ff.w_2.weight",
          "encoder.encoders.0.ff.extra",
          "encoder.encoders.1.ff.w_1.weight: shape [4, 8], expected [8, 4]",
          "encoder.encoders.1.ff.w_1.bias: dtype int8", "scale: dtype float16, expected float32"}) {
      EXPECT_NE(msg.find(name), std::string::npos) << "missing '" << name << "' in:\n" << msg;
    }
  }
  // Nothing was loaded: the check happens before any data is read.
  for (auto& [name, slot] : root->named_parameters()) EXPECT_FALSE(slot->value.defined()) << name;
}

TEST(Module, NonStrictLoadIgnoresUnexpectedNames) {
  auto root = make_tree();
  auto state = full_state(*root);
  state["unrelated.tensor"] = Tensor::full({3}, 0.f);
  EXPECT_THROW(root->load_state_dict(MapTensorSource(state)), Error);
  LoadOptions options;
  options.strict = false;
  root->load_state_dict(MapTensorSource(state), options);
  EXPECT_TRUE(root->named_parameters()[0].second->value.defined());
}

TEST(Module, FloatingSlotsConvertAndToDTypeSkipsExactSlots) {
  auto root = make_tree();
  auto state = full_state(*root);
  for (auto& [name, t] : state) {
    if (name != "scale") t = t.to(DType::kF16);  // an fp16 checkpoint
  }
  root->load_state_dict(MapTensorSource(state));
  auto params = root->named_parameters();
  EXPECT_EQ(params[1].second->value.dtype(), DType::kF32);  // converted to the slot dtype
  root->to(DType::kBF16);
  EXPECT_EQ(params[0].second->value.dtype(), DType::kF32);   // exact slot untouched
  EXPECT_EQ(params[1].second->value.dtype(), DType::kBF16);  // floating slot cast
  EXPECT_EQ(params[1].second->dtype, DType::kBF16);
  EXPECT_THROW(root->to(DType::kI8), Error);
}

// [W3-S] A NaN or infinite weight is refused at load naming the tensor, in
// every float dtype a checkpoint stores (it used to surface as broken output
// blamed on the audio file).
TEST(Module, ANonFiniteWeightIsRefusedNamingTheTensor) {
  const float bad_values[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const float bad : bad_values) {
      auto root = make_tree();
      auto state = full_state(*root);
      Tensor weight = state["encoder.encoders.1.ff.w_2.weight"].clone();  // [4, 8]
      weight.data<float>()[13] = bad;
      state["encoder.encoders.1.ff.w_2.weight"] = weight.to(dtype);
      try {
        root->load_state_dict(MapTensorSource(state));
        ADD_FAILURE() << dtype_name(dtype) << " " << bad << " was loaded";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCorruptFile);
        EXPECT_NE(std::string(e.what()).find("checkpoint tensor 'encoder.encoders.1.ff.w_2.weight' "
                                             "[4, 8] holds a NaN or infinity (element 13)"),
                  std::string::npos)
            << e.what();
      }
    }
  }
  // The largest finite values load.
  auto root = make_tree();
  auto state = full_state(*root);
  state["encoder.encoders.0.ff.w_1.weight"] =
      Tensor::full({8, 4}, std::numeric_limits<float>::max());
  state["encoder.encoders.0.ff.w_2.weight"] = Tensor::full({4, 8}, 65504.0f, DType::kF16);
  root->load_state_dict(MapTensorSource(state));
}

TEST(Module, RegistrationRefusesDuplicatesAndDottedNames) {
  Module m("M");
  m.register_parameter("weight", {2});
  EXPECT_THROW(m.register_parameter("weight", {2}), Error);
  EXPECT_THROW(m.register_parameter("a.b", {2}), Error);
  EXPECT_THROW(m.register_module("weight", std::make_shared<Module>("X")), Error);
  EXPECT_THROW(m.param("weight"), Error);  // never loaded
  EXPECT_THROW(m.set_param("weight", Tensor::zeros({3}, DType::kF32)), Error);
  m.set_param("weight", Tensor::zeros({2}, DType::kF32));
  EXPECT_EQ(m.param("weight").numel(), 2);
}

TEST(Module, LoadsFromSafetensorsCheckpoint) {
  auto root = make_tree();
  auto state = full_state(*root);
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors(state.begin(), state.end());
  io::save_safetensors(dir.path() / "model.safetensors", tensors);
  root->load_state_dict(CheckpointTensorSource(io::SafeTensorsCheckpoint::open(dir.path())));
  for (auto& [name, slot] : root->named_parameters()) {
    EXPECT_TRUE(testing::bit_equal(slot->value, state[name])) << name;
  }
}

}  // namespace
}  // namespace oasr
