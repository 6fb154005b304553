// The case table: the U2++ Conformer's real shapes (d = 256, 4 heads of 64,
// FFN 2048, T in {1, 37, 250}, B in {1, 3}, vocab 5000, Conv2dSubsampling on
// [B, 1, T, 80], depthwise K = 15 causal and symmetric) and edge shapes (one
// element, odd sizes, D not a multiple of 32, K = 0, empty batches).
#include "backend_ops_cases.h"

#include <cmath>
#include <span>

#include "core/error.h"
#include "ops/activation.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv1d.h"
#include "ops/depthwise_conv2d.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "ops/layer_norm.h"
#include "ops/log_softmax.h"
#include "ops/rms_norm.h"
#include "ops/rotary_embedding.h"
#include "ops/sequence_mask.h"
#include "ops/softmax.h"

namespace oasr::backend_ops {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr int64_t kModel = 256;
constexpr int64_t kHeads = 4;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kFfn = 2048;
constexpr int64_t kVocab = 5000;
constexpr int64_t kMel = 80;
constexpr int64_t kDepthwiseK = 15;

// {B, T} pairs of the Conformer cases: one frame, an odd utterance, a long batch.
constexpr std::pair<int64_t, int64_t> kBatchTimes[] = {{1, 1}, {3, 37}, {3, 250}};

std::string dims(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

InputSpec real(Shape shape, float scale = 1.0f) {
  InputSpec spec;
  spec.shape = std::move(shape);
  spec.scale = scale;
  return spec;
}

InputSpec absent() {
  InputSpec spec;
  spec.kind = InputKind::kUndefined;
  return spec;
}

InputSpec mask(Shape shape, MaskPattern pattern) {
  InputSpec spec;
  spec.kind = InputKind::kMask;
  spec.shape = std::move(shape);
  spec.mask = pattern;
  return spec;
}

InputSpec ids(Shape shape, int64_t limit, DType dtype) {
  InputSpec spec;
  spec.kind = InputKind::kIds;
  spec.shape = std::move(shape);
  spec.id_limit = limit;
  spec.id_dtype = dtype;
  return spec;
}

// Weights scaled by 1/sqrt(fan_in) keep outputs near unit size at every K.
float fan_in_scale(int64_t fan_in) {
  return fan_in > 0 ? 1.0f / std::sqrt(static_cast<float>(fan_in)) : 1.0f;
}

class Table {
 public:
  // Adds the case once per dtype.
  void add(std::string op, std::string shape, std::string params, std::vector<InputSpec> inputs,
           Family family, RunFn run, double flops = 0) {
    for (DType dtype : kDTypes) {
      OpCase c;
      c.op = op;
      c.dtype = dtype;
      c.shape = shape;
      c.params = params;
      c.inputs = inputs;
      c.run = run;
      c.family = family;
      c.flops = flops;
      cases_.push_back(std::move(c));
    }
  }
  std::vector<OpCase> take() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
};

using Inputs = const std::vector<Tensor>&;
using Outputs = std::vector<Tensor>;

void add_linear(Table& t, Shape x, int64_t n, bool bias) {
  const int64_t k = x.back();
  const int64_t rows = shape_numel(Shape(x.begin(), x.end() - 1));
  t.add(
      "linear", dims(x) + "_w" + dims({n, k}), bias ? "bias" : "nobias",
      {real(x), real({n, k}, fan_in_scale(k)), bias ? real({n}) : absent()}, Family::kGemm,
      [](Inputs in) -> Outputs { return {ops::linear(in[0], in[1], in[2])}; },
      2.0 * static_cast<double>(rows) * static_cast<double>(n) * static_cast<double>(k));
}

void add_matmul(Table& t, Shape a, Shape b, bool transpose_b) {
  const int64_t k = a.back();
  const int64_t n = transpose_b ? b[b.size() - 2] : b.back();
  const double flops = 2.0 * static_cast<double>(shape_numel(a)) * static_cast<double>(n);
  t.add(
      "matmul", dims(a) + "_" + dims(b), transpose_b ? "transpose_b" : "",
      {real(a), real(b, fan_in_scale(k))}, Family::kGemm,
      [transpose_b](Inputs in) -> Outputs { return {ops::matmul(in[0], in[1], transpose_b)}; },
      flops);
}

void add_gemm_cases(Table& t) {
  for (auto [b, time] : kBatchTimes) {
    add_linear(t, {b, time, kModel}, kFfn, true);    // feed-forward w_1
    add_linear(t, {b, time, kModel}, kModel, true);  // attention q/k/v/out
  }
  add_linear(t, {3, 250, kFfn}, kModel, true);   // feed-forward w_2
  add_linear(t, {3, 37, kModel}, kVocab, true);  // CTC head
  add_linear(t, {3, 37, kModel}, 3 * kModel, false);
  add_linear(t, {1, 1}, 1, true);        // one element
  add_linear(t, {2, 3, 17}, 33, false);  // odd sizes
  add_linear(t, {5, 33}, 7, true);
  add_linear(t, {3, 5, 0}, 7, true);         // K = 0: the bias
  add_linear(t, {3, 5, 0}, 7, false);        // K = 0: zeros
  add_linear(t, {0, kModel}, kModel, true);  // empty batch

  for (auto [b, time] : kBatchTimes) {
    // scores = q k^T, then context = attn v, per head.
    add_matmul(t, {b, kHeads, time, kHeadDim}, {b, kHeads, time, kHeadDim}, true);
    add_matmul(t, {b, kHeads, time, time}, {b, kHeads, time, kHeadDim}, false);
  }
  add_matmul(t, {1, 1}, {1, 1}, false);
  add_matmul(t, {5, 3}, {3, 7}, false);
  add_matmul(t, {2, 9, 33}, {2, 17, 33}, true);
  add_matmul(t, {2, 0, 5}, {2, 5, 4}, false);  // M = 0
}

void add_binary(Table& t, const char* op, Shape a, Shape b, float alpha = 0) {
  const std::string name = op;
  const std::string params = name == "add_scaled" ? (alpha == 0.5f ? "alpha0p5" : "alpham1p3") : "";
  RunFn run = [name, alpha](Inputs in) -> Outputs {
    if (name == "add") return {ops::add(in[0], in[1])};
    if (name == "mul") return {ops::mul(in[0], in[1])};
    return {ops::add_scaled(in[0], in[1], alpha)};
  };
  t.add(name, dims(a) + "_" + dims(b), params, {real(a), real(b)}, Family::kExact, run);
}

void add_elementwise_cases(Table& t) {
  for (const char* op : {"add", "mul", "add_scaled"}) {
    const float alpha = 0.5f;
    add_binary(t, op, {3, 250, kModel}, {3, 250, kModel}, alpha);
    add_binary(t, op, {3, 37, kModel}, {kModel}, alpha);        // bias-like broadcast
    add_binary(t, op, {3, 37, kModel}, {1, 1, kModel}, alpha);  // leading 1s
    add_binary(t, op, {7, 33}, {1}, alpha);                     // scalar-like
    add_binary(t, op, {1}, {1}, alpha);
    add_binary(t, op, {0, kModel}, {kModel}, alpha);  // empty batch
  }
  add_binary(t, "add_scaled", {5, 33}, {5, 33}, -1.3f);
  for (float factor : {0.125f, -3.0f}) {
    for (const Shape& shape : {Shape{3, 250, kModel}, Shape{1}, Shape{5, 33}}) {
      t.add("scale", dims(shape), factor > 0 ? "f0p125" : "fm3", {real(shape)}, Family::kExact,
            [factor](Inputs in) -> Outputs { return {ops::scale(in[0], factor)}; });
    }
  }
}

void add_activation_cases(Table& t) {
  const std::pair<Activation, const char*> kinds[] = {
      {Activation::kNone, "none"},          {Activation::kRelu, "relu"},
      {Activation::kSwish, "swish"},        {Activation::kGeluErf, "gelu_erf"},
      {Activation::kGeluTanh, "gelu_tanh"}, {Activation::kSigmoid, "sigmoid"},
      {Activation::kTanh, "tanh"}};
  for (auto [kind, label] : kinds) {
    for (const Shape& shape : {Shape{3, 37, kModel}, Shape{1}, Shape{7, 33}}) {
      t.add("activation", dims(shape), label, {real(shape, 4.0f)}, Family::kExact,
            [kind](Inputs in) -> Outputs { return {ops::activation(in[0], kind)}; });
    }
  }
  // The Conformer's feed-forward hidden layer: 3 and 64 ten-second rows (16-bit
  // inputs from 2^20 elements on go through the result table).
  for (int64_t rows : {3, 64}) {
    t.add("activation", dims({rows, 250, kFfn}), "swish", {real({rows, 250, kFfn}, 4.0f)},
          Family::kExact,
          [](Inputs in) -> Outputs { return {ops::activation(in[0], Activation::kSwish)}; });
  }
  for (auto [kind, label] : {std::pair{Activation::kSwish, "swish"}, {Activation::kRelu, "relu"}}) {
    for (const Shape& shape : {Shape{3, 37, kFfn}, Shape{1}, Shape{0, 5}}) {
      t.add("activation_inplace", dims(shape), label, {real(shape, 4.0f)}, Family::kExact,
            [kind](Inputs in) -> Outputs {
              Tensor y = in[0].clone();
              ops::activation_inplace(y, kind);
              return {y};
            });
    }
  }
}

void add_glu_cases(Table& t) {
  for (auto [b, time] : kBatchTimes) {
    t.add("glu", dims({b, 2 * kModel, time}), "dim1", {real({b, 2 * kModel, time}, 3.0f)},
          Family::kExact, [](Inputs in) -> Outputs { return {ops::glu(in[0], 1)}; });
  }
  t.add("glu", dims({3, 37, 66}), "dimm1", {real({3, 37, 66}, 3.0f)}, Family::kExact,
        [](Inputs in) -> Outputs { return {ops::glu(in[0], -1)}; });
  t.add("glu", dims({1, 2}), "dimm1", {real({1, 2}, 3.0f)}, Family::kExact,
        [](Inputs in) -> Outputs { return {ops::glu(in[0], -1)}; });
}

void add_norm_cases(Table& t) {
  constexpr float kEps = 1e-5f;
  auto layer_norm = [](Inputs in) -> Outputs {
    return {ops::layer_norm(in[0], in[1], in[2], kEps)};
  };
  for (auto [b, time] : kBatchTimes) {
    // An offset mean (scale 3 around a shift is built into the data by the bias of
    // the previous layer in real models; here plain normal data).
    t.add("layer_norm", dims({b, time, kModel}), "eps1e5",
          {real({b, time, kModel}, 3.0f), real({kModel}), real({kModel})}, Family::kNorm,
          layer_norm);
  }
  t.add("layer_norm", dims({3, 37, kModel}), "noaffine",
        {real({3, 37, kModel}), absent(), absent()}, Family::kNorm, layer_norm);
  for (const Shape& shape : {Shape{2, 5, 33}, Shape{4, 1}, Shape{1, 1}, Shape{3, 257},
                             Shape{16, 384}, Shape{2, 1000}, Shape{5, 1024}, Shape{0, kModel}}) {
    const int64_t d = shape.back();
    t.add("layer_norm", dims(shape), "eps1e5", {real(shape, 2.0f), real({d}), real({d})},
          Family::kNorm, layer_norm);
  }
  // The Qwen2 LM's norm: rows of a small config and of the 7B's width (3584),
  // one row (a decode step), no weight.
  auto rms_norm = [](Inputs in) -> Outputs { return {ops::rms_norm(in[0], in[1], 1e-6f)}; };
  for (const Shape& shape : {Shape{3, 37, 64}, Shape{1, 3584}, Shape{17, 3584}, Shape{0, 64}}) {
    const int64_t d = shape.back();
    t.add("rms_norm", dims(shape), "eps1e6", {real(shape, 2.0f), real({d})}, Family::kNorm,
          rms_norm);
  }
  t.add("rms_norm", dims({4, 896}), "noweight", {real({4, 896}), absent()}, Family::kNorm,
        rms_norm);
  // Rotary embedding at a Qwen2 head (128, theta 1e6) over a prefill of 37
  // rows and at far positions of a decode step.
  auto rotary = [](Inputs in) -> Outputs {
    const Tensor inv_freq = ops::rotary_inv_freq(in[0].size(3), 1000000.0f).to(in[0].device());
    const int64_t b = in[0].size(0), time = in[0].size(1);
    Tensor positions = Tensor::empty({b, time}, DType::kI64);
    for (int64_t i = 0; i < b * time; ++i) positions.data<int64_t>()[i] = (i * 977) % 32768;
    return {ops::rotary_embedding(in[0], positions.to(in[0].device()), inv_freq)};
  };
  for (const Shape& shape : {Shape{2, 37, 4, 128}, Shape{5, 1, 2, 128}, Shape{1, 3, 1, 8}}) {
    t.add("rotary_embedding", dims(shape), "theta1e6", {real(shape, 2.0f)}, Family::kNorm, rotary);
  }
  for (auto [b, time] : {std::pair<int64_t, int64_t>{3, 37}, {3, 250}}) {
    const Shape x = {b, time, kModel};
    t.add("add_layer_norm", dims(x), "eps1e5",
          {real(x), real(x, 3.0f), real({kModel}), real({kModel})}, Family::kNorm,
          [](Inputs in) -> Outputs {
            auto r = ops::add_layer_norm(in[0], in[1], in[2], in[3], kEps);
            return {r.sum, r.normalized};
          });
    t.add("add_scaled_layer_norm", dims(x), "alpha0p5",
          {real(x), real(x, 3.0f), real({kModel}), real({kModel})}, Family::kNorm,
          [](Inputs in) -> Outputs {
            auto r = ops::add_scaled_layer_norm(in[0], in[1], 0.5f, in[2], in[3], kEps);
            return {r.sum, r.normalized};
          });
  }
  t.add("add_scaled_layer_norm", dims({2, 5, 257}), "alpha0p5_noaffine",
        {real({2, 5, 257}), real({2, 5, 257}), absent(), absent()}, Family::kNorm,
        [](Inputs in) -> Outputs {
          auto r = ops::add_scaled_layer_norm(in[0], in[1], 0.5f, in[2], in[3], kEps);
          return {r.sum, r.normalized};
        });
  // Warp rows past the register width (Whisper's 384, the widest 1024).
  for (const Shape& x : {Shape{16, 384}, Shape{3, 1024}}) {
    t.add("add_layer_norm", dims(x), "eps1e5",
          {real(x), real(x, 3.0f), real({x.back()}), real({x.back()})}, Family::kNorm,
          [](Inputs in) -> Outputs {
            auto r = ops::add_layer_norm(in[0], in[1], in[2], in[3], kEps);
            return {r.sum, r.normalized};
          });
  }
  t.add("add_layer_norm", dims({1, 1}), "eps1e5",
        {real({1, 1}), real({1, 1}), real({1}), real({1})}, Family::kNorm,
        [](Inputs in) -> Outputs {
          auto r = ops::add_layer_norm(in[0], in[1], in[2], in[3], kEps);
          return {r.sum, r.normalized};
        });
}

void add_softmax_cases(Table& t) {
  auto softmax_dim = [](int64_t dim) {
    return [dim](Inputs in) -> Outputs { return {ops::softmax(in[0], dim)}; };
  };
  auto masked_dim = [](int64_t dim) {
    return [dim](Inputs in) -> Outputs { return {ops::masked_softmax(in[0], in[1], dim)}; };
  };
  for (auto [b, time] : kBatchTimes) {
    const Shape scores = {b, kHeads, time, time};
    t.add("softmax", dims(scores), "dimm1", {real(scores, 3.0f)}, Family::kSoftmax,
          softmax_dim(-1));
    // WeNet's padding mask [B, 1, 1, T] (a batch entry of length 0 masks all its rows).
    t.add("masked_softmax", dims(scores), "mask" + dims({b, 1, 1, time}) + "_prefix",
          {real(scores, 3.0f), mask({b, 1, 1, time}, MaskPattern::kPrefix)}, Family::kSoftmax,
          masked_dim(-1));
    // A chunk/causal-like mask per query row [B, 1, T, T].
    t.add("masked_softmax", dims(scores), "mask" + dims({b, 1, time, time}) + "_random",
          {real(scores, 3.0f), mask({b, 1, time, time}, MaskPattern::kRandomWithEmptyRows)},
          Family::kSoftmax, masked_dim(-1));
  }
  t.add("masked_softmax", dims({3, kHeads, 37, 37}), "mask" + dims({3, kHeads, 37, 37}) + "_random",
        {real({3, kHeads, 37, 37}, 3.0f),
         mask({3, kHeads, 37, 37}, MaskPattern::kRandomWithEmptyRows)},
        Family::kSoftmax, masked_dim(-1));
  t.add("masked_softmax", dims({2, 37, 37}), "mask37x37_prefix",  // missing leading mask dims
        {real({2, 37, 37}, 3.0f), mask({37, 37}, MaskPattern::kPrefix)}, Family::kSoftmax,
        masked_dim(-1));
  t.add("masked_softmax", dims({3, 37, 5}), "dim1_mask3x37x1_random",
        {real({3, 37, 5}, 3.0f), mask({3, 37, 1}, MaskPattern::kRandomWithEmptyRows)},
        Family::kSoftmax, masked_dim(1));
  t.add("masked_softmax", dims({1, 1}), "mask1x1_prefix",
        {real({1, 1}), mask({1, 1}, MaskPattern::kPrefix)}, Family::kSoftmax, masked_dim(-1));
  t.add("masked_softmax", dims({3, 4, 5}), "mask3x1x5_allmasked",
        {real({3, 4, 5}), mask({3, 1, 5}, MaskPattern::kAllMasked)}, Family::kSoftmax,
        masked_dim(-1));
  t.add("softmax", dims({3, 37, 5}), "dim1", {real({3, 37, 5}, 3.0f)}, Family::kSoftmax,
        softmax_dim(1));
  t.add("softmax", dims({2, kVocab}), "dimm1", {real({2, kVocab}, 3.0f)}, Family::kSoftmax,
        softmax_dim(-1));
  t.add("softmax", dims({7, 33}), "dimm1", {real({7, 33}, 3.0f)}, Family::kSoftmax,
        softmax_dim(-1));
  t.add("softmax", dims({1}), "dimm1", {real({1})}, Family::kSoftmax, softmax_dim(-1));

  auto log_softmax_dim = [](int64_t dim) {
    return [dim](Inputs in) -> Outputs { return {ops::log_softmax(in[0], dim)}; };
  };
  for (const Shape& shape : {Shape{3, 37, kVocab}, Shape{1, 1, kVocab}, Shape{3, 250, kVocab}}) {
    t.add("log_softmax", dims(shape), "dimm1", {real(shape, 3.0f)}, Family::kLogSoftmax,
          log_softmax_dim(-1));
  }
  t.add("log_softmax", dims({7, 33}), "dim0", {real({7, 33}, 3.0f)}, Family::kLogSoftmax,
        log_softmax_dim(0));
  t.add("log_softmax", dims({1}), "dimm1", {real({1})}, Family::kLogSoftmax, log_softmax_dim(-1));
}

void add_embedding_cases(Table& t) {
  auto run = [](Inputs in) -> Outputs { return {ops::embedding(in[0], in[1])}; };
  t.add("embedding", dims({3, 37}) + "_table" + dims({kVocab, kModel}), "i64",
        {ids({3, 37}, kVocab, DType::kI64), real({kVocab, kModel})}, Family::kExact, run);
  t.add("embedding", dims({1, 1}) + "_table" + dims({kVocab, kModel}), "i32",
        {ids({1, 1}, kVocab, DType::kI32), real({kVocab, kModel})}, Family::kExact, run);
  t.add("embedding", dims({5}) + "_table7x33", "i32", {ids({5}, 7, DType::kI32), real({7, 33})},
        Family::kExact, run);
  t.add("embedding", dims({0}) + "_table7x33", "i64", {ids({0}, 7, DType::kI64), real({7, 33})},
        Family::kExact, run);
}

void add_conv_cases(Table& t) {
  auto depthwise = [](int64_t left, int64_t right) {
    return [left, right](Inputs in) -> Outputs {
      return {ops::depthwise_conv1d(in[0], in[1], in[2], left, right)};
    };
  };
  const int64_t half = (kDepthwiseK - 1) / 2;
  for (auto [b, time] : kBatchTimes) {
    const Shape x = {b, kModel, time};
    const std::vector<InputSpec> in = {
        real(x), real({kModel, 1, kDepthwiseK}, fan_in_scale(kDepthwiseK)), real({kModel})};
    t.add("depthwise_conv1d", dims(x), "causal_k15", in, Family::kExact,
          depthwise(kDepthwiseK - 1, 0));
    t.add("depthwise_conv1d", dims(x), "symmetric_k15", in, Family::kExact, depthwise(half, half));
  }
  t.add("depthwise_conv1d", dims({2, 3, 5}), "k3_pad1_nobias",
        {real({2, 3, 5}), real({3, 1, 3}), absent()}, Family::kExact, depthwise(1, 1));
  t.add("depthwise_conv1d", dims({1, 1, 1}), "k1", {real({1, 1, 1}), real({1, 1, 1}), real({1})},
        Family::kExact, depthwise(0, 0));
  t.add("depthwise_conv1d", dims({2, 33, 7}), "k7_nopad",
        {real({2, 33, 7}), real({33, 1, 7}), real({33})}, Family::kExact, depthwise(0, 0));

  // FastConformer's dw_striding stages: 3x3, stride 2, padding 1.
  auto depthwise2d = [](int64_t stride, int64_t pad) {
    return [stride, pad](Inputs in) -> Outputs {
      return {ops::depthwise_conv2d(in[0], in[1], in[2], {stride, stride, pad, pad})};
    };
  };
  for (const Shape& x : {Shape{1, 32, 5, 40}, Shape{3, 256, 63, 20}}) {
    t.add("depthwise_conv2d", dims(x), "k3_s2_p1",
          {real(x), real({x[1], 1, 3, 3}, fan_in_scale(9)), real({x[1]})}, Family::kExact,
          depthwise2d(2, 1));
  }
  t.add("depthwise_conv2d", dims({2, 3, 4, 4}), "k3_s1_nopad_nobias",
        {real({2, 3, 4, 4}), real({3, 1, 3, 3}), absent()}, Family::kExact, depthwise2d(1, 0));

  auto conv = [](ops::Conv2dOptions options) {
    return [options](Inputs in) -> Outputs { return {ops::conv2d(in[0], in[1], in[2], options)}; };
  };
  auto conv_flops = [](const Shape& x, const Shape& w, const ops::Conv2dOptions& o) {
    const int64_t h = (x[2] + 2 * o.padding_h - w[2]) / o.stride_h + 1;
    const int64_t wo = (x[3] + 2 * o.padding_w - w[3]) / o.stride_w + 1;
    return 2.0 * static_cast<double>(x[0] * w[0] * h * wo) *
           static_cast<double>(w[1] * w[2] * w[3]);
  };
  auto add_conv = [&](Shape x, Shape w, ops::Conv2dOptions o, std::string params) {
    const int64_t fan_in = w[1] * w[2] * w[3];
    t.add("conv2d", dims(x) + "_w" + dims(w), std::move(params),
          {real(x), real(w, fan_in_scale(fan_in)), real({w[0]})}, Family::kConv2d, conv(o),
          conv_flops(x, w, o));
  };
  const ops::Conv2dOptions stride2{2, 2, 0, 0, 1};
  // Conv2dSubsampling4: 1 -> 256 channels 3x3 stride 2, then 256 -> 256.
  for (auto [b, time] : {std::pair<int64_t, int64_t>{1, 7}, {3, 37}, {3, 250}}) {
    add_conv({b, 1, time, kMel}, {kModel, 1, 3, 3}, stride2, "s2");
    const int64_t t1 = (time - 3) / 2 + 1;
    const int64_t f1 = (kMel - 3) / 2 + 1;
    add_conv({b, kModel, t1, f1}, {kModel, kModel, 3, 3}, stride2, "s2");
  }
  add_conv({2, 3, 9, 7}, {5, 3, 3, 3}, {1, 1, 1, 1, 1}, "s1_p1");
  add_conv({1, 2, 5, 6}, {3, 2, 1, 1}, {1, 1, 0, 0, 1}, "k1x1");
  add_conv({2, 3, 11, 8}, {4, 3, 3, 2}, {2, 1, 1, 0, 1}, "s2x1_p1x0");
  add_conv({1, 1, 3, 3}, {1, 1, 3, 3}, {1, 1, 0, 0, 1}, "one_output");
}

void add_zero_tail_frames_cases(Table& t) {
  auto run = [](std::vector<int64_t> lengths) {
    return [lengths](Inputs in) -> Outputs {
      return {ops::zero_tail_frames(in[0], std::span<const int64_t>(lengths))};
    };
  };
  t.add("zero_tail_frames", dims({3, 250, kModel}), "len250_100_0", {real({3, 250, kModel})},
        Family::kExact, run({250, 100, 0}));
  t.add("zero_tail_frames", dims({3, 37, kModel}), "len37_1_36", {real({3, 37, kModel})},
        Family::kExact, run({37, 1, 36}));
  t.add("zero_tail_frames", dims({2, 5, 33}), "len5_3", {real({2, 5, 33})}, Family::kExact,
        run({5, 3}));
  // Lengths past T are clamped; no padding at all returns x itself.
  t.add("zero_tail_frames", dims({2, 5, 33}), "len9_3", {real({2, 5, 33})}, Family::kExact,
        run({9, 3}));
  t.add("zero_tail_frames", dims({3, 37, 7}), "len37_37_37", {real({3, 37, 7})}, Family::kExact,
        run({37, 37, 37}));
  t.add("zero_tail_frames", dims({1, 1, 1}), "len0", {real({1, 1, 1})}, Family::kExact, run({0}));
}

// Tensor copies on the device: the strided copy_/contiguous() bodies. Exact
// at every dtype (a copy moves bits).
void add_tensor_cases(Table& t) {
  t.add("contiguous", dims({3, 250, kModel}), "transpose12", {real({3, 250, kModel})},
        Family::kExact, [](Inputs in) -> Outputs { return {in[0].transpose(1, 2).contiguous()}; });
  t.add("contiguous", dims({3, 37, kModel}), "narrow2_64_64_head", {real({3, 37, kModel})},
        Family::kExact,
        [](Inputs in) -> Outputs { return {in[0].narrow(2, 64, 64).contiguous()}; });
  t.add("contiguous", dims({3, 37, 33}), "narrow1_5_17", {real({3, 37, 33})}, Family::kExact,
        [](Inputs in) -> Outputs { return {in[0].narrow(1, 5, 17).contiguous()}; });
  t.add("contiguous", dims({3, kHeads, 37, kHeadDim}), "transpose12_heads",
        {real({3, kHeads, 37, kHeadDim})}, Family::kExact,
        [](Inputs in) -> Outputs { return {in[0].transpose(1, 2).contiguous()}; });
  t.add("contiguous", dims({1, 1, 1}), "transpose02", {real({1, 1, 1})}, Family::kExact,
        [](Inputs in) -> Outputs { return {in[0].transpose(0, 2).contiguous()}; });
  // Concatenation through narrow().copy_() (what a streaming cache does).
  auto concat = [](int64_t dim) {
    return [dim](Inputs in) -> Outputs {
      Shape shape = in[0].shape();
      shape[dim] += in[1].size(dim);
      Tensor out = Tensor::empty(shape, in[0].dtype(), in[0].device());
      out.narrow(dim, 0, in[0].size(dim)).copy_(in[0]);
      out.narrow(dim, in[0].size(dim), in[1].size(dim)).copy_(in[1]);
      return {out};
    };
  };
  t.add("concat_copy", dims({3, 37, kModel}) + "_" + dims({3, 13, kModel}), "dim1",
        {real({3, 37, kModel}), real({3, 13, kModel})}, Family::kExact, concat(1));
  t.add("concat_copy", dims({3, 37, 128}) + "_" + dims({3, 37, 127}), "dim2",
        {real({3, 37, 128}), real({3, 37, 127})}, Family::kExact, concat(2));
  t.add("concat_copy", dims({1, 1, 1}) + "_" + dims({1, 1, 1}), "dim0",
        {real({1, 1, 1}), real({1, 1, 1})}, Family::kExact, concat(0));
  // A strided source into a strided destination.
  t.add("copy_strided", dims({3, 37, 64}), "transposed_into_narrowed", {real({3, 37, 64})},
        Family::kExact, [](Inputs in) -> Outputs {
          Tensor out = Tensor::zeros({3, 64, 40}, in[0].dtype(), in[0].device());
          out.narrow(2, 2, 37).copy_(in[0].transpose(1, 2));
          return {out};
        });
}

}  // namespace

const char* short_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    default:
      return dtype_name(dtype);
  }
}

std::string OpCase::name() const {
  std::string out = op + "/" + short_dtype_name(dtype) + "/" + shape;
  if (!params.empty()) out += "/" + params;
  return out;
}

std::vector<OpCase> all_cases() {
  Table t;
  add_gemm_cases(t);
  add_elementwise_cases(t);
  add_activation_cases(t);
  add_glu_cases(t);
  add_norm_cases(t);
  add_softmax_cases(t);
  add_embedding_cases(t);
  add_conv_cases(t);
  add_zero_tail_frames_cases(t);
  add_tensor_cases(t);
  return t.take();
}

}  // namespace oasr::backend_ops
