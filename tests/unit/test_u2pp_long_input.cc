// U2++'s convolution subsampling on the host runs a long input in blocks of
// 512 output frames (models/u2pp/u2pp_encoder.cc): each block reads only
// its own receptive field, so every output frame must carry the bits the
// unblocked forward gives it. Checked against unblocked forwards of the
// same frames, for the 4x (conv2d) and 6x (conv2d6) stems, batch 2.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "models/u2pp/u2pp_encoder.h"
#include "support/test_support.h"

namespace oasr {
namespace {

using models::Conv2dSubsampling;
using models::U2ppInputLayer;
using testing::normal_tensor;

TEST(U2ppLongInput, BlockedSubsamplingGivesEveryFrameItsUnblockedBits) {
  std::mt19937 rng(1205);
  for (const U2ppInputLayer kind : {U2ppInputLayer::kConv2d, U2ppInputLayer::kConv2d6}) {
    Conv2dSubsampling stem(kind, 40, 32, 5000);
    std::map<std::string, Tensor> state;
    for (auto& [name, slot] : stem.named_parameters()) {
      state[name] = name == "pos_enc.pe" ? Tensor::zeros(slot->shape, DType::kF32)
                                         : normal_tensor(slot->shape, rng, 0.2f);
    }
    stem.load_state_dict(MapTensorSource(state));
    const int64_t rate = stem.geometry().rate;
    const int64_t context = stem.geometry().right_context;
    const int64_t input = 1300 * rate;  // 1299 or so output frames: three blocks
    const Tensor x = normal_tensor({2, input, 40}, rng, 1.0f);
    const Tensor whole = stem.forward(x);  // blocked
    const int64_t frames = stem.output_frames(input);
    ASSERT_EQ(whole.size(1), frames);
    ASSERT_GT(frames, 1024);
    // Unblocked references: windows of at most 300 output frames, each the
    // input frames it reads.
    for (int64_t begin = 0; begin < frames; begin += 300) {
      const int64_t end = std::min(frames, begin + 300);
      const int64_t first = begin * rate;
      const int64_t last = (end - 1) * rate + context + 1;
      const Tensor reference = stem.forward(x.narrow(1, first, last - first));
      ASSERT_EQ(reference.size(1), end - begin);
      EXPECT_TRUE(testing::bit_equal(whole.narrow(1, begin, end - begin).contiguous(), reference))
          << "frames " << begin << ".." << end << " rate " << rate;
    }
  }
}

}  // namespace
}  // namespace oasr
