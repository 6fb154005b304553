// scaled_mm_int8_vnni, scaled_mm_int8_avx_vnni and scaled_mm_int8_amx (the
// cpu_avx512_vnni_int8, cpu_avx_vnni_int8 and cpu_amx_int8 lanes: vpdpbusd
// at 512 and 256 bits and tdpbssd tiles over one packing) against DESIGN.md
// §3's int8 GEMM, bit for bit: a definition written here (an int64 dot
// product, then t = w_scale * float(acc); t = a_scale * t; t = t + bias; act(t) with
// core/activations.h's scalar functions) and the cpu_reference lane's body.
// Shapes cover every M/N/K tail of the 8 x 32 and 6 x 16 tiles and of the
// AMX lane's 32 x 32 blocks (16-row tiles, 64-byte K tiles), the groups
// of four K and the 8-wide epilogue halves; adversarial operands (+-127 and -128
// everywhere, K up to the exact bound and past it, where the AVX2 packing
// takes over) reach the largest accumulators; every activation, bias on and
// off, 1 and 2 threads. Each lane is skipped, with the reason, where the CPU
// (or the dispatch level) lacks it; the dispatch cap forces each lower lane.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/activations.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/cpu_threads.h"
#include "quant/format.h"
#include "quant/kernels/cpu/scaled_mm_int8_amx.h"
#include "quant/kernels/cpu/scaled_mm_int8_avx_vnni.h"
#include "quant/kernels/cpu/scaled_mm_int8_vnni.h"
#include "quant/kernels/cpu/scaled_mm_reference.h"
#include "quant/lanes/scaled_mm_lane.h"

namespace oasr::quant {
namespace {

constexpr Activation kAllActivations[] = {
    Activation::kNone,     Activation::kRelu,    Activation::kSwish, Activation::kGeluErf,
    Activation::kGeluTanh, Activation::kSigmoid, Activation::kTanh};

struct Problem {
  int64_t m = 0, n = 0, k = 0;
  std::vector<int8_t> a, w;
  std::vector<float> a_scale, w_scale, bias;
  bool has_bias = true;
  Activation act = Activation::kNone;
};

std::vector<float> definition_gemm(const Problem& p) {
  std::vector<float> out(p.m * p.n);
  for (int64_t r = 0; r < p.m; ++r) {
    for (int64_t c = 0; c < p.n; ++c) {
      int64_t exact = 0;
      for (int64_t j = 0; j < p.k; ++j) {
        exact += int64_t{p.a[r * p.k + j]} * int64_t{p.w[c * p.k + j]};
      }
      float t = p.w_scale[c] * static_cast<float>(exact);
      t = p.a_scale[r] * t;
      if (p.has_bias) t = t + p.bias[c];
      out[r * p.n + c] = act::apply(p.act, t);
    }
  }
  return out;
}

// t spans roughly [-40, 40], crossing every activation's branch points.
Problem random_problem(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  Problem p;
  p.m = m, p.n = n, p.k = k;
  std::uniform_int_distribution<int> int8(-127, 127);
  std::uniform_real_distribution<float> unit(0.5f, 1.5f), bias(-3.0f, 3.0f);
  p.a.resize(m * k);
  p.w.resize(n * k);
  for (int8_t& v : p.a) v = static_cast<int8_t>(int8(rng));
  for (int8_t& v : p.w) v = static_cast<int8_t>(int8(rng));
  const float typical =
      127.0f * 127.0f * std::sqrt(static_cast<float>(std::max<int64_t>(k, 1)) / 3);
  p.a_scale.resize(m);
  p.w_scale.resize(n);
  for (float& v : p.a_scale) v = unit(rng) * 20.0f / typical;
  for (float& v : p.w_scale) v = unit(rng);
  p.bias.resize(n);
  for (float& v : p.bias) v = bias(rng);
  return p;
}

std::string describe(const Problem& p) {
  return "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
         " act=" + activation_name(p.act) + (p.has_bias ? " bias" : " no-bias");
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

PackedInt8WeightVnni pack_for_vpdpbusd(const int8_t* w, int64_t n, int64_t k) {
  return pack_int8_weight_vnni(w, n, k);
}

// One lane's GEMM over the VNNI packing: its packing, packed and unpacked
// entry points, and whether this process can run it.
struct VpdpbusdLane {
  const char* name;
  bool (*available)();
  const char* missing;
  PackedInt8WeightVnni (*pack)(const int8_t*, int64_t, int64_t);
  void (*packed)(const int8_t*, const float*, const PackedInt8WeightVnni&, const float*,
                 const float*, Activation, int64_t, float*);
  void (*unpacked)(const int8_t*, const float*, const int8_t*, const float*, const float*,
                   Activation, int64_t, int64_t, int64_t, float*);
};

const VpdpbusdLane kLanes[] = {
    {"cpu_avx512_vnni_int8", cpu_has_avx512_vnni, "AVX-512 VNNI", pack_for_vpdpbusd,
     scaled_mm_int8_vnni, scaled_mm_int8_vnni},
    {"cpu_avx_vnni_int8", cpu_has_avx_vnni, "AVX-VNNI", pack_for_vpdpbusd, scaled_mm_int8_avx_vnni,
     scaled_mm_int8_avx_vnni},
    {"cpu_amx_int8", cpu_has_amx_int8, "AMX-INT8 (with the kernel's tile permission)",
     pack_int8_weight_amx, scaled_mm_int8_amx, scaled_mm_int8_amx},
};

// gtest prints the parameter as its lane's name, not as the struct's bytes.
void PrintTo(const VpdpbusdLane& lane, std::ostream* os) {
  *os << lane.name;
}

class VnniScaledMM : public ::testing::TestWithParam<VpdpbusdLane> {
 protected:
  void SetUp() override {
    saved_level_ = cpu_isa();
    // The 256-bit lane sits below the AVX-512 level: run it there (never
    // above a level OASR_CPU_ISA set).
    if (std::string(GetParam().name) == "cpu_avx_vnni_int8" && cpu_reports_avx_vnni() &&
        saved_level_ > CpuIsa::kAvxVnni) {
      cap_cpu_isa(CpuIsa::kAvxVnni);
    }
    if (!GetParam().available()) {
      GTEST_SKIP() << "no " << GetParam().missing << " at this dispatch level ("
                   << cpu_isa_name(cpu_isa()) << "; the CPU reports "
                   << cpu_isa_name(cpu_isa_detected())
                   << (cpu_reports_avx_vnni() ? ", with AVX-VNNI)" : ", without AVX-VNNI)");
    }
    ops::set_cpu_threads(2);
  }
  void TearDown() override {
    ops::set_cpu_threads(0);
    cap_cpu_isa(saved_level_);
  }

  CpuIsa saved_level_ = CpuIsa::kScalar;

  // The lane (packed once, and the unpacked overload) == definition == reference.
  void expect_bits(const Problem& p, bool with_reference = true) {
    const float* bias = p.has_bias ? p.bias.data() : nullptr;
    const std::vector<float> expected = definition_gemm(p);
    std::vector<float> vnni(p.m * p.n, -7.0f);
    const PackedInt8WeightVnni packed = GetParam().pack(p.w.data(), p.n, p.k);
    GetParam().packed(p.a.data(), p.a_scale.data(), packed, p.w_scale.data(), bias, p.act, p.m,
                      vnni.data());
    EXPECT_TRUE(same_bits(vnni, expected)) << GetParam().name << " " << describe(p);
    std::vector<float> unpacked(p.m * p.n, -7.0f);
    GetParam().unpacked(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), bias, p.act,
                        p.m, p.n, p.k, unpacked.data());
    EXPECT_TRUE(same_bits(unpacked, expected)) << GetParam().name << " " << describe(p);
    if (with_reference) {
      std::vector<float> reference(p.m * p.n, -7.0f);
      scaled_mm_int8_reference(p.a.data(), p.a_scale.data(), p.w.data(), p.w_scale.data(), bias,
                               p.act, p.m, p.n, p.k, reference.data());
      EXPECT_TRUE(same_bits(vnni, reference)) << GetParam().name << " " << describe(p);
    }
  }
};

TEST_P(VnniScaledMM, EveryTileTailEveryActivationBitForBit) {
  std::mt19937 rng(41);
  for (int64_t m : {1, 3, 6, 7, 8, 9, 13, 16, 17, 31, 33, 48}) {
    for (int64_t n : {1, 8, 15, 16, 31, 32, 33, 70}) {
      for (int64_t k : {1, 3, 4, 5, 63, 64, 65, 257}) {
        Problem p = random_problem(m, n, k, rng);
        p.act = kAllActivations[(m + n + k) % 7];
        p.has_bias = (m + n + k) % 2 == 0;
        expect_bits(p);
      }
    }
  }
  for (Activation act : kAllActivations) {
    for (bool has_bias : {false, true}) {
      Problem p = random_problem(37, 100, 260, rng);  // two 32-row blocks, the second short
      p.act = act;
      p.has_bias = has_bias;
      expect_bits(p);
    }
  }
}

TEST_P(VnniScaledMM, ConformerAndWhisperShapesOnOneTwoAndSixteenThreads) {
  std::mt19937 rng(42);
  // 16 threads: the tasks shrink until each thread has two (int8_gemm_x86.h).
  for (int threads : {1, 2, 16}) {
    ops::set_cpu_threads(threads);
    for (auto [m, n, k] : {std::array<int64_t, 3>{250, 2048, 256},
                           {250, 256, 2048},
                           {96, 1536, 384},
                           {1500, 384, 1536}}) {
      Problem p = random_problem(m, n, k, rng);
      p.act = Activation::kSwish;
      expect_bits(p);
    }
  }
}

// The largest accumulators: all operands at the int8 extremes (the u8 side
// then holds 1 or 255, and -128 becomes 0), K up to the exact bound; past
// it the weight keeps the AVX2 packing and the result is still exact.
TEST_P(VnniScaledMM, ExtremeOperandsUpToTheExactBoundAndPastIt) {
  for (int8_t a_value : {int8_t{127}, int8_t{-127}, int8_t{-128}}) {
    for (int8_t w_value : {int8_t{127}, int8_t{-127}, int8_t{-128}}) {
      for (int64_t k : {int64_t{4096}, kVnniMaxK}) {
        Problem p;
        p.m = 33, p.n = 3, p.k = k;  // 33 rows: a full AMX block and a short one
        p.a.assign(p.m * k, a_value);
        p.w.assign(p.n * k, w_value);
        for (int64_t r = 0; r < p.m; ++r)
          p.a_scale.push_back(r % 2 == 0 ? 1.0f / 4096 : 1.0f / 8192);
        p.w_scale = {1.0f, 0.5f, 0.25f};
        p.bias = {0.0f, 1.0f, -1.0f};
        expect_bits(p, /*with_reference=*/false);  // the reference is checked at K <= its bound
      }
    }
  }
  std::mt19937 rng(43);
  Problem past = random_problem(17, 5, kVnniMaxK + 7, rng);
  const PackedInt8WeightVnni packed = GetParam().pack(past.w.data(), past.n, past.k);
  EXPECT_NE(packed.avx2_fallback(), nullptr);
  expect_bits(past);
}

INSTANTIATE_TEST_SUITE_P(Lanes, VnniScaledMM, ::testing::ValuesIn(kLanes),
                         [](const auto& info) { return std::string(info.param.name); });

// The AMX lane refuses a weight packed for vpdpbusd (K groups not padded to
// whole tiles) by name, rather than reading past its panels.
TEST(AmxScaledMM, RefusesTheVpdpbusdPacking) {
  if (!cpu_has_amx_int8()) {
    GTEST_SKIP() << "no AMX-INT8 at this dispatch level (" << cpu_isa_name(cpu_isa())
                 << "; the CPU reports " << cpu_isa_name(cpu_isa_detected()) << ")";
  }
  std::mt19937 rng(44);
  Problem p = random_problem(32, 8, 100, rng);
  const PackedInt8WeightVnni packed = pack_int8_weight_vnni(p.w.data(), p.n, p.k);
  std::vector<float> out(p.m * p.n);
  try {
    scaled_mm_int8_amx(p.a.data(), p.a_scale.data(), packed, p.w_scale.data(), nullptr,
                       Activation::kNone, p.m, out.data());
    ADD_FAILURE() << "the AMX GEMM ran on a vpdpbusd packing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pack_int8_weight_amx"), std::string::npos) << e.what();
  }
}

// auto picks the widest lane (AMX where the CPU and kernel allow it, else
// AVX-512 VNNI); capping the dispatch level forces AVX-512 VNNI, AVX-VNNI
// where the CPU has it, then AVX2, then the reference, and a capped-away
// lane named explicitly is refused by name.
TEST(VnniDispatch, DispatchCapForcesEachLowerLane) {
  if (!cpu_has_avx512_vnni()) {
    GTEST_SKIP() << "no AVX-512 VNNI at this dispatch level (" << cpu_isa_name(cpu_isa())
                 << "; the CPU reports " << cpu_isa_name(cpu_isa_detected()) << ")";
  }
  const CpuIsa saved = cpu_isa();
  const std::string widest = cpu_has_amx_int8() ? "cpu_amx_int8" : "cpu_avx512_vnni_int8";
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, widest);
  cap_cpu_isa(CpuIsa::kAvx512Vnni);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_avx512_vnni_int8");
  try {
    choose_lane(QDType::kInt8, Device::cpu(), "cpu_amx_int8");
    ADD_FAILURE() << "the AMX lane was served below its dispatch level";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AMX-INT8"), std::string::npos) << e.what();
  }
  if (cpu_reports_avx_vnni()) {
    cap_cpu_isa(CpuIsa::kAvxVnni);
    EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_avx_vnni_int8");
  } else {
    EXPECT_THROW(cap_cpu_isa(CpuIsa::kAvxVnni), Error);  // not implied by AVX-512 VNNI
    EXPECT_THROW(choose_lane(QDType::kInt8, Device::cpu(), "cpu_avx_vnni_int8"), Error);
  }
  cap_cpu_isa(CpuIsa::kAvx2);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_avx2_int8");
  try {
    choose_lane(QDType::kInt8, Device::cpu(), "cpu_avx512_vnni_int8");
    ADD_FAILURE() << "the VNNI lane was served below its dispatch level";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AVX-512 VNNI"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_lane(QDType::kInt8, Device::cpu(), "cpu_avx_vnni_int8"), Error);
  cap_cpu_isa(CpuIsa::kScalar);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, "cpu_reference");
  cap_cpu_isa(saved);
  EXPECT_EQ(choose_lane(QDType::kInt8, Device::cpu(), "auto").name, widest);
  // fp8 stays on the reference lane.
  EXPECT_THROW(choose_lane(QDType::kFp8E4M3, Device::cpu(), "cpu_avx512_vnni_int8"), Error);
}

}  // namespace
}  // namespace oasr::quant
