// server::choose_batch (src/server/batcher.h): the oldest job always goes,
// others join nearest length first within the 1.5x spread, other decode
// options and the batch limit are respected, and the rest stay queued.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "server/batcher.h"

namespace oasr::server {
namespace {

std::vector<size_t> choose(const std::vector<size_t>& lengths, size_t max_batch,
                           std::vector<uint8_t> eligible = {}) {
  if (eligible.empty()) eligible.assign(lengths.size(), 1);
  return choose_batch(lengths, eligible, max_batch);
}

TEST(BatchingPolicy, GroupsSimilarLengthsAroundTheOldest) {
  // Seconds x 16000: the short ones go with the short oldest (1.6 s is past
  // 1.5 x 1 s), the long wait.
  const std::vector<size_t> lengths = {16000, 160000, 19200, 176000, 17600, 25600};
  EXPECT_EQ(choose(lengths, 8), (std::vector<size_t>{0, 2, 4}));
  // The next call sees the queue without them: the long ones go together.
  EXPECT_EQ(choose({160000, 176000, 25600}, 8), (std::vector<size_t>{0, 1}));
}

TEST(BatchingPolicy, TheOldestGoesAloneWhenNothingIsNear) {
  EXPECT_EQ(choose({16000, 48000, 64000}, 8), (std::vector<size_t>{0}));
  EXPECT_EQ(choose({16000}, 8), (std::vector<size_t>{0}));
  EXPECT_TRUE(choose({}, 8).empty());
}

TEST(BatchingPolicy, NearestFirstUpToTheLimitAndSameOptionsOnly) {
  // Equal distances go oldest first; the limit keeps the nearest three.
  const std::vector<size_t> lengths = {20000, 21000, 19000, 23000, 20500, 20000};
  EXPECT_EQ(choose(lengths, 3), (std::vector<size_t>{0, 4, 5}));
  // Job 5 asks for other decode options: the next nearest takes its place.
  EXPECT_EQ(choose(lengths, 3, {1, 1, 1, 1, 1, 0}), (std::vector<size_t>{0, 1, 4}));
  EXPECT_EQ(choose(lengths, 1), (std::vector<size_t>{0}));
}

TEST(BatchingPolicy, TheSpreadHoldsForTheWholeBatch) {
  // 1.4x and 0.75x of the oldest each fit alone, not together (1.87x).
  EXPECT_EQ(choose({20000, 28000, 15000}, 8), (std::vector<size_t>{0, 2}));
}

}  // namespace
}  // namespace oasr::server
