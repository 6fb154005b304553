// OffsetArena (core/offset_arena.h), the layout of a device graph's arena:
// 256-byte units handed out first-fit, neighbours coalesced on free, the top
// block returned to the tail, and -- the property a recording relies on --
// the same sequence of allocations and frees replayed in an arena bounded
// at the measured high-water mark gives the same offsets and never fails.
#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

#include "core/device_graph_cache.h"
#include "core/offset_arena.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace oasr {
namespace {

TEST(OffsetArena, HandsOutAlignedUnitsInOrder) {
  OffsetArena arena;
  EXPECT_EQ(arena.allocate(1), 0);
  EXPECT_EQ(arena.allocate(256), 256);
  EXPECT_EQ(arena.allocate(257), 512);
  EXPECT_EQ(arena.allocate(0), 1024);  // a zero-byte request still takes one unit
  EXPECT_EQ(arena.high_water(), 1280u);
  EXPECT_EQ(arena.live_bytes(), 1280u);
  EXPECT_EQ(arena.live_blocks(), 4u);
}

TEST(OffsetArena, ReusesTheFirstHoleThatFits) {
  OffsetArena arena;
  const int64_t a = arena.allocate(512);   // [0, 512)
  const int64_t b = arena.allocate(256);   // [512, 768)
  const int64_t c = arena.allocate(1024);  // [768, 1792)
  ASSERT_EQ(c, 768);
  arena.allocate(256);  // [1792, 2048): keeps c's hole from being the tail
  ASSERT_TRUE(arena.free(a));
  ASSERT_TRUE(arena.free(c));
  EXPECT_EQ(arena.allocate(600), 768);  // a's 512-byte hole is too small
  EXPECT_EQ(arena.allocate(200), 0);    // the first hole that fits
  EXPECT_EQ(arena.allocate(256), 256);  // the rest of a's hole
  EXPECT_EQ(arena.high_water(), 2048u);
  EXPECT_TRUE(arena.free(b));
}

TEST(OffsetArena, CoalescesNeighboursAndReturnsTheTop) {
  OffsetArena arena;
  const int64_t a = arena.allocate(256);
  const int64_t b = arena.allocate(256);
  const int64_t c = arena.allocate(256);
  const int64_t d = arena.allocate(256);
  ASSERT_TRUE(arena.free(a));
  ASSERT_TRUE(arena.free(c));
  ASSERT_TRUE(arena.free(b));  // a, b, c become one 768-byte hole
  EXPECT_EQ(arena.allocate(768), 0);
  ASSERT_TRUE(arena.free(d));  // the top block: the tail starts at 768 again
  EXPECT_EQ(arena.allocate(1024), 768);
  EXPECT_EQ(arena.high_water(), 1792u);
}

TEST(OffsetArena, BoundedArenaRefusesPastItsCapacity) {
  OffsetArena arena(1024);
  EXPECT_EQ(arena.allocate(768), 0);
  EXPECT_EQ(arena.allocate(512), -1);
  EXPECT_EQ(arena.live_blocks(), 1u);
  EXPECT_EQ(arena.allocate(256), 768);
  EXPECT_EQ(arena.allocate(1), -1);
}

TEST(OffsetArena, RefusesToFreeWhatItDidNotHandOut) {
  OffsetArena arena;
  const int64_t a = arena.allocate(300);
  EXPECT_FALSE(arena.free(a + 256));
  EXPECT_FALSE(arena.free(-1));
  EXPECT_TRUE(arena.free(a));
  EXPECT_FALSE(arena.free(a));  // twice
}

// A random interleaving of allocations and frees (sizes from 1 byte to 1 MiB,
// like a forward's tensors), measured unbounded, then replayed bounded at
// the measured high-water mark: identical offsets, no refusal.
TEST(OffsetArena, ReplayAtTheMeasuredHighWaterNeverFails) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<size_t> size(1, 1 << 20);
    std::vector<std::pair<bool, size_t>> steps;  // (allocate?, size or live index)
    size_t live = 0;
    for (int i = 0; i < 400; ++i) {
      if (live > 0 && rng() % 3 == 0) {
        steps.emplace_back(false, rng() % live);
        --live;
      } else {
        steps.emplace_back(true, size(rng));
        ++live;
      }
    }
    const auto replay = [&](OffsetArena& arena) {
      std::vector<int64_t> offsets;
      std::vector<int64_t> held;
      for (const auto& [allocate, value] : steps) {
        if (allocate) {
          const int64_t offset = arena.allocate(value);
          offsets.push_back(offset);
          held.push_back(offset);
        } else {
          EXPECT_TRUE(arena.free(held[value]));
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(value));
        }
      }
      return offsets;
    };
    OffsetArena measured;
    const std::vector<int64_t> expected = replay(measured);
    OffsetArena bounded(measured.high_water());
    const std::vector<int64_t> got = replay(bounded);
    EXPECT_EQ(got, expected) << "seed " << seed;
    for (int64_t offset : got) EXPECT_GE(offset, 0) << "seed " << seed;
  }
}

// On the CPU nothing is recorded: every call runs the work itself.
TEST(DeviceGraphCache, CpuWorkRunsEagerly) {
  DeviceGraphCache cache;
  int calls = 0;
  const DeviceWork work = [&](const std::vector<Tensor>& in) {
    ++calls;
    return std::vector<Tensor>{ops::add(in[0], in[0])};
  };
  const Tensor x = Tensor::from_vector<float>({1.5f, -2.0f}, {2});
  for (int i = 0; i < 3; ++i) {
    const Tensor y = cache.run("double", Device::cpu(), work, {x}).front();
    EXPECT_EQ(y.item_float({1}), -4.0f);
  }
  EXPECT_EQ(calls, 3);
  const DeviceGraphCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.eager + stats.recorded + stats.replayed + stats.declined, 0);
}

}  // namespace
}  // namespace oasr
