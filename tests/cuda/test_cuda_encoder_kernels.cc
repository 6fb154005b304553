// The CUDA encoder's fused kernels against their definitions, on the GPU:
//  - ops::rel_position_attention (ops/cuda/attention.h) against WeNet's
//    relative-position attention evaluated in float64 on the host from the
//    same rounded inputs: softmax(((q + u) k^T + (q + v) p^T) * scale, masked) v;
//  - its batch invariance: a row alone (unpadded, no mask) and the same row
//    inside a padded batch give identical bits;
//  - ops::conv2d_nhwc (ops/cuda/conv2d_nhwc.cu) against the CPU NCHW
//    convolution (itself checked against torch.nn.functional.conv2d by the
//    CPU tests) followed by ReLU, and the direct kernel's row invariance;
//  - ops::glu_depthwise_conv1d_channels_last against glu + depthwise_conv1d:
//    bit for bit against the CPU bodies in float32, against the unfused CUDA
//    ops in float16/bfloat16;
//  - the row invariance of the full-precision linear (ops/cuda/gemm.h) and
//    of the masked softmax (ops/cuda/softmax.h) the decoder still runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv1d.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "ops/softmax.h"
#include "support/test_support.h"

namespace oasr {
namespace {

constexpr int64_t kHeads = 4;
constexpr int64_t kDk = 64;
constexpr int64_t kDim = kHeads * kDk;

Tensor uniform(const Shape& shape, float low, float high, uint32_t seed) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// The host float32 tensor rounded to `dtype` and back: the exact values the
// device sees.
Tensor rounded(const Tensor& x, DType dtype) {
  return x.to(dtype).to(DType::kF32);
}

struct AttentionCase {
  int64_t batch = 1;
  int64_t queries = 1;
  int64_t keys = 1;
  std::vector<int64_t> lengths = {};  // kept keys per row; empty: no mask
  int64_t chunk = 0;                  // > 0: WeNet's chunk mask (full [B, 1, Tq, Tk])
  int64_t left_chunks = -1;
  uint32_t seed = 1;
};

// Host inputs, float32 holding values of the served dtype.
struct AttentionHost {
  Tensor q, k, v, p, u, w;  // q [B, Tq, D]; k, v [B, Tk, D]; p [1, Tk, D]; u, w [H, d_k]
  Tensor mask;              // uint8 [B, 1, 1|Tq, Tk] or undefined
};

AttentionHost make_inputs(const AttentionCase& c, DType dtype) {
  AttentionHost h;
  h.q = rounded(uniform({c.batch, c.queries, kDim}, -1.f, 1.f, c.seed), dtype);
  h.k = rounded(uniform({c.batch, c.keys, kDim}, -1.f, 1.f, c.seed + 1), dtype);
  h.v = rounded(uniform({c.batch, c.keys, kDim}, -1.f, 1.f, c.seed + 2), dtype);
  h.p = rounded(uniform({1, c.keys, kDim}, -1.f, 1.f, c.seed + 3), dtype);
  h.u = rounded(uniform({kHeads, kDk}, -0.5f, 0.5f, c.seed + 4), dtype);
  h.w = rounded(uniform({kHeads, kDk}, -0.5f, 0.5f, c.seed + 5), dtype);
  if (c.lengths.empty() && c.chunk == 0) return h;
  const int64_t rows = c.chunk > 0 ? c.queries : 1;
  h.mask = Tensor::empty({c.batch, 1, rows, c.keys}, DType::kU8);
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t length = c.lengths.empty() ? c.keys : c.lengths[static_cast<size_t>(b)];
    for (int64_t i = 0; i < rows; ++i) {
      int64_t start = 0;
      int64_t end = c.keys;
      if (c.chunk > 0) {
        const int64_t index = i / c.chunk;
        start = c.left_chunks < 0 ? 0 : std::max<int64_t>((index - c.left_chunks) * c.chunk, 0);
        end = std::min((index + 1) * c.chunk, c.keys);
      }
      for (int64_t j = 0; j < c.keys; ++j) {
        h.mask.data<uint8_t>()[(b * rows + i) * c.keys + j] = j >= start && j < end && j < length;
      }
    }
  }
  return h;
}

// WeNet's definition in float64: masked_fill(-inf), softmax, masked_fill(0).
std::vector<double> reference_attention(const AttentionHost& h, const AttentionCase& c) {
  const float* q = h.q.data<float>();
  const float* k = h.k.data<float>();
  const float* v = h.v.data<float>();
  const float* p = h.p.data<float>();
  const float* u = h.u.data<float>();
  const float* w = h.w.data<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDk));
  std::vector<double> out(static_cast<size_t>(c.batch * c.queries * kDim), 0.0);
  std::vector<double> score(static_cast<size_t>(c.keys));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t hd = 0; hd < kHeads; ++hd) {
      for (int64_t i = 0; i < c.queries; ++i) {
        const float* qi = q + (b * c.queries + i) * kDim + hd * kDk;
        double top = -INFINITY;
        for (int64_t j = 0; j < c.keys; ++j) {
          bool keep = true;
          if (h.mask.defined()) {
            const int64_t rows = h.mask.size(2);
            keep = h.mask.data<uint8_t>()[(b * rows + (rows == 1 ? 0 : i)) * c.keys + j] != 0;
          }
          if (!keep) {
            score[static_cast<size_t>(j)] = -INFINITY;
            continue;
          }
          const float* kj = k + (b * c.keys + j) * kDim + hd * kDk;
          const float* pj = p + j * kDim + hd * kDk;
          double s = 0.0;
          for (int64_t d = 0; d < kDk; ++d) {
            s += (static_cast<double>(qi[d]) + u[hd * kDk + d]) * kj[d] +
                 (static_cast<double>(qi[d]) + w[hd * kDk + d]) * pj[d];
          }
          score[static_cast<size_t>(j)] = s * scale;
          top = std::max(top, s * scale);
        }
        if (top == -INFINITY) continue;  // nothing kept: zeros
        double total = 0.0;
        for (double& s : score) {
          s = s == -INFINITY ? 0.0 : std::exp(s - top);
          total += s;
        }
        double* o = out.data() + (b * c.queries + i) * kDim + hd * kDk;
        for (int64_t j = 0; j < c.keys; ++j) {
          const double weight = score[static_cast<size_t>(j)] / total;
          if (weight == 0.0) continue;
          const float* vj = v + (b * c.keys + j) * kDim + hd * kDk;
          for (int64_t d = 0; d < kDk; ++d) o[d] += weight * vj[d];
        }
      }
    }
  }
  return out;
}

// The inputs on the device in their projection layout.
ops::RelPositionAttentionInputs device_inputs(const AttentionHost& h, DType dtype,
                                              const AttentionCase& c) {
  const Device gpu = Device::cuda();
  const auto dev = [&](const Tensor& t) { return t.to(dtype).to(gpu); };
  ops::RelPositionAttentionInputs in;
  in.q = dev(h.q).view({c.batch, c.queries, kHeads, kDk});
  in.k = dev(h.k).view({c.batch, c.keys, kHeads, kDk});
  in.v = dev(h.v).view({c.batch, c.keys, kHeads, kDk});
  in.p = dev(h.p).view({1, c.keys, kHeads, kDk});
  in.pos_bias_u = dev(h.u);
  in.pos_bias_v = dev(h.w);
  if (h.mask.defined()) in.mask = h.mask.to(gpu);
  in.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kDk)));
  return in;
}

// The fused kernel on `in`; the result back on the host as float32.
Tensor run_fused(const ops::RelPositionAttentionInputs& in) {
  EXPECT_TRUE(ops::rel_position_attention_fusable(in));
  return ops::rel_position_attention(in).to(Device::cpu()).to(DType::kF32);
}

Tensor fused_attention(const AttentionHost& h, DType dtype, const AttentionCase& c) {
  return run_fused(device_inputs(h, dtype, c));
}

struct ErrorStats {
  double max_abs = 0.0;
  double mean_abs = 0.0;
};

ErrorStats compare(const Tensor& actual, const std::vector<double>& expected) {
  ErrorStats e;
  const float* a = actual.data<float>();
  for (size_t i = 0; i < expected.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - expected[i]);
    e.max_abs = std::max(e.max_abs, d);
    e.mean_abs += d;
  }
  e.mean_abs /= static_cast<double>(std::max<size_t>(expected.size(), 1));
  return e;
}

// |v| <= 1, so the output is a convex combination of values in [-1, 1]: the
// bounds are a few ulps of 1 in the dtype (float16 ulp 2^-10, bfloat16 2^-7),
// covering the rounding of q + u / q + v, of each weight and of the output.
void expect_matches_definition(const AttentionCase& c, DType dtype) {
  const AttentionHost h = make_inputs(c, dtype);
  const ErrorStats e = compare(fused_attention(h, dtype, c), reference_attention(h, c));
  const double max_bound = dtype == DType::kF16 ? 4e-3 : 3e-2;
  const double mean_bound = dtype == DType::kF16 ? 4e-4 : 4e-3;
  EXPECT_LE(e.max_abs, max_bound) << dtype_name(dtype) << " B=" << c.batch << " Tq=" << c.queries
                                  << " Tk=" << c.keys << " chunk=" << c.chunk;
  EXPECT_LE(e.mean_abs, mean_bound)
      << dtype_name(dtype) << " B=" << c.batch << " Tq=" << c.queries << " Tk=" << c.keys;
}

TEST(CudaRelPositionAttention, MatchesTheDefinitionUnmasked) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int64_t t : {1, 17, 64, 65, 130, 250}) {
      expect_matches_definition(
          {.batch = 2, .queries = t, .keys = t, .seed = static_cast<uint32_t>(t)}, dtype);
    }
  }
}

TEST(CudaRelPositionAttention, MatchesTheDefinitionWithPaddingMasks) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    expect_matches_definition(
        {.batch = 4, .queries = 250, .keys = 250, .lengths = {250, 173, 64, 1}}, dtype);
  }
}

TEST(CudaRelPositionAttention, MatchesTheDefinitionWithChunkMasks) {
  OASR_SKIP_WITHOUT_CUDA();
  for (int64_t left : {-1, 2}) {
    expect_matches_definition({.batch = 3,
                               .queries = 150,
                               .keys = 150,
                               .lengths = {150, 97, 20},
                               .chunk = 16,
                               .left_chunks = left},
                              DType::kF16);
  }
}

TEST(CudaRelPositionAttention, MatchesTheDefinitionWithMoreKeysThanQueries) {
  OASR_SKIP_WITHOUT_CUDA();
  // Chunked decoding: 16 new frames attend to 64 cached ones as well.
  expect_matches_definition({.batch = 1, .queries = 16, .keys = 80}, DType::kF16);
}

TEST(CudaRelPositionAttention, ReadsStridedKeysAndValues) {
  OASR_SKIP_WITHOUT_CUDA();
  // The KV-cache layout [B, H, Tk, d_k], viewed as [B, Tk, H, d_k].
  const AttentionCase c{.batch = 2, .queries = 16, .keys = 80};
  const AttentionHost h = make_inputs(c, DType::kF16);
  ops::RelPositionAttentionInputs in = device_inputs(h, DType::kF16, c);
  const auto by_head_major = [](const Tensor& t) {
    return t.transpose(1, 2).contiguous().transpose(1, 2);
  };
  const Tensor contiguous = run_fused(in);
  in.k = by_head_major(in.k);
  in.v = by_head_major(in.v);
  ASSERT_FALSE(in.k.is_contiguous());
  ASSERT_TRUE(ops::rel_position_attention_fusable(in));
  EXPECT_TRUE(testing::bit_equal(run_fused(in), contiguous));
}

// A row alone, unpadded and unmasked, against the same row in a padded batch
// whose mask keeps its own frames: the first `length` output rows match bit
// for bit (dtype float16 and bfloat16, padding masks and chunk masks).
TEST(CudaRelPositionAttention, IsBatchInvariant) {
  OASR_SKIP_WITHOUT_CUDA();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int64_t chunk : {0, 16}) {
      const AttentionCase batch{.batch = 3,
                                .queries = 250,
                                .keys = 250,
                                .lengths = {250, 173, 40},
                                .chunk = chunk,
                                .seed = 11};
      const AttentionHost h = make_inputs(batch, dtype);
      const Tensor together = fused_attention(h, dtype, batch);
      for (int64_t b = 0; b < batch.batch; ++b) {
        const int64_t length = batch.lengths[static_cast<size_t>(b)];
        const AttentionCase alone{.batch = 1,
                                  .queries = length,
                                  .keys = length,
                                  .chunk = chunk > 0 && chunk < length ? chunk : 0};
        AttentionHost row;
        row.q = h.q.narrow(0, b, 1).narrow(1, 0, length).contiguous();
        row.k = h.k.narrow(0, b, 1).narrow(1, 0, length).contiguous();
        row.v = h.v.narrow(0, b, 1).narrow(1, 0, length).contiguous();
        row.p = h.p.narrow(1, 0, length).contiguous();
        row.u = h.u;
        row.w = h.w;
        if (alone.chunk > 0) row.mask = make_inputs(alone, dtype).mask;
        const Tensor by_itself = fused_attention(row, dtype, alone);
        EXPECT_TRUE(testing::bit_equal(by_itself,
                                       together.narrow(0, b, 1).narrow(1, 0, length).contiguous()))
            << dtype_name(dtype) << " row " << b << " chunk " << chunk;
      }
    }
  }
}

// ---- conv2d_nhwc --------------------------------------------------------------

// The CPU NCHW convolution and ReLU on the rounded inputs, as NHWC float32.
Tensor reference_conv_relu(const Tensor& x_nhwc, const Tensor& weight, const Tensor& bias,
                           int64_t stride) {
  const Tensor x_nchw = x_nhwc.transpose(2, 3).transpose(1, 2).contiguous();
  ops::Conv2dOptions options;
  options.stride_h = options.stride_w = stride;
  Tensor out = ops::conv2d(x_nchw, weight, bias, options);  // [N, C, H, W]
  out = out.transpose(1, 2).transpose(2, 3).contiguous();
  for (int64_t i = 0; i < out.numel(); ++i) {
    out.data<float>()[i] = std::max(out.data<float>()[i], 0.0f);
  }
  return out;
}

Tensor device_conv_relu(const Tensor& x_nhwc, const Tensor& weight, const Tensor& bias,
                        int64_t stride, DType dtype) {
  const Device gpu = Device::cuda();
  const Tensor x = x_nhwc.to(dtype).to(gpu);
  const Tensor w = weight.to(dtype).to(gpu);
  EXPECT_TRUE(ops::conv2d_nhwc_served(x, w));
  ops::Conv2dOptions options;
  options.stride_h = options.stride_w = stride;
  return ops::conv2d_nhwc(x, w, bias.to(dtype).to(gpu), options, /*relu=*/true)
      .to(Device::cpu())
      .to(DType::kF32);
}

void expect_conv_close(const Tensor& actual, const Tensor& expected, double relative,
                       const char* what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  double worst = 0.0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double e = expected.data<float>()[i];
    const double d = std::abs(actual.data<float>()[i] - e) / (1.0 + std::abs(e));
    worst = std::max(worst, d);
  }
  EXPECT_LE(worst, relative) << what;
}

TEST(CudaConv2dNhwc, FirstSubsamplingStageMatchesTheCpuConvolution) {
  OASR_SKIP_WITHOUT_CUDA();
  // Cin = 1, 3x3 stride 2 (the direct kernel): features [N, T, F, 1].
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32}) {
    const Tensor x = rounded(uniform({2, 101, 80, 1}, -2.f, 2.f, 3), dtype);
    const Tensor w = rounded(uniform({256, 1, 3, 3}, -0.5f, 0.5f, 4), dtype);
    const Tensor bias = rounded(uniform({256}, -0.5f, 0.5f, 5), dtype);
    const double tolerance = dtype == DType::kF32 ? 4e-6 : (dtype == DType::kF16 ? 2e-3 : 1e-2);
    expect_conv_close(device_conv_relu(x, w, bias, 2, dtype), reference_conv_relu(x, w, bias, 2),
                      tolerance, dtype_name(dtype));
  }
}

TEST(CudaConv2dNhwc, SecondSubsamplingStageMatchesTheCpuConvolution) {
  OASR_SKIP_WITHOUT_CUDA();
  // Cin = 256 (gathered columns + GEMM), 3x3 stride 2.
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const Tensor x = rounded(uniform({2, 50, 39, 256}, 0.f, 1.f, 6), dtype);
    const Tensor w = rounded(uniform({256, 256, 3, 3}, -0.05f, 0.05f, 7), dtype);
    const Tensor bias = rounded(uniform({256}, -0.5f, 0.5f, 8), dtype);
    const double tolerance = dtype == DType::kF16 ? 2e-3 : 1e-2;
    expect_conv_close(device_conv_relu(x, w, bias, 2, dtype), reference_conv_relu(x, w, bias, 2),
                      tolerance, dtype_name(dtype));
  }
}

TEST(CudaConv2dNhwc, DirectKernelIsBatchInvariant) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor x = rounded(uniform({3, 61, 80, 1}, -2.f, 2.f, 9), DType::kF16);
  const Tensor w = rounded(uniform({256, 1, 3, 3}, -0.5f, 0.5f, 10), DType::kF16);
  const Tensor bias = rounded(uniform({256}, -0.5f, 0.5f, 11), DType::kF16);
  const Tensor together = device_conv_relu(x, w, bias, 2, DType::kF16);
  for (int64_t b = 0; b < 3; ++b) {
    const Tensor alone = device_conv_relu(x.narrow(0, b, 1).contiguous(), w, bias, 2, DType::kF16);
    EXPECT_TRUE(testing::bit_equal(alone, together.narrow(0, b, 1).contiguous())) << "row " << b;
  }
}

// ---- GLU + depthwise convolution, channels-last ----------------------------------

// glu along the last dimension, then the channels-first depthwise convolution,
// back to channels-last: the unfused composition on x's device.
Tensor unfused_glu_depthwise(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t left,
                             int64_t right) {
  const Tensor gated = ops::glu(x, -1).transpose(1, 2).contiguous();
  return ops::depthwise_conv1d(gated, w, bias, left, right).transpose(1, 2).contiguous();
}

TEST(CudaGluDepthwise, EqualsTheUnfusedOpsBitForBit) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const int64_t channels = 256;
  const int64_t kernel = 15;
  // Symmetric padding (offline) and causal padding (streaming).
  for (const auto& [left, right] : std::vector<std::pair<int64_t, int64_t>>{{7, 7}, {14, 0}}) {
    const Tensor x = uniform({3, 53, 2 * channels}, -3.f, 3.f, 41);
    const Tensor w = uniform({channels, 1, kernel}, -0.3f, 0.3f, 42);
    const Tensor bias = uniform({channels}, -0.5f, 0.5f, 43);
    // float32: the CPU bodies are the reference.
    const Tensor fused32 =
        ops::glu_depthwise_conv1d_channels_last(x.to(gpu), w.to(gpu), bias.to(gpu), left, right)
            .to(Device::cpu());
    EXPECT_TRUE(testing::bit_equal(fused32, unfused_glu_depthwise(x, w, bias, left, right)))
        << "float32 left " << left;
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      const Tensor xd = x.to(dtype).to(gpu);
      const Tensor wd = w.to(dtype).to(gpu);
      const Tensor bd = bias.to(dtype).to(gpu);
      EXPECT_TRUE(testing::bit_equal(
          ops::glu_depthwise_conv1d_channels_last(xd, wd, bd, left, right).to(Device::cpu()),
          unfused_glu_depthwise(xd, wd, bd, left, right).to(Device::cpu())))
          << dtype_name(dtype) << " left " << left;
    }
  }
}

TEST(CudaGluDepthwise, OddWidthsAndLongKernelsEqualTheUnfusedOps) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  // 100 channels: a partial channel tile; 15 taps over several time tiles
  // (the compiled-width body); 65 taps: past the fused kernel's
  // tile, where the front runs the unfused ops itself.
  for (int64_t kernel : {15, 31, 65}) {
    const int64_t channels = 100;
    const int64_t pad = (kernel - 1) / 2;
    const Tensor x = uniform({2, 150, 2 * channels}, -3.f, 3.f, 44).to(DType::kF16).to(gpu);
    const Tensor w = uniform({channels, 1, kernel}, -0.3f, 0.3f, 45).to(DType::kF16).to(gpu);
    const Tensor bias = uniform({channels}, -0.5f, 0.5f, 46).to(DType::kF16).to(gpu);
    EXPECT_TRUE(testing::bit_equal(
        ops::glu_depthwise_conv1d_channels_last(x, w, bias, pad, pad).to(Device::cpu()),
        unfused_glu_depthwise(x, w, bias, pad, pad).to(Device::cpu())))
        << "kernel " << kernel;
  }
}

TEST(CudaFlattenNhwc, EqualsTheTransposedCopy) {
  OASR_SKIP_WITHOUT_CUDA();
  const Tensor y = uniform({3, 61, 19, 256}, -1.f, 1.f, 47).to(DType::kF16);
  const Tensor expected = y.transpose(2, 3).contiguous().view({3, 61, 256 * 19});
  EXPECT_TRUE(testing::bit_equal(
      ops::flatten_nhwc_channel_major(y.to(Device::cuda())).to(Device::cpu()), expected));
}

// ---- row invariance of the unfused ops ---------------------------------------

TEST(CudaLinear, RowsGiveTheSameBitsWhateverTheRowCount) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (const auto& [out_features, in_features] :
         std::vector<std::pair<int64_t, int64_t>>{{2048, 256}, {256, 2048}, {256, 4864}}) {
      const Tensor x = uniform({16000, in_features}, -1.f, 1.f, 21).to(dtype).to(gpu);
      const Tensor w = uniform({out_features, in_features}, -0.1f, 0.1f, 22).to(dtype).to(gpu);
      const Tensor bias = uniform({out_features}, -0.5f, 0.5f, 23).to(dtype).to(gpu);
      const Tensor all = ops::linear(x, w, bias).to(Device::cpu());
      for (const auto& [first, rows] : std::vector<std::pair<int64_t, int64_t>>{
               {0, 1}, {0, 250}, {777, 250}, {4000, 4000}, {15999, 1}}) {
        const Tensor part = ops::linear(x.narrow(0, first, rows), w, bias).to(Device::cpu());
        EXPECT_TRUE(testing::bit_equal(part, all.narrow(0, first, rows).contiguous()))
            << dtype_name(dtype) << " N=" << out_features << " K=" << in_features << " rows ["
            << first << ", " << first + rows << ")";
      }
    }
  }
}

TEST(CudaMaskedSoftmax, APaddedRowMatchesTheRowAlone) {
  OASR_SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda();
  const int64_t padded = 300;
  const Tensor x = uniform({3, 4, 7, padded}, -4.f, 4.f, 31).to(DType::kF16);
  Tensor mask = Tensor::empty({3, 1, 1, padded}, DType::kU8);
  const std::vector<int64_t> lengths = {300, 129, 9};
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t j = 0; j < padded; ++j) {
      mask.data<uint8_t>()[b * padded + j] = j < lengths[static_cast<size_t>(b)];
    }
  }
  const Tensor together = ops::masked_softmax(x.to(gpu), mask.to(gpu)).to(Device::cpu());
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t length = lengths[static_cast<size_t>(b)];
    const Tensor row = x.narrow(0, b, 1).narrow(3, 0, length).contiguous();
    const Tensor alone = ops::softmax(row.to(gpu)).to(Device::cpu());
    EXPECT_TRUE(
        testing::bit_equal(alone, together.narrow(0, b, 1).narrow(3, 0, length).contiguous()))
        << "row " << b;
  }
}

}  // namespace
}  // namespace oasr
