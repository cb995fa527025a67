// Tests of the worker pool: coverage of ranges, chunking, error propagation,
// nesting and concurrent launches. No timing assertions.
#include "runtime/threading/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

// Runs the suite with at least 4 threads so the pool is exercised even on a
// small machine; restores the default afterwards.
class ThreadPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { SetNumThreads(4); }
  void TearDown() override { SetNumThreads(0); }
};

TEST_F(ThreadPoolTest, NumThreadsFollowsSetNumThreads) {
  EXPECT_EQ(NumThreads(), 4);
  SetNumThreads(2);
  EXPECT_EQ(NumThreads(), 2);
  SetNumThreads(0);
  EXPECT_GE(NumThreads(), 1);
}

// A region of 1024 indices runs kParallelForPieces pieces per thread it may
// use (shares of 256 or 512 in 8 pieces); a cap of 1 runs it inline.
TEST_F(ThreadPoolTest, ScopedThreadLimitCapsRegionsAndNests) {
  auto count_chunks = [] {
    std::atomic<int> chunks{0};
    EXPECT_TRUE(ParallelFor(0, 1024, [&](int64_t, int64_t) {
                  chunks.fetch_add(1);
                  return absl::OkStatus();
                }).ok());
    const int n = chunks.load();  // inline: one chunk
    return n == 1 ? 1 : n / static_cast<int>(kParallelForPieces);
  };
  EXPECT_EQ(count_chunks(), 4);
  {
    ScopedThreadLimit two(2);
    EXPECT_EQ(count_chunks(), 2);
    {
      ScopedThreadLimit one(1);
      EXPECT_EQ(count_chunks(), 1);
      std::atomic<int> tasks{0};
      ASSERT_TRUE(ParallelLaunch(0, [&](int, int n) {
                    EXPECT_EQ(n, 1);
                    tasks.fetch_add(1);
                    return absl::OkStatus();
                  }).ok());
      EXPECT_EQ(tasks.load(), 1);
    }
    EXPECT_EQ(count_chunks(), 2);
    ScopedThreadLimit many(64);  // a cap above the pool does not raise it
    EXPECT_EQ(count_chunks(), 4);
  }
  EXPECT_EQ(count_chunks(), 4);
}

TEST_F(ThreadPoolTest, ParallelForCoversTheRangeExactlyOnce) {
  for (int64_t n : {1, 2, 3, 4, 5, 7, 64, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    absl::Status s = ParallelFor(0, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
  }
}

// The pieces tile the range in order without gaps or overlaps: 4 shares
// of 10 indices (3, 3, 2, 2) in pieces of 1; 1000 in shares of 250, pieces
// of 32 (the last of a share 58); with min_chunk 4, 10 indices are two
// shares of one piece each; with min_chunk 100 the range runs inline.
TEST_F(ThreadPoolTest, PiecesTileTheRangeAndRespectMinChunk) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  auto record = [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
    return absl::OkStatus();
  };
  auto tiles = [&](int64_t begin, int64_t end, int64_t min_chunk) {
    std::sort(chunks.begin(), chunks.end());
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.front().first, begin);
    EXPECT_EQ(chunks.back().second, end);
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].second, chunks[i + 1].first);
    }
    for (const auto& [b, e] : chunks) EXPECT_GE(e - b, min_chunk);
  };
  ASSERT_TRUE(ParallelFor(10, 20, record).ok());
  tiles(10, 20, 1);
  EXPECT_EQ(chunks.size(), 10u);

  chunks.clear();
  ASSERT_TRUE(ParallelFor(0, 1000, record, /*min_chunk=*/16).ok());
  tiles(0, 1000, 16);
  EXPECT_EQ(chunks.size(), 28u);  // 4 shares x 7 pieces
  EXPECT_EQ(chunks[6], std::make_pair(int64_t{192}, int64_t{250}));

  chunks.clear();
  ASSERT_TRUE(ParallelFor(0, 10, record, /*min_chunk=*/4).ok());
  tiles(0, 10, 4);
  EXPECT_EQ(chunks.size(), 2u);  // 10 / 4 -> at most 2 shares, of one piece each

  chunks.clear();
  ASSERT_TRUE(ParallelFor(0, 10, record, /*min_chunk=*/100).ok());
  ASSERT_EQ(chunks.size(), 1u);  // too small: inline
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, int64_t{10}));
}

// A thread held up inside its first piece does not hold up the rest of its
// share: the other thread takes those pieces. Index 0's body waits until
// every other index is done, which only another thread can do for indices
// 1-7 of the first share (with static shares it would wait out the 30 s).
TEST_F(ThreadPoolTest, OthersTakeTheRestOfADelayedThreadsShare) {
  SetNumThreads(2);
  std::atomic<int> done{0};
  std::atomic<bool> timed_out{false};
  absl::Status s = ParallelFor(0, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (i == 0) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (done.load() < 15) {
          if (std::chrono::steady_clock::now() > deadline) {
            timed_out.store(true);
            break;
          }
          std::this_thread::yield();
        }
      }
      done.fetch_add(1);
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(timed_out.load());
  EXPECT_EQ(done.load(), 16);
}

TEST_F(ThreadPoolTest, EmptyAndReversedRangesRunNothing) {
  int calls = 0;
  auto body = [&](int64_t, int64_t) {
    ++calls;
    return absl::OkStatus();
  };
  EXPECT_TRUE(ParallelFor(5, 5, body).ok());
  EXPECT_TRUE(ParallelFor(5, 1, body).ok());
  EXPECT_EQ(calls, 0);
}

TEST_F(ThreadPoolTest, ExtremeBoundsDoNotOverflow) {
  std::atomic<uint64_t> total{0};
  const int64_t begin = INT64_MIN + 1;
  const int64_t end = INT64_MIN + 1 + 1000;
  ASSERT_TRUE(ParallelFor(begin, end, [&](int64_t b, int64_t e) {
                EXPECT_LE(begin, b);
                EXPECT_LE(e, end);
                total.fetch_add(static_cast<uint64_t>(e - b));
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(total.load(), 1000u);
}

TEST_F(ThreadPoolTest, UsesWorkerThreadsAndTheCaller) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Each task waits (bounded) until all four have started, so they must run on
  // four distinct threads if the pool works; the test never fails on timing.
  ASSERT_TRUE(ParallelLaunch(4, [&](int, int) {
                arrived.fetch_add(1);
                for (int spin = 0; spin < 50'000'000 && arrived.load() < 4; ++spin) {
                  std::this_thread::yield();
                }
                std::lock_guard<std::mutex> lock(mu);
                ids.insert(std::this_thread::get_id());
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
}

TEST_F(ThreadPoolTest, ParallelLaunchRunsEveryTaskIdOnce) {
  for (int num_tasks : {1, 3, 4, 9, 33}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(num_tasks));
    ASSERT_TRUE(ParallelLaunch(num_tasks, [&](int id, int total) {
                  EXPECT_EQ(total, num_tasks);
                  hits[static_cast<size_t>(id)].fetch_add(1);
                  return absl::OkStatus();
                }).ok());
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
  std::atomic<int> count{0};
  ASSERT_TRUE(ParallelLaunch(0, [&](int, int total) {
                EXPECT_EQ(total, NumThreads());
                count.fetch_add(1);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(count.load(), NumThreads());
}

TEST_F(ThreadPoolTest, ReturnsTheTaskError) {
  absl::Status s = ParallelFor(0, 1000, [](int64_t b, int64_t e) {
    if (b <= 500 && 500 < e) return absl::InvalidArgumentError("bad index 500");
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bad index 500"));
  // The pool stays usable after an error.
  EXPECT_TRUE(ParallelFor(0, 100, [](int64_t, int64_t) { return absl::OkStatus(); }).ok());
}

TEST_F(ThreadPoolTest, NestedCallsRunSeriallyWithoutDeadlock) {
  std::atomic<int64_t> sum{0};
  absl::Status s = ParallelFor(0, 8, [&](int64_t b, int64_t e) {
    EXPECT_TRUE(InParallelRegion());
    for (int64_t i = b; i < e; ++i) {
      int inner_calls = 0;
      absl::Status inner = ParallelFor(0, 100, [&](int64_t ib, int64_t ie) {
        ++inner_calls;  // serial, so no race
        sum.fetch_add(ie - ib);
        return absl::OkStatus();
      });
      if (!inner.ok()) return inner;
      EXPECT_EQ(inner_calls, 1);
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sum.load(), 800);
  EXPECT_FALSE(InParallelRegion());
}

TEST_F(ThreadPoolTest, ConcurrentLaunchesFromManyThreads) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        absl::Status s = ParallelFor(0, 64, [&](int64_t b, int64_t e) {
          total.fetch_add(e - b);
          return absl::OkStatus();
        });
        ASSERT_TRUE(s.ok()) << s;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(total.load(), 4 * 200 * 64);
}

TEST_F(ThreadPoolTest, ManySmallLaunchesInARow) {
  int64_t total = 0;
  std::vector<int64_t> partial(4);
  for (int round = 0; round < 2000; ++round) {
    std::fill(partial.begin(), partial.end(), 0);
    ASSERT_TRUE(ParallelLaunch(4, [&](int id, int) {
                  partial[static_cast<size_t>(id)] = id + 1;
                  return absl::OkStatus();
                }).ok());
    for (int64_t p : partial) total += p;
  }
  EXPECT_EQ(total, 2000 * 10);
}

}  // namespace
}  // namespace tether
