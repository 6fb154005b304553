// The device/dtype surface of the engine that a CPU machine can check: the
// served dtype defaults, the refusals (16-bit on the CPU, quantization or
// Whisper on cuda, cuda without a GPU), and BatchNorm1d's folded-statistics
// cache following a parameter change (the fold is cached so that a CUDA
// forward reads the statistics back once).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "core/error.h"
#include "engine/asr_engine.h"
#include "layers/norm.h"
#include "support/test_support.h"

namespace oasr {
namespace {

engine::EngineConfig config_for(const std::string& device, const std::string& dtype) {
  engine::EngineConfig config;
  config.ckpt_dir = "/nonexistent-ckpt";
  config.device = device;
  config.dtype = dtype;
  return config;
}

// The error validate() raises, or "" when it accepts the config.
std::string refusal(const engine::EngineConfig& config) {
  try {
    config.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ServingOptions, DtypeDefaultsFollowTheDevice) {
  EXPECT_EQ(config_for("cpu", "").served_dtype(), DType::kF32);
  EXPECT_EQ(config_for("cuda", "").served_dtype(), DType::kF16);
  EXPECT_EQ(config_for("cuda:0", "bfloat16").served_dtype(), DType::kBF16);
  EXPECT_EQ(config_for("cuda", "float32").served_dtype(), DType::kF32);
  EXPECT_TRUE(config_for("cuda:1", "").served_device().is_cuda());
  EXPECT_EQ(config_for("cuda:1", "").served_device().index, 1);
  EXPECT_THROW(config_for("cpu", "int8").served_dtype(), Error);
  EXPECT_THROW(config_for("cpu", "float64").served_dtype(), Error);
}

TEST(ServingOptions, CpuServesFloat32Only) {
  EXPECT_EQ(refusal(config_for("cpu", "")), "");
  EXPECT_EQ(refusal(config_for("cpu", "float32")), "");
  for (const char* dtype : {"float16", "bfloat16"}) {
    const std::string message = refusal(config_for("cpu", dtype));
    EXPECT_NE(message.find("serve float32 only"), std::string::npos) << message;
    EXPECT_NE(message.find("--device cuda"), std::string::npos) << message;
  }
}

// Quantization on CUDA is served ([W1-G]): the only refusal left is the
// machine's (no GPU), never the request's.
TEST(ServingOptions, CudaWithQuantizationIsServed) {
  engine::EngineConfig config = config_for("cuda", "float16");
  config.quantization = quant::QuantizationConfig::parse({.scheme = "int8_w8a8"});
  const std::string message = refusal(config);
  if (cuda_available()) {
    EXPECT_EQ(message, "");
  } else {
    EXPECT_NE(message.find("no CUDA GPU is usable"), std::string::npos) << message;
    EXPECT_EQ(message.find("quantiz"), std::string::npos) << message;
  }
}

TEST(ServingOptions, CudaWithoutAGpuSaysWhatToDo) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA GPU is visible; the refusal cannot happen here";
  const std::string message = refusal(config_for("cuda", ""));
  EXPECT_NE(message.find("no CUDA GPU is usable"), std::string::npos) << message;
  EXPECT_NE(message.find("-DOASR_WITH_CUDA=ON"), std::string::npos) << message;
  EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
}

// Whisper is served on CUDA: without a GPU it meets the same device check
// as every architecture (not an architecture refusal).
TEST(ServingOptions, WhisperOnCudaMeetsTheDeviceCheck) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA GPU is visible; the refusal cannot happen here";
  const testing::TempDir dir;
  std::ofstream(dir.path() / "config.json") << R"({"model_type": "whisper"})";
  engine::EngineConfig config = config_for("cuda", "");
  config.ckpt_dir = dir.path();
  try {
    engine::ASREngine engine(config);
    FAIL() << "a Whisper directory on cuda was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << message;
    EXPECT_EQ(message.find("not ported to CUDA"), std::string::npos) << message;
    EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
  }
}

// y = (x - mean) / sqrt(var + eps) * weight + bias, per channel.
float batch_norm_value(float x, float weight, float bias, float mean, float var, float eps) {
  const float inv_std = 1.0f / std::sqrt(var + eps);
  const float scale = weight * inv_std;
  return x * scale + (bias - mean * scale);
}

TEST(ServingOptions, BatchNormRefoldsWhenItsStatisticsChange) {
  const float eps = 1e-5f;
  layers::BatchNorm1d norm(2, eps);
  norm.set_param("weight", Tensor::from_vector<float>({2.0f, 0.5f}, {2}));
  norm.set_param("bias", Tensor::from_vector<float>({0.25f, -1.0f}, {2}));
  norm.set_param("running_mean", Tensor::from_vector<float>({1.0f, -2.0f}, {2}));
  norm.set_param("running_var", Tensor::from_vector<float>({4.0f, 0.25f}, {2}));
  const Tensor x = Tensor::from_vector<float>({3.0f, 1.0f, -1.0f, 0.5f}, {1, 2, 2});
  const Tensor first = norm.forward(x);
  EXPECT_FLOAT_EQ(first.item_float({0, 0, 0}),
                  batch_norm_value(3.0f, 2.0f, 0.25f, 1.0f, 4.0f, eps));
  EXPECT_FLOAT_EQ(first.item_float({0, 1, 1}),
                  batch_norm_value(0.5f, 0.5f, -1.0f, -2.0f, 0.25f, eps));
  // A reloaded statistic must not be served from the cached fold.
  norm.set_param("running_var", Tensor::from_vector<float>({1.0f, 9.0f}, {2}));
  const Tensor second = norm.forward(x);
  EXPECT_FLOAT_EQ(second.item_float({0, 0, 0}),
                  batch_norm_value(3.0f, 2.0f, 0.25f, 1.0f, 1.0f, eps));
  EXPECT_FLOAT_EQ(second.item_float({0, 1, 1}),
                  batch_norm_value(0.5f, 0.5f, -1.0f, -2.0f, 9.0f, eps));
}

}  // namespace
}  // namespace oasr
