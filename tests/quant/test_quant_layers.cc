// The layer seam: what a quantized layer stores (the spec's state-dict
// table), that model.to(dtype) leaves it alone, alignment refusals, the
// strict dtype-checked load of quantized slots (refused before any data is
// read, naming the tensor), batch invariance, and lane choice.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "core/error.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "quant/format.h"
#include "quant/lanes/scaled_mm_lane.h"
#include "quant/methods/quant_method.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using testing::all_close;
using testing::bit_equal;

template <typename F>
void expect_refused(F&& body, std::initializer_list<std::string> needles) {
  try {
    body();
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << needle << "' not in: " << e.what();
    }
  }
}

Tensor random_tensor(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

// ||a - b|| / ||b|| over all elements (float32 tensors).
double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < bc.numel(); ++i) {
    const double d = static_cast<double>(ac.data<float>()[i]) - bc.data<float>()[i];
    diff += d * d;
    norm += static_cast<double>(bc.data<float>()[i]) * bc.data<float>()[i];
  }
  return std::sqrt(diff / norm);
}

// name -> (dtype, shape) of every slot in a module's state dict.
std::map<std::string, std::pair<DType, Shape>> state_dict_layout(Module& module) {
  std::map<std::string, std::pair<DType, Shape>> out;
  for (auto& [name, slot] : module.named_parameters()) out[name] = {slot->dtype, slot->shape};
  return out;
}

// A root with one child "lin", so state-dict names carry a module path.
struct OneLayer {
  Module root{"Root"};
  std::shared_ptr<layers::Linear> lin;
  explicit OneLayer(std::shared_ptr<layers::Linear> layer) {
    lin = root.register_module("lin", std::move(layer));
  }
  // Linear::forward is not virtual: a LinearActivation runs its own.
  Tensor forward(const Tensor& x) const {
    if (auto* act = dynamic_cast<layers::LinearActivation*>(lin.get())) return act->forward(x);
    return lin->forward(x);
  }
  void load_fp(uint32_t seed) {
    lin->set_param("weight", random_tensor(lin->slot("weight").shape, seed, 0.2f));
    if (lin->has_bias()) lin->set_param("bias", random_tensor({lin->out_features()}, seed + 1));
  }
};

TEST(QuantLayers, StorageFollowsTheStateDictTable) {
  using Layout = std::map<std::string, std::pair<DType, Shape>>;
  {
    OneLayer m(std::make_shared<layers::Linear>(32, 16));
    m.lin->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8")));
    EXPECT_EQ(state_dict_layout(m.root), (Layout{{"lin.weight", {DType::kI8, {16, 32}}},
                                                 {"lin.bias", {DType::kF32, {16}}},
                                                 {"lin.weight_scale", {DType::kF32, {16}}}}));
    EXPECT_EQ(m.lin->type_name(), "Linear");
    EXPECT_EQ(m.lin->slot("weight").policy, DTypePolicy::kExact);
  }
  {
    OneLayer m(std::make_shared<layers::Linear>(32, 16, /*bias=*/false));
    m.lin->attach_quant_method(make_quant_method(scheme_preset("fp8_w8a8_static")),
                               /*runtime_smoothed=*/true);
    EXPECT_EQ(state_dict_layout(m.root), (Layout{{"lin.weight", {DType::kF8E4M3, {16, 32}}},
                                                 {"lin.weight_scale", {DType::kF32, {16}}},
                                                 {"lin.smooth_inv", {DType::kF32, {32}}},
                                                 {"lin.input_scale", {DType::kF32, {1}}}}));
  }
  {
    Module root("Root");
    auto pw = root.register_module("pw", std::make_shared<layers::PointwiseConv1d>(48, 24));
    pw->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8")));
    EXPECT_EQ(state_dict_layout(root), (Layout{{"pw.weight", {DType::kI8, {24, 48, 1}}},
                                               {"pw.bias", {DType::kF32, {24}}},
                                               {"pw.weight_scale", {DType::kF32, {24}}}}));
    EXPECT_EQ(pw->type_name(), "PointwiseConv1d");
  }
  {
    Module root("Root");
    auto conv = root.register_module("conv", std::make_shared<layers::Conv2d>(16, 8, 3, 3, 2, 2));
    conv->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8_static")));
    EXPECT_EQ(state_dict_layout(root), (Layout{{"conv.weight", {DType::kI8, {8, 3, 3, 16}}},
                                               {"conv.bias", {DType::kF32, {8}}},
                                               {"conv.weight_scale", {DType::kF32, {8}}},
                                               {"conv.input_scale", {DType::kF32, {1}}}}));
  }
}

TEST(QuantLayers, ToDtypeLeavesQuantizedTensorsAlone) {
  OneLayer m(std::make_shared<layers::LinearActivation>(32, 16, Activation::kRelu));
  m.load_fp(7);
  m.lin->quantize_weight_online(make_quant_method(scheme_preset("int8_w8a8")));
  m.lin->bind_quant(BindOptions{});
  const Tensor weight = m.lin->param("weight").clone();
  const Tensor scale = m.lin->param("weight_scale").clone();
  const Tensor x = random_tensor({5, 32}, 9);
  m.root.to(DType::kF16);
  EXPECT_TRUE(bit_equal(m.lin->param("weight"), weight));
  EXPECT_TRUE(bit_equal(m.lin->param("weight_scale"), scale));
  EXPECT_EQ(m.lin->param("bias").dtype(), DType::kF16);  // the served dtype
  // Served in fp16: fp16 in, fp16 out, the fp32 epilogue result rounded once.
  const Tensor x16 = x.to(DType::kF16);
  const Tensor y16 = m.forward(x16);
  EXPECT_EQ(y16.dtype(), DType::kF16);
  EXPECT_TRUE(bit_equal(y16, m.forward(x16.to(DType::kF32)).to(DType::kF16)));
  // The relu in the epilogue.
  for (int64_t i = 0; i < y16.numel(); ++i) EXPECT_GE(y16.item_float({i / 16, i % 16}), 0.0f);
}

TEST(QuantLayers, UnalignedOrUnservableLayersAreRefusedByName) {
  OneLayer in20(std::make_shared<layers::Linear>(20, 16));
  expect_refused(
      [&] { in20.lin->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8"))); },
      {"Linear 'lin'", "in_features 20 is not a multiple of 16"});
  OneLayer out12(std::make_shared<layers::Linear>(32, 12));
  expect_refused(
      [&] { out12.lin->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8"))); },
      {"out_features 12 is not a multiple of 8"});
  Module root("Root");
  auto stem = root.register_module("stem", std::make_shared<layers::Conv2d>(1, 16, 3, 3, 2, 2));
  EXPECT_NE(stem->quant_refusal(scheme_preset("int8_w8a8_static")).find("in_channels 1"),
            std::string::npos);
  auto conv = root.register_module("conv", std::make_shared<layers::Conv2d>(16, 16, 3, 3, 2, 2));
  EXPECT_EQ(conv->quant_refusal(scheme_preset("int8_w8a8_static")), "");
  EXPECT_NE(conv->quant_refusal(scheme_preset("fp8_w8a8_static")).find("int8 only"),
            std::string::npos);
  auto dw = root.register_module("dw", std::make_shared<layers::DepthwiseConv1d>(32, 15));
  EXPECT_NE(dw->quant_refusal(scheme_preset("int8_w8a8_static")).find("depthwise"),
            std::string::npos);
  // nvfp4 is refused before any layer is touched.
  expect_refused([] { make_quant_method(scheme_preset("nvfp4")); }, {"nvfp4"});
}

// A TensorSource that counts data reads, to prove refusals come first.
class CountingSource final : public TensorSource {
 public:
  explicit CountingSource(std::map<std::string, Tensor> tensors) : inner_(std::move(tensors)) {}
  std::vector<std::string> names() const override { return inner_.names(); }
  bool contains(const std::string& n) const override { return inner_.contains(n); }
  DType dtype(const std::string& n) const override { return inner_.dtype(n); }
  Shape shape(const std::string& n) const override { return inner_.shape(n); }
  Tensor get(const std::string& n) const override {
    ++reads;
    return inner_.get(n);
  }
  mutable int reads = 0;

 private:
  MapTensorSource inner_;
};

TEST(QuantLayers, QuantizedCheckpointLoadIsStrictAndRefusesBeforeReading) {
  // The reference tensors: an online-quantized static-input layer.
  OneLayer online(std::make_shared<layers::Linear>(32, 16));
  online.load_fp(3);
  online.lin->quantize_weight_online(make_quant_method(scheme_preset("int8_w8a8")));
  std::map<std::string, Tensor> good = {{"lin.weight", online.lin->param("weight")},
                                        {"lin.weight_scale", online.lin->param("weight_scale")},
                                        {"lin.bias", online.lin->param("bias")},
                                        {"lin.input_scale", Tensor::full({1}, 0.02f)}};
  auto fresh = [] {
    auto m = std::make_unique<OneLayer>(std::make_shared<layers::Linear>(32, 16));
    m->lin->attach_quant_method(make_quant_method(scheme_preset("int8_w8a8_static")));
    return m;
  };
  struct Case {
    const char* what;
    std::function<void(std::map<std::string, Tensor>&)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"fp32 weight",
       [](auto& t) {
         t["lin.weight"] = Tensor::zeros({16, 32}, DType::kF32);
       },
       {"lin.weight: dtype float32, expected int8"}},
      {"fp8 weight for an int8 slot",
       [](auto& t) {
         t["lin.weight"] = Tensor::zeros({16, 32}, DType::kF8E4M3);
       },
       {"lin.weight: dtype float8_e4m3fn, expected int8"}},
      {"missing weight_scale",
       [](auto& t) { t.erase("lin.weight_scale"); },
       {"missing", "lin.weight_scale"}},
      {"missing input_scale",
       [](auto& t) { t.erase("lin.input_scale"); },
       {"missing", "lin.input_scale"}},
      {"weight_scale of the wrong shape",
       [](auto& t) { t["lin.weight_scale"] = Tensor::zeros({8}, DType::kF32); },
       {"lin.weight_scale: shape [8], expected [16]"}},
      {"fp16 weight_scale",
       [](auto& t) { t["lin.weight_scale"] = Tensor::zeros({16}, DType::kF16); },
       {"lin.weight_scale: dtype float16, expected float32"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::map<std::string, Tensor> tensors = good;
    c.edit(tensors);
    CountingSource source(tensors);
    auto m = fresh();
    expect_refused([&] { m->root.load_state_dict(source); },
                   std::initializer_list<std::string>{c.needles.front()});
    for (const std::string& needle : c.needles) {
      try {
        m->root.load_state_dict(source);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(source.reads, 0) << "data was read before the refusal";
  }
  CountingSource source(good);
  auto m = fresh();
  m->root.load_state_dict(source);
  EXPECT_EQ(source.reads, 4);
  m->lin->bind_quant(BindOptions{});
  EXPECT_TRUE(bit_equal(m->lin->param("weight"), online.lin->param("weight")));
  const Tensor y = m->forward(random_tensor({3, 32}, 5));
  EXPECT_EQ(y.shape(), (Shape{3, 16}));
}

TEST(QuantLayers, RowsAreBitIdenticalAloneOrInAnyBatch) {
  for (const char* scheme : {"int8_w8a8", "fp8_w8a8"}) {
    for (const ScaledMMLane& lane : registered_lanes()) {
      if (lane.device != DeviceType::kCPU || !lane.serves(scheme_preset(scheme).weight.dtype) ||
          !lane.is_available()) {
        continue;  // the CUDA lanes have their own tests (tests/cuda/test_quant_cuda_layers.cc)
      }
      SCOPED_TRACE(std::string(scheme) + " " + lane.name);
      OneLayer m(std::make_shared<layers::LinearActivation>(64, 40, Activation::kSwish));
      m.load_fp(11);
      m.lin->quantize_weight_online(make_quant_method(scheme_preset(scheme)));
      m.lin->bind_quant(BindOptions{Device::cpu(), lane.name});
      Tensor batch = random_tensor({2, 37, 64}, 12);
      const Tensor all = m.forward(batch);
      for (int64_t row : {0, 17, 36}) {
        const Tensor one = batch.narrow(0, 1, 1).narrow(1, row, 1);
        EXPECT_TRUE(bit_equal(m.forward(one).contiguous(),
                              all.narrow(0, 1, 1).narrow(1, row, 1).contiguous()));
      }
      // And close to the full-precision layer (8-bit rounding only).
      OneLayer fp(std::make_shared<layers::LinearActivation>(64, 40, Activation::kSwish));
      fp.load_fp(11);
      const double error = relative_error(all, fp.forward(batch));
      EXPECT_LT(error, std::string(scheme) == "int8_w8a8" ? 0.02 : 0.06);
      EXPECT_GT(error, 0.0);  // it did run quantized
    }
  }
}

TEST(QuantLayers, TheLaneIsChosenOnceAndNamedLanesAreRequired) {
  OneLayer m(std::make_shared<layers::Linear>(32, 16));
  m.load_fp(21);
  m.lin->quantize_weight_online(make_quant_method(scheme_preset("int8_w8a8")));
  expect_refused(
      [&] {
        m.forward(random_tensor({2, 32}, 1));
      },
      {"before bind_quantization chose its lane"});
  m.lin->bind_quant(BindOptions{Device::cpu(), "cpu_reference"});
  EXPECT_EQ(m.lin->quant_method()->lane().name, "cpu_reference");
  m.lin->bind_quant(BindOptions{Device::cpu(), "auto"});
  // auto: the fastest int8 lane this CPU runs (AMX, AVX-512 VNNI, AVX-VNNI, AVX2).
  std::string fastest = "cpu_reference";
  for (const char* name :
       {"cpu_avx2_int8", "cpu_avx_vnni_int8", "cpu_avx512_vnni_int8", "cpu_amx_int8"}) {
    const ScaledMMLane* candidate = find_lane(name);
    if (candidate != nullptr && candidate->is_available()) fastest = name;
  }
  EXPECT_EQ(m.lin->quant_method()->lane().name, fastest);
  expect_refused(
      [&] {
        m.lin->bind_quant(BindOptions{Device::cpu(), "mma_sync"});
      },
      {"OASR_SCALED_MM_BACKEND=mma_sync", "CUDA lane", "cpu"});
  expect_refused(
      [&] {
        m.lin->bind_quant(BindOptions{Device::cpu(), "cpu_fancy"});
      },
      {"cpu_fancy", "names no lane"});
  OneLayer f(std::make_shared<layers::Linear>(32, 16));
  f.load_fp(22);
  f.lin->quantize_weight_online(make_quant_method(scheme_preset("fp8_w8a8")));
  f.lin->bind_quant(BindOptions{Device::cpu(), "auto"});
  EXPECT_EQ(f.lin->quant_method()->lane().name, "cpu_reference");  // fp8 on CPU: reference only
  if (find_lane("cpu_avx2_int8") != nullptr) {
    expect_refused(
        [&] {
          f.lin->bind_quant(BindOptions{Device::cpu(), "cpu_avx2_int8"});
        },
        {"cpu_avx2_int8 does not serve fp8_e4m3"});
  }
}

}  // namespace
}  // namespace oasr::quant
