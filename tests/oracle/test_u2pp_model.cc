// The U2++ model (src/models/u2pp_*) against the independent PyTorch U2++ of
// tests/oracle/u2pp/u2pp_model.py (gen_u2pp_model.py): random-weight
// WeNet-layout checkpoints (final.pt, read by io/torch_checkpoint.h and
// loaded strictly), then encoder outputs and CTC log-probs offline, with
// chunk masks and streamed chunk by chunk, forward_chunk's caches, padded
// batches, and the attention decoders' log-probs for given hypotheses.
//
// Tolerance (fp32 on both sides, different GEMM blockings and summation
// orders): encoder outputs are LayerNorm outputs of O(1) magnitude; the
// measured differences (printed per case) are about 2e-6 for the encoder and
// 3.5e-6 for log-probs (values down to -30, one float32 ulp there is 1.9e-6).
// 5e-5 absolute leaves a ~15x margin over that noise, while any semantic
// slip (a wrong mask, cache offset, position row or scale) moves values by
// 1e-2 or more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "decode/attention_rescoring.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "models/u2pp/u2pp_model.h"
#include "models/u2pp/u2pp_streaming.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using models::U2ppConfig;
using models::U2ppEncodeOptions;
using models::U2ppModel;
using nlohmann::json;
using testing::all_close;

constexpr float kEncoderAtol = 5e-5f;
constexpr float kLogProbAtol = 5e-5f;
constexpr float kLogProbRtol = 0.0f;

const testing::OracleCases& oracle() {
  return testing::oracle_cases();
}

Tensor role(const json& c, const std::string& name) {
  return oracle().file.get(c.at("name").get<std::string>() + "/" + name);
}

bool has_role(const json& c, const std::string& name) {
  return oracle().file.contains(c.at("name").get<std::string>() + "/" + name);
}

// The oracle's U2ppConfig fields (WeNet's names) -> oasr's config.
U2ppConfig config_of(const json& c) {
  const json& j = c.at("config");
  U2ppConfig config;
  config.vocab_size = j.at("vocab_size");
  config.encoder.input_dim = j.at("input_dim");
  config.encoder.output_size = j.at("output_size");
  config.encoder.attention_heads = j.at("attention_heads");
  config.encoder.linear_units = j.at("linear_units");
  config.encoder.num_blocks = j.at("num_blocks");
  config.encoder.input_layer =
      models::parse_u2pp_input_layer(j.at("input_layer").get<std::string>());
  config.encoder.cnn_module_norm =
      models::parse_u2pp_conv_norm(j.value("cnn_module_norm", std::string("layer_norm")));
  config.encoder.cnn_module_kernel = j.value("cnn_module_kernel", 15);
  config.encoder.causal = j.at("causal");
  config.encoder.use_dynamic_chunk = true;
  // Fields a variant may leave at the oracle's defaults (WeNet's U2++ values).
  config.encoder.normalize_before = j.value("normalize_before", true);
  config.encoder.macaron_style = j.value("macaron_style", true);
  config.encoder.use_cnn_module = j.value("use_cnn_module", true);
  config.encoder.activation = parse_activation(j.value("activation_type", std::string("swish")));
  config.decoder.normalize_before = config.encoder.normalize_before;  // the oracle ties them
  config.decoder.type = models::U2ppDecoderType::kBiTransformer;
  config.decoder.attention_heads = j.at("decoder_heads");
  config.decoder.linear_units = j.at("decoder_linear_units");
  config.decoder.num_blocks = j.at("decoder_num_blocks");
  config.decoder.r_num_blocks = j.at("decoder_r_num_blocks");
  return config;
}

io::TorchStateDict state_dict_of(const json& c) {
  return io::load_torch_state_dict(testing::oracle_dir() / c.at("name").get<std::string>() /
                                   "final.pt");
}

// One loaded model per case, shared by the tests.
U2ppModel& model_of(const json& c) {
  static std::map<std::string, std::unique_ptr<U2ppModel>> models;
  const std::string name = c.at("name");
  auto found = models.find(name);
  if (found != models.end()) return *found->second;
  auto model = std::make_unique<U2ppModel>(config_of(c));
  io::TorchStateDict state = state_dict_of(c);
  std::map<std::string, Tensor> tensors(state.tensors.begin(), state.tensors.end());
  model->load(MapTensorSource(std::move(tensors)));
  return *models.emplace(name, std::move(model)).first->second;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous();
  const Tensor y = b.contiguous();
  float worst = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float ex = y.data<float>()[i];
    const float ac = x.data<float>()[i];
    if (std::isinf(ex) && ac == ex) continue;
    worst = std::max(worst, std::fabs(ac - ex));
  }
  return worst;
}

// Compares, prints the measured maximum, and fails past the tolerance.
void expect_close(const Tensor& actual, const Tensor& expected, float atol, float rtol,
                  const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  std::cout << "  " << what << ": max |diff| = " << max_abs_diff(actual, expected) << "\n";
  EXPECT_TRUE(all_close(actual, expected, atol, rtol)) << what;
}

Tensor lengths_of(std::vector<int64_t> lengths) {
  const int64_t n = static_cast<int64_t>(lengths.size());
  return Tensor::from_vector<int64_t>(lengths, {n});
}

TEST(U2ppModel, LoadsWenetCheckpointStrictly) {
  ASSERT_EQ(oracle().cases.size(), 5u);
  for (const json& c : oracle().cases) {
    U2ppModel& model = model_of(c);  // throws on any missing/extra/misshapen name
    // Every checkpoint tensor is a parameter of the model, and vice versa.
    io::TorchStateDict state = state_dict_of(c);
    const auto parameters = model.named_parameters();
    size_t optional_absent = 0;
    for (auto& [name, slot] : parameters) {
      if (!slot->value.defined())
        ++optional_absent;
      else
        EXPECT_NE(state.find(name), nullptr) << name;
    }
    EXPECT_EQ(parameters.size() - optional_absent, state.tensors.size()) << c.at("name");
    // A pe table present in the file is used; absent ones are computed.
    const bool has_pe = c.at("config").at("persistent_pos_tables").get<bool>();
    EXPECT_EQ(state.find("encoder.embed.pos_enc.pe") != nullptr, has_pe);
  }
}

TEST(U2ppModel, RefusesIncompleteOrForeignCheckpoints) {
  const json& c = oracle().cases.at(0);
  io::TorchStateDict state = state_dict_of(c);
  std::map<std::string, Tensor> tensors(state.tensors.begin(), state.tensors.end());
  {
    auto missing = tensors;
    missing.erase("encoder.encoders.1.self_attn.pos_bias_u");
    U2ppModel model(config_of(c));
    EXPECT_THROW(model.load(MapTensorSource(missing)), Error);
  }
  {
    auto extra = tensors;
    extra.emplace("encoder.encoders.9.norm_ff.weight", Tensor::zeros({128}, DType::kF32));
    U2ppModel model(config_of(c));
    EXPECT_THROW(model.load(MapTensorSource(extra)), Error);
  }
  {
    U2ppConfig wrong = config_of(c);
    wrong.encoder.cnn_module_kernel = 9;  // depthwise weights no longer fit
    U2ppModel model(wrong);
    EXPECT_THROW(model.load(MapTensorSource(tensors)), Error);
  }
}

TEST(U2ppModel, OfflineAndChunkMaskEncoderAndCtc) {
  for (const json& c : oracle().cases) {
    std::cout << c.at("name").get<std::string>() << "\n";
    const U2ppModel& model = model_of(c);
    const Tensor feats = role(c, "feats");
    const Tensor lengths = lengths_of({feats.size(1)});
    for (const auto& [mode, spec] : c.at("modes").items()) {
      const bool streaming = spec.at(2).get<bool>();
      U2ppEncodeOptions options;
      options.decoding_chunk_size = spec.at(0);
      options.num_decoding_left_chunks = spec.at(1);
      options.simulate_streaming = streaming;
      const auto encoded = model.encode(feats, lengths, options);
      const Tensor expected_out = role(c, mode + "/encoder_out");
      expect_close(encoded.out, expected_out, kEncoderAtol, 0.0f, mode + " encoder_out");
      EXPECT_EQ(encoded.lengths.item_float({0}), static_cast<float>(expected_out.size(1)));
      expect_close(model.ctc_log_probs(encoded.out), role(c, mode + "/ctc_log_probs"), kLogProbAtol,
                   kLogProbRtol, mode + " ctc_log_probs");
    }
  }
}

TEST(U2ppModel, ForwardChunkKeepsWenetCaches) {
  for (const json& c : oracle().cases) {
    std::cout << c.at("name").get<std::string>() << "\n";
    const U2ppModel& model = model_of(c);
    Tensor att_cache;
    Tensor cnn_cache;
    const json& steps = c.at("stream_steps");
    for (size_t s = 0; s < steps.size(); ++s) {
      const std::string step = "stream_step" + std::to_string(s);
      const auto out =
          model.encoder().forward_chunk(role(c, step + "/xs"), steps[s].at("offset"),
                                        steps[s].at("required_cache_size"), att_cache, cnn_cache);
      expect_close(out.out, role(c, step + "/out"), kEncoderAtol, 0.0f, step + " out");
      // Cached keys/values are linear projections of O(1) LayerNorm outputs.
      expect_close(out.att_cache, role(c, step + "/att_cache"), kEncoderAtol, 1e-5f,
                   step + " att_cache");
      if (has_role(c, step + "/cnn_cache")) {
        expect_close(out.cnn_cache, role(c, step + "/cnn_cache"), kEncoderAtol, 1e-5f,
                     step + " cnn_cache");
      } else {
        EXPECT_EQ(out.cnn_cache.numel(), 0) << "a symmetric conv module keeps no cache";
      }
      att_cache = out.att_cache;
      cnn_cache = out.cnn_cache;
    }
  }
}

TEST(U2ppModel, PaddedBatchMatchesOracleAndSingleUtterances) {
  for (const json& c : oracle().cases) {
    std::cout << c.at("name").get<std::string>() << "\n";
    const U2ppModel& model = model_of(c);
    const Tensor feats = role(c, "batch/feats");
    const Tensor lengths = role(c, "batch/lengths");
    // Padding holds junk instead of the oracle's zeros: valid outputs must not see it.
    Tensor junk = feats.clone();
    for (int64_t b = 0; b < feats.size(0); ++b) {
      const int64_t n = lengths.data<int64_t>()[b];
      Tensor pad = junk.narrow(0, b, 1).narrow(1, n, feats.size(1) - n);
      pad.copy_(Tensor::full(pad.shape(), 1.0e3f));
    }
    for (const std::string mode : {"offline", "chunk16_mask"}) {
      U2ppEncodeOptions options;
      options.decoding_chunk_size = mode == "offline" ? -1 : 16;
      const auto encoded = model.encode(junk, lengths, options);
      const Tensor expected_lengths = role(c, "batch/" + mode + "/encoder_lengths");
      ASSERT_TRUE(testing::bit_equal(encoded.lengths, expected_lengths)) << mode;
      const Tensor expected_out = role(c, "batch/" + mode + "/encoder_out");
      const Tensor expected_ctc = role(c, "batch/" + mode + "/ctc_log_probs");
      const Tensor ctc = model.ctc_log_probs(encoded.out);
      for (int64_t b = 0; b < feats.size(0); ++b) {
        const int64_t frames = expected_lengths.data<int64_t>()[b];
        const std::string what = mode + " row " + std::to_string(b);
        const auto valid = [&](const Tensor& t) { return t.narrow(0, b, 1).narrow(1, 0, frames); };
        expect_close(valid(encoded.out), valid(expected_out), kEncoderAtol, 0.0f,
                     what + " encoder_out");
        expect_close(valid(ctc), valid(expected_ctc), kLogProbAtol, kLogProbRtol,
                     what + " ctc_log_probs");
        // The same utterance alone gives the same frames, up to float noise
        // from the GEMMs' different row counts -- for causal convolution
        // modules. With a symmetric one WeNet itself differs: padded frames
        // are zeroed BEFORE pointwise_conv1, so the last valid frames see
        // GLU(bias) on their right in a batch but zeros alone (the oracle
        // batch above has that behaviour too).
        if (!model.config().encoder.causal) continue;
        const int64_t n = lengths.data<int64_t>()[b];
        const auto alone =
            model.encode(feats.narrow(0, b, 1).narrow(1, 0, n), lengths_of({n}), options);
        ASSERT_EQ(alone.out.size(1), frames);
        std::cout << "  " << what
                  << " batch vs alone: max |diff| = " << max_abs_diff(valid(encoded.out), alone.out)
                  << "\n";
        EXPECT_TRUE(all_close(valid(encoded.out), alone.out, 2e-5f, 0.0f))
            << what << " batch vs alone";
      }
    }
  }
}

TEST(U2ppModel, StreamingBatchPadsEachRow) {
  const json& c = oracle().cases.at(0);
  const U2ppModel& model = model_of(c);
  const Tensor feats = role(c, "batch/feats");
  const Tensor lengths = role(c, "batch/lengths");
  U2ppEncodeOptions options;
  options.decoding_chunk_size = 16;
  options.simulate_streaming = true;
  const auto batch = model.encode(feats, lengths, options);
  for (int64_t b = 0; b < feats.size(0); ++b) {
    const int64_t n = lengths.data<int64_t>()[b];
    const Tensor alone =
        model.encoder().forward_chunk_by_chunk(feats.narrow(0, b, 1).narrow(1, 0, n), 16, -1);
    EXPECT_EQ(batch.lengths.data<int64_t>()[b], alone.size(1));
    EXPECT_TRUE(testing::bit_equal(batch.out.narrow(0, b, 1).narrow(1, 0, alone.size(1)), alone));
  }
}

TEST(U2ppModel, StreamingEncoderTakesAudioInPieces) {
  for (const json& c : oracle().cases) {
    const U2ppModel& model = model_of(c);
    const Tensor feats = role(c, "feats");  // [1, T, F]
    const int64_t left = c.at("left_chunks");
    const int64_t chunk = c.at("chunk");
    const std::string mode =
        "chunk" + std::to_string(chunk) + "_left" + std::to_string(left) + "_stream";
    models::U2ppStreamingEncoder stream(model.encoder(), chunk, left);
    // Pieces of uneven sizes, some shorter than a window, one empty.
    const int64_t sizes[] = {1, 0, 6, 13, 40, 3, 64};
    std::vector<Tensor> outputs;
    int64_t at = 0;
    for (size_t i = 0; at < feats.size(1); ++i) {
      const int64_t n = std::min(sizes[i % 7], feats.size(1) - at);
      const Tensor out = stream.accept(feats.select(0, 0).narrow(0, at, n));
      EXPECT_EQ(out.size(1) % chunk, 0);
      outputs.push_back(out);
      at += n;
    }
    outputs.push_back(stream.finish());
    EXPECT_THROW(stream.accept(feats.select(0, 0).narrow(0, 0, 1)), Error);
    Tensor joined = Tensor::empty({1, 0, model.config().encoder.output_size}, DType::kF32);
    for (const Tensor& out : outputs) {
      Tensor next = Tensor::empty({1, joined.size(1) + out.size(1), joined.size(2)}, DType::kF32);
      if (joined.size(1) > 0) next.narrow(1, 0, joined.size(1)).copy_(joined);
      if (out.size(1) > 0) next.narrow(1, joined.size(1), out.size(1)).copy_(out);
      joined = next;
    }
    // The same forward_chunk calls as forward_chunk_by_chunk: the same bits.
    EXPECT_TRUE(
        testing::bit_equal(joined, model.encoder().forward_chunk_by_chunk(feats, chunk, left)))
        << c.at("name");
    EXPECT_TRUE(all_close(joined, role(c, mode + "/encoder_out"), kEncoderAtol, 0.0f))
        << c.at("name");
    EXPECT_EQ(stream.frames_out(), joined.size(1));
    stream.reset();
    const Tensor again = stream.accept(feats.select(0, 0));  // all at once, no flush
    EXPECT_TRUE(testing::bit_equal(again, joined.narrow(1, 0, again.size(1))));
    EXPECT_LE(again.size(1), joined.size(1));  // a truncated tail waits for finish()
  }
}

TEST(U2ppModel, AttentionDecodersMatchOracle) {
  for (const json& c : oracle().cases) {
    std::cout << c.at("name").get<std::string>() << "\n";
    const U2ppModel& model = model_of(c);
    std::vector<decode::CtcHypothesis> nbest;
    for (const json& h : c.at("hyps")) nbest.push_back({h.get<std::vector<int64_t>>(), 0.0});
    const auto special = decode::SpecialTokens::wenet_default(model.config().vocab_size);
    ASSERT_EQ(special.sos, c.at("sos").get<int64_t>());
    const auto inputs = decode::make_attention_decoder_inputs(nbest, special);
    const Tensor memory = role(c, "decoder/encoder_out");
    const auto both = model.forward_attention_decoder(memory, inputs.hyps, inputs.hyps_lens,
                                                      inputs.reversed_hyps, 0.5);
    expect_close(both.left, role(c, "decoder/left_log_probs"), kLogProbAtol, kLogProbRtol,
                 "left decoder");
    ASSERT_TRUE(both.right.defined());
    expect_close(both.right, role(c, "decoder/right_log_probs"), kLogProbAtol, kLogProbRtol,
                 "right decoder");
    // reverse_weight 0: WeNet skips the right decoder; the left one is unchanged.
    const auto left_only =
        model.forward_attention_decoder(memory, inputs.hyps, inputs.hyps_lens, Tensor(), 0.0);
    EXPECT_FALSE(left_only.right.defined());
    EXPECT_TRUE(testing::bit_equal(left_only.left, both.left));
  }
}

TEST(U2ppModel, RefusesBadInputs) {
  const json& c = oracle().cases.at(0);
  const U2ppModel& model = model_of(c);
  const Tensor feats = role(c, "feats");
  // decoding_chunk_size 0 is WeNet's random training chunk.
  U2ppEncodeOptions zero_chunk;
  zero_chunk.decoding_chunk_size = 0;
  EXPECT_THROW(model.encode(feats, lengths_of({feats.size(1)}), zero_chunk), Error);
  // Lengths past the padded length, or one per row missing.
  EXPECT_THROW(model.encode(feats, lengths_of({feats.size(1) + 1})), Error);
  EXPECT_THROW(model.encode(feats, lengths_of({5, 5})), Error);
  // Too few frames for the subsampling's kernels.
  EXPECT_THROW(model.encode(feats.narrow(1, 0, 5), lengths_of({5})), Error);
  // Wrong feature width.
  EXPECT_THROW(model.encode(Tensor::zeros({1, 50, 40}, DType::kF32), lengths_of({50})), Error);
  // A cache from another geometry.
  EXPECT_THROW(model.encoder().forward_chunk(feats.narrow(1, 0, 19), 4, -1,
                                             Tensor::zeros({2, 4, 3, 5}, DType::kF32), Tensor()),
               Error);
  // Streaming shorter than one window gives no frames, as WeNet's loop does.
  EXPECT_EQ(model.encoder().forward_chunk_by_chunk(feats.narrow(1, 0, 6), 16).size(1), 0);
  // Config validation.
  U2ppConfig bad = config_of(c);
  bad.encoder.attention_heads = 3;
  EXPECT_THROW(U2ppModel{bad}, Error);
  EXPECT_THROW(models::parse_u2pp_input_layer("conv2d2"), Error);
}

}  // namespace
}  // namespace oasr
