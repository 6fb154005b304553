// The fused quantize producers (spec "Fewer quantize launches"; DESIGN.md §3):
//   - layer_norm_quant / add_layer_norm_residual_quant against the norm
//     followed by the per-token rule of numerics.h, bit for bit (int8, e4m3);
//   - a small random-weight U2++ model quantized int8 and fp8, with a
//     per-token recipe and a fused-style one (every FFN w_2 static, with a
//     runtime smoother): the encoder output and the rescoring decoder's
//     log-probs are bitwise the same with the links armed and disarmed, the
//     armed run really goes through the fused producers, and each encoder
//     block launches 5 / 3 / 8 standalone quantizes;
//   - the refusals of a consumer handed an 8-bit input it cannot take.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "models/u2pp/materialize.h"
#include "models/u2pp/u2pp_model.h"
#include "ops/layer_norm.h"
#include "quant/methods/fused_producers.h"
#include "quant/numerics.h"
#include "quantize/apply.h"
#include "quantize/apply_links.h"
#include "support/test_support.h"

namespace oasr::quant {
namespace {

using testing::bit_equal;

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 0.3f,
                     float offset = 0.0f) {
  std::normal_distribution<float> normal(offset, scale);
  Tensor t = Tensor::empty(shape, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

::testing::AssertionResult bytes_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  }
  const int64_t bytes = a.numel() * static_cast<int64_t>(dtype_size(a.dtype()));
  if (std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(bytes)) != 0) {
    return ::testing::AssertionFailure() << "bytes differ: " << a.str();
  }
  return ::testing::AssertionSuccess();
}

// The unfused pair written out: each row of `normalized` quantized with
// numerics.h's per-token rule (no smoother).
QuantizedActivation quantize_rows(const Tensor& normalized, QDType format) {
  const int64_t k = normalized.size(-1);
  const int64_t rows = normalized.numel() / k;
  QuantizedActivation out;
  out.format = format;
  out.data = Tensor::empty({rows, k}, format == QDType::kInt8 ? DType::kI8 : DType::kF8E4M3);
  out.scale = Tensor::empty({rows}, DType::kF32);
  const float* x = normalized.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    if (format == QDType::kInt8) {
      quantize_row_dynamic_int8(x + r * k, nullptr, k, out.data.data<int8_t>() + r * k,
                                out.scale.data<float>() + r);
    } else {
      quantize_row_dynamic_e4m3(x + r * k, nullptr, k,
                                static_cast<uint8_t*>(out.data.raw_data()) + r * k,
                                out.scale.data<float>() + r);
    }
  }
  return out;
}

class NormQuant : public ::testing::TestWithParam<QDType> {};

TEST_P(NormQuant, EqualsTheNormThenThePerTokenQuantize) {
  const QDType format = GetParam();
  std::mt19937 rng(11);
  const int64_t d = 48;
  Tensor x = random_tensor({3, 5, d}, rng, 2.0f, 0.5f);
  // An all-constant row normalizes to the bias alone; a zero weight and bias
  // make it all zeros: the amax floor's finite scale.
  for (int64_t j = 0; j < d; ++j) x.data<float>()[j] = 3.0f;
  const Tensor residual = random_tensor({3, 5, d}, rng, 1.0f);
  const Tensor weight = random_tensor({d}, rng, 0.5f, 1.0f);
  const Tensor bias = random_tensor({d}, rng, 0.1f);
  const float eps = 1e-5f;
  const float q_max = format == QDType::kInt8 ? kInt8Max : kE4m3Max;

  const QuantizedActivation fused = layer_norm_quant(x, weight, bias, eps, format);
  const Tensor normalized = ops::layer_norm(x, weight, bias, eps);
  const QuantizedActivation reference = quantize_rows(normalized, format);
  EXPECT_EQ(fused.format, format);
  EXPECT_TRUE(bytes_equal(fused.data, reference.data));
  EXPECT_TRUE(bit_equal(fused.scale, reference.scale));
  // Independently of numerics.h: each row's scale is its amax / Q.
  for (int64_t r = 0; r < 15; ++r) {
    float amax = 0.0f;
    for (int64_t j = 0; j < d; ++j)
      amax = std::max(amax, std::abs(normalized.data<float>()[r * d + j]));
    EXPECT_EQ(fused.scale.data<float>()[r], std::max(amax, kAmaxFloor) / q_max) << "row " << r;
  }
  const QuantizedActivation zeros = layer_norm_quant(x, Tensor::zeros({d}, DType::kF32),
                                                     Tensor::zeros({d}, DType::kF32), eps, format);
  EXPECT_EQ(zeros.scale.data<float>()[0], kAmaxFloor / q_max);

  for (const float alpha : {1.0f, 0.5f}) {
    const AddLayerNormQuantResult fused_add =
        add_layer_norm_residual_quant(x, residual, alpha, weight, bias, eps, format);
    const ops::AddLayerNormResult unfused =
        ops::add_scaled_layer_norm(x, residual, alpha, weight, bias, eps);
    const QuantizedActivation unfused_q = quantize_rows(unfused.normalized, format);
    EXPECT_TRUE(bit_equal(fused_add.sum, unfused.sum)) << "alpha " << alpha;
    EXPECT_TRUE(bytes_equal(fused_add.quantized.data, unfused_q.data)) << "alpha " << alpha;
    EXPECT_TRUE(bit_equal(fused_add.quantized.scale, unfused_q.scale)) << "alpha " << alpha;
    // The sum is residual + alpha * x, two float32 roundings.
    EXPECT_EQ(fused_add.sum.data<float>()[d + 3],
              residual.data<float>()[d + 3] + alpha * x.data<float>()[d + 3]);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NormQuant, ::testing::Values(QDType::kInt8, QDType::kFp8E4M3),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- the U2++ model --------------------------------------------------------------

models::U2ppConfig tiny_u2pp_config() {
  models::U2ppConfig c;
  c.vocab_size = 24;
  models::U2ppEncoderConfig& e = c.encoder;
  e.input_dim = 16;
  e.output_size = 32;
  e.attention_heads = 2;
  e.linear_units = 64;
  e.num_blocks = 2;
  e.cnn_module_kernel = 5;
  e.causal = true;
  e.cnn_module_norm = models::U2ppConvNorm::kLayerNorm;
  e.pos_table_len = 128;
  models::U2ppDecoderConfig& d = c.decoder;
  d.type = models::U2ppDecoderType::kBiTransformer;
  d.attention_heads = 2;
  d.linear_units = 64;
  d.num_blocks = 2;
  d.r_num_blocks = 1;
  d.pos_table_len = 128;
  return c;
}

enum class Recipe {
  kPerToken,  // every layer per-token dynamic (online int8_w8a8 / fp8_w8a8)
  kFused,     // every FFN w_2 static, with a runtime smoother (the *_fused recipes)
};

bool is_ffn_w2(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".w_2") == 0;
}

// A random-weight model, quantized as `recipe` asks, bound to `backend`.
struct QuantizedU2pp {
  std::unique_ptr<models::U2ppModel> model;
  QuantizationSpec spec;
  QuantLayout layout;

  QuantizedU2pp(QDType format, Recipe recipe, const std::string& backend,
                Device device = Device::cpu(), DType dtype = DType::kF32) {
    const models::U2ppConfig config = tiny_u2pp_config();
    layout = models::u2pp_quantization_layout(config);
    model = std::make_unique<models::U2ppModel>(config);
    std::mt19937 rng(7);
    for (auto& [name, slot] : model->named_parameters()) {
      if (slot->dtype != DType::kF32) continue;  // num_batches_tracked
      const bool norm_weight = name.find("norm") != std::string::npos &&
                               name.compare(name.size() - 7, 7, ".weight") == 0;
      slot->value =
          random_tensor(slot->shape, rng, norm_weight ? 0.2f : 0.3f, norm_weight ? 1.0f : 0.0f);
    }
    const std::string dynamic = format == QDType::kInt8 ? "int8_w8a8" : "fp8_w8a8";
    spec = spec_from_config(QuantizationConfig::from_options(dynamic, {}), *model, layout);
    for (const LayerQuantization& entry : spec.layers) {
      auto* layer = dynamic_cast<layers::QuantizableLayer*>(find(entry.path));
      if (recipe == Recipe::kFused && is_ffn_w2(entry.path)) {
        quantize_static_with_smoother(*layer, dynamic + "_static", rng);
      } else {
        layer->quantize_weight_online(make_quant_method(scheme_preset(dynamic)));
      }
    }
    model->to(dtype);
    model->to(device);
    BindOptions bind;
    bind.device = device;
    bind.backend = backend;
    bind_quantization(*model, bind);
  }

  Module* find(const std::string& path) {
    for (auto& [p, module] : model->named_modules()) {
      if (p == path) return module;
    }
    return nullptr;
  }

  // What oasr quantize writes for a *_fused recipe's w_2: a static input
  // scale and a runtime smoother (random positive values here).
  static void quantize_static_with_smoother(layers::QuantizableLayer& layer,
                                            const std::string& scheme, std::mt19937& rng) {
    auto method = make_quant_method(scheme_preset(scheme));
    Module& module = layer.quant_module();
    const QuantizedWeight q = method->quantize_weight(module.param("weight"));
    const int64_t k = layer.quant_geometry().in_features;
    std::uniform_real_distribution<float> smooth(0.5f, 2.0f);
    Tensor smooth_inv = Tensor::empty({k}, DType::kF32);
    for (int64_t j = 0; j < k; ++j) smooth_inv.data<float>()[j] = smooth(rng);
    Tensor input_scale = Tensor::empty({1}, DType::kF32);
    input_scale.data<float>()[0] = std::uniform_real_distribution<float>(0.002f, 0.01f)(rng);
    layer.attach_quant_method(std::move(method), /*runtime_smoothed=*/true);
    module.set_param("weight", q.weight);
    module.set_param("weight_scale", q.weight_scale);
    module.set_param("smooth_inv", smooth_inv);
    module.set_param("input_scale", input_scale);
  }

  struct Outputs {
    Tensor encoder_out;
    Tensor left;
    Tensor right;
  };
  Outputs run() const {
    std::mt19937 rng(3);
    const Tensor feats = random_tensor({2, 40, 16}, rng, 1.0f);
    Tensor lengths = Tensor::empty({2}, DType::kI64);
    lengths.data<int64_t>()[0] = 40;
    lengths.data<int64_t>()[1] = 29;
    const auto enc = model->encode(feats, lengths);
    Outputs out;
    out.encoder_out = enc.out.to(Device::cpu());
    // Rescoring of utterance 0: <sos> + tokens padded with <eos>.
    const int64_t sos = model->config().sos_id();
    const int64_t frames = enc.lengths.data<int64_t>()[0];
    const Tensor memory = enc.out.narrow(0, 0, 1).narrow(1, 0, frames).contiguous();
    Tensor hyps = Tensor::empty({3, 5}, DType::kI64);
    Tensor r_hyps = Tensor::empty({3, 5}, DType::kI64);
    Tensor hyps_lens = Tensor::empty({3}, DType::kI64);
    for (int64_t n = 0; n < 3; ++n) {
      const int64_t len = 3 + n % 2;
      hyps_lens.data<int64_t>()[n] = len;
      for (int64_t t = 0; t < 5; ++t) {
        const int64_t token = 1 + (n * 7 + t * 3) % 20;
        hyps.data<int64_t>()[n * 5 + t] = t == 0 ? sos : (t < len ? token : sos);
        r_hyps.data<int64_t>()[n * 5 + t] =
            t == 0 ? sos : (t < len ? 1 + (n * 7 + (len - t) * 3) % 20 : sos);
      }
    }
    const auto dec = model->forward_attention_decoder(memory, hyps, hyps_lens, r_hyps, 0.5);
    out.left = dec.left.to(Device::cpu());
    out.right = dec.right.to(Device::cpu());
    return out;
  }
};

std::string quantizer_of(const QuantizationInfo& info, const std::string& path) {
  for (const LayerReport& layer : info.layers) {
    if (layer.path == path) return layer.input_quantizer;
  }
  return "(not quantized)";
}

struct ModelCase {
  QDType format;
  Recipe recipe;
  std::string backend;
  Device device = Device::cpu();
  DType dtype = DType::kF32;
};

class FusedModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(FusedModel, ArmedAndDisarmedLinksReturnTheSameBits) {
  const ModelCase& c = GetParam();
  if (c.device.is_cuda() && !cuda_available()) GTEST_SKIP() << "no CUDA GPU is visible";
  QuantizedU2pp q(c.format, c.recipe, c.backend, c.device, c.dtype);
  const bool chains = c.recipe == Recipe::kFused;
  const int64_t encoder_blocks = q.model->config().encoder.num_blocks;
  const int64_t decoder_layers =
      q.model->config().decoder.num_blocks + q.model->config().decoder.r_num_blocks;

  // Armed: the three encoder norms and norm1/2/3 of every decoder layer;
  // every FFN's w_1 -> w_2 where w_2 is static.
  const LinkSummary armed = link_quantization(*q.model, q.layout, LinkOptions{.enabled = true});
  EXPECT_TRUE(armed.enabled);
  EXPECT_EQ(armed.norm_links, 3 * encoder_blocks + 3 * decoder_layers);
  EXPECT_EQ(armed.chain_links, chains ? 2 * encoder_blocks + decoder_layers : 0);
  EXPECT_EQ(armed.standalone_quantize_launches_per_block,
            std::vector<int64_t>(static_cast<size_t>(encoder_blocks), chains ? 3 : 5));
  QuantizationInfo info = quantization_info(*q.model, q.spec);
  add_link_report(info, *q.model, q.layout);
  const std::string b = "encoder.encoders.1.";
  EXPECT_EQ(quantizer_of(info, b + "feed_forward_macaron.w_1"),
            b + "norm_ff_macaron (layer_norm_quant)");
  EXPECT_EQ(quantizer_of(info, b + "self_attn.linear_k"),
            b + "norm_mha (add_layer_norm_residual_quant)");
  EXPECT_EQ(quantizer_of(info, b + "feed_forward.w_1"),
            b + "norm_ff (add_layer_norm_residual_quant)");
  EXPECT_EQ(quantizer_of(info, b + "feed_forward.w_2"),
            chains ? b + "feed_forward.w_1 (scaled_mm_quant)" : "self (quantize_per_token)");
  EXPECT_EQ(quantizer_of(info, b + "self_attn.linear_out"), "self (quantize_per_token)");
  EXPECT_EQ(quantizer_of(info, b + "conv_module.pointwise_conv1"), "self (quantize_per_token)");
  const std::string d = "decoder.left_decoder.decoders.0.";
  EXPECT_EQ(quantizer_of(info, d + "self_attn.linear_q"), d + "norm1 (layer_norm_quant)");
  EXPECT_EQ(quantizer_of(info, d + "src_attn.linear_q"),
            d + "norm2 (add_layer_norm_residual_quant)");
  EXPECT_EQ(quantizer_of(info, d + "src_attn.linear_k"), "self (quantize_per_token)");
  EXPECT_EQ(info.to_json().at("standalone_quantize_launches_per_block"), chains ? 3 : 5);
  EXPECT_NE(info.summary().find(std::string(chains ? "3" : "5") +
                                " standalone quantize launches per encoder block"),
            std::string::npos)
      << info.summary();

  const FusedProducerCalls before = fused_producer_calls();
  const QuantizedU2pp::Outputs fused = q.run();
  const FusedProducerCalls after = fused_producer_calls();
  // One encode (both utterances) and one rescoring pass through the left
  // and right decoders: every armed producer ran once per forward.
  EXPECT_EQ(after.layer_norm_quant - before.layer_norm_quant, encoder_blocks + decoder_layers);
  EXPECT_EQ(after.add_layer_norm_residual_quant - before.add_layer_norm_residual_quant,
            2 * encoder_blocks + 2 * decoder_layers);
  EXPECT_EQ(after.scaled_mm_quant - before.scaled_mm_quant,
            chains ? 2 * encoder_blocks + decoder_layers : 0);

  // Disarmed in-process, then through OASR_QUANT_FUSION=0.
  const LinkSummary off = link_quantization(*q.model, q.layout, LinkOptions{.enabled = false});
  EXPECT_FALSE(off.enabled);
  EXPECT_EQ(off.norm_links + off.chain_links, 0);
  EXPECT_EQ(off.standalone_quantize_launches_per_block,
            std::vector<int64_t>(static_cast<size_t>(encoder_blocks), 8));
  QuantizationInfo off_info = quantization_info(*q.model, q.spec);
  EXPECT_EQ(quantizer_of(off_info, b + "feed_forward.w_2"),
            chains ? "self (quantize_static)" : "self (quantize_per_token)");
  EXPECT_EQ(quantizer_of(off_info, b + "self_attn.linear_q"), "self (quantize_per_token)");
  const FusedProducerCalls before_off = fused_producer_calls();
  const QuantizedU2pp::Outputs unfused = q.run();
  EXPECT_EQ(fused_producer_calls().total(), before_off.total());

  EXPECT_TRUE(bit_equal(fused.encoder_out, unfused.encoder_out));
  EXPECT_TRUE(bit_equal(fused.left, unfused.left));
  EXPECT_TRUE(bit_equal(fused.right, unfused.right));

  ::setenv("OASR_QUANT_FUSION", "0", 1);
  const LinkSummary from_env = link_quantization(*q.model, q.layout);
  ::unsetenv("OASR_QUANT_FUSION");
  EXPECT_FALSE(from_env.enabled);
  EXPECT_EQ(from_env.norm_links + from_env.chain_links, 0);
  EXPECT_TRUE(link_quantization(*q.model, q.layout).enabled);  // the default arms
}

std::string model_case_name(const ::testing::TestParamInfo<ModelCase>& info) {
  std::string name = std::string(to_string(info.param.format)) +
                     (info.param.recipe == Recipe::kFused ? "_fused" : "_per_token") + "_" +
                     info.param.backend + "_" + info.param.device.str() + "_" +
                     dtype_name(info.param.dtype);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, FusedModel,
    ::testing::Values(
        ModelCase{QDType::kInt8, Recipe::kPerToken, "auto"},
        ModelCase{QDType::kInt8, Recipe::kFused, "auto"},
        ModelCase{QDType::kInt8, Recipe::kFused, "cpu_reference"},
        ModelCase{QDType::kFp8E4M3, Recipe::kPerToken, "auto"},
        ModelCase { QDType::kFp8E4M3, Recipe::kFused, "auto" }
#if defined(OASR_WITH_CUDA)
        // The CUDA bodies (skipped without a GPU).
        ,
        ModelCase{QDType::kInt8, Recipe::kPerToken, "auto", Device::cuda(0), DType::kF16},
        ModelCase{QDType::kInt8, Recipe::kFused, "auto", Device::cuda(0), DType::kF16},
        ModelCase{QDType::kInt8, Recipe::kFused, "auto", Device::cuda(0), DType::kF32},
        ModelCase{QDType::kInt8, Recipe::kFused, "cublaslt", Device::cuda(0), DType::kBF16},
        ModelCase{QDType::kFp8E4M3, Recipe::kPerToken, "auto", Device::cuda(0), DType::kF16},
        ModelCase{QDType::kFp8E4M3, Recipe::kFused, "auto", Device::cuda(0), DType::kBF16}
#endif
        ),
    model_case_name);

// A link is armed only where the layout's condition holds: a norm whose
// consumer quantizes with a runtime smoother keeps every consumer on its own
// quantize, and says why.
TEST(FusedLinks, NormStaysDisarmedWhenAConsumerHasARuntimeSmoother) {
  // Pretend block 0's norm_ff also fed its w_2 (static, with a smoother).
  QuantizedU2pp fused(QDType::kInt8, Recipe::kFused, "auto");
  QuantLayout layout = fused.layout;
  for (SmoothGroup& group : layout.smooth_groups) {
    if (group.producer == "encoder.encoders.0.norm_ff") {
      group.consumers.push_back("encoder.encoders.0.feed_forward.w_2");
    }
  }
  const LinkSummary summary = link_quantization(*fused.model, layout, LinkOptions{.enabled = true});
  bool named = false;
  for (const std::string& why : summary.not_armed) {
    named = named || why.find(
                         "encoder.encoders.0.norm_ff: encoder.encoders.0.feed_forward.w_2 "
                         "quantizes its input at a static scale") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(summary.standalone_quantize_launches_per_block, (std::vector<int64_t>{4, 3}));
  const QuantizationInfo info = quantization_info(*fused.model, fused.spec);
  EXPECT_EQ(quantizer_of(info, "encoder.encoders.0.feed_forward.w_1"), "self (quantize_per_token)");
}

// A consumer handed an 8-bit input it cannot take refuses it by name.
TEST(FusedLinks, ConsumersRefuseMismatchedInput) {
  QuantizedU2pp q(QDType::kInt8, Recipe::kFused, "auto");
  auto* w_2 = dynamic_cast<layers::Linear*>(q.find("encoder.encoders.0.feed_forward.w_2"));
  auto* w_1 = dynamic_cast<layers::Linear*>(q.find("encoder.encoders.0.feed_forward.w_1"));
  auto* q_proj = dynamic_cast<layers::Linear*>(q.find("encoder.encoders.0.self_attn.linear_q"));
  ASSERT_TRUE(w_2 != nullptr && w_1 != nullptr && q_proj != nullptr);
  std::mt19937 rng(1);
  const Tensor x = random_tensor({4, 32}, rng);
  // A per-token 8-bit input (what a fused norm emits) for a static consumer.
  const QuantizedActivation per_token =
      layer_norm_quant(x, Tensor(), Tensor(), 1e-5f, QDType::kInt8);
  const layers::GemmInput norm_output(per_token, {4, 32}, DType::kF32,
                                      layers::GemmInput::Target::kPerToken);
  EXPECT_NO_THROW(w_1->forward(norm_output));
  const Tensor x64 = random_tensor({4, 64}, rng);
  const layers::GemmInput per_token_64(
      layer_norm_quant(x64, Tensor(), Tensor(), 1e-5f, QDType::kInt8), {4, 64}, DType::kF32,
      layers::GemmInput::Target::kPerToken);
  try {
    w_2->forward(per_token_64);  // w_2 quantizes at a static scale
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at a static scale"), std::string::npos) << e.what();
  }
  const QuantizedActivation fp8 = layer_norm_quant(x, Tensor(), Tensor(), 1e-5f, QDType::kFp8E4M3);
  const layers::GemmInput wrong_format(fp8, {4, 32}, DType::kF32,
                                       layers::GemmInput::Target::kPerToken);
  try {
    q_proj->forward(wrong_format);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("encoder.encoders.0.self_attn.linear_q"),
              std::string::npos)
        << e.what();
  }
  // An 8-bit input is for its GEMM only.
  EXPECT_THROW(norm_output.tensor(), Error);
  // A static-scale input made for another consumer.
  link_quantization(*q.model, q.layout, LinkOptions{.enabled = true});
  auto* other_w_2 = dynamic_cast<layers::Linear*>(q.find("encoder.encoders.1.feed_forward.w_2"));
  const layers::GemmInput hidden = w_1->chain_forward(x.view({1, 4, 32}));
  ASSERT_TRUE(hidden.is_quantized());
  EXPECT_EQ(hidden.shape(), (Shape{1, 4, 64}));
  EXPECT_NO_THROW(w_2->forward(hidden));
  EXPECT_THROW(other_w_2->forward(hidden), Error);
}

}  // namespace
}  // namespace oasr::quant
