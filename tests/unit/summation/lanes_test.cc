// summation/lanes.h: per-lane order under concurrent submitters, lanes
// running concurrently, bounded waits, shutdown and error reporting.
#include "summation/lanes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace syncline {
namespace {

using namespace std::chrono_literals;

// Two keys that SerialLanes puts on different lanes.
std::pair<uint64_t, uint64_t> KeysOnDifferentLanes(const SerialLanes& lanes) {
  for (uint64_t k = 1; k < 1000; ++k) {
    if (lanes.LaneOf(k) != lanes.LaneOf(0)) return {0, k};
  }
  ADD_FAILURE() << "no two keys on different lanes";
  return {0, 0};
}

TEST(SerialLanesTest, KeepsPerKeyOrderWithConcurrentSubmitters) {
  constexpr int kSubmitters = 8, kKeys = 16, kPerSubmitter = 4000;
  SerialLanes lanes(3);
  // seen[key] is only touched by the key's lane thread; Drain publishes it.
  std::vector<std::vector<std::pair<int, int>>> seen(kKeys);
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&, s] {
      for (int i = 0; i < kPerSubmitter; ++i) {
        const int key = (i * 7 + s) % kKeys;
        ASSERT_TRUE(lanes.Submit(key, [&seen, key, s, i] { seen[key].emplace_back(s, i); }).ok());
      }
    });
  }
  for (auto& th : submitters) th.join();
  ASSERT_TRUE(lanes.Drain(Deadline::AfterMs(30000)).ok());
  size_t total = 0;
  for (int key = 0; key < kKeys; ++key) {
    std::vector<int> last(kSubmitters, -1);
    for (const auto& [s, i] : seen[key]) {
      ASSERT_GT(i, last[s]) << "key " << key << " submitter " << s << " ran out of order";
      last[s] = i;
    }
    total += seen[key].size();
  }
  EXPECT_EQ(total, size_t{kSubmitters} * kPerSubmitter);
}

TEST(SerialLanesTest, OneLaneRunsOneTaskAtATime) {
  SerialLanes lanes(4);
  std::atomic<int> running{0}, max_running{0};
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(lanes.Submit(42, [&] {
      const int now = ++running;
      int seen = max_running.load();
      while (now > seen && !max_running.compare_exchange_weak(seen, now)) {}
      --running;
    }).ok());
  }
  ASSERT_TRUE(lanes.Drain(Deadline::AfterMs(30000)).ok());
  EXPECT_EQ(max_running.load(), 1);
}

TEST(SerialLanesTest, DifferentLanesRunConcurrently) {
  SerialLanes lanes(2);
  const auto [a, b] = KeysOnDifferentLanes(lanes);
  // The task on lane A can only finish if lane B runs while A is still busy.
  std::promise<void> from_b;
  std::future<void> b_ran = from_b.get_future();
  std::atomic<bool> a_saw_b{false};
  ASSERT_TRUE(lanes.Submit(a, [&] { a_saw_b = b_ran.wait_for(10s) == std::future_status::ready; }).ok());
  ASSERT_TRUE(lanes.Submit(b, [&] { from_b.set_value(); }).ok());
  ASSERT_TRUE(lanes.Drain(Deadline::AfterMs(20000)).ok());
  EXPECT_TRUE(a_saw_b.load());
}

TEST(SerialLanesTest, DrainHonoursItsDeadline) {
  SerialLanes lanes(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(lanes.Submit(1, [released] { released.wait_for(10s); }).ok());
  const auto start = Clock::now();
  const Status st = lanes.Drain(Deadline::AfterMs(50));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_LT(Clock::now() - start, 5s);
  release.set_value();
  EXPECT_TRUE(lanes.Drain(Deadline::AfterMs(10000)).ok());
}

TEST(SerialLanesTest, BoundedLaneMakesSubmitWaitThenTimeOut) {
  SerialLanes lanes(1, /*max_pending_per_lane=*/1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  ASSERT_TRUE(lanes.Submit(1, [&started, released] {
    started.set_value();
    released.wait_for(10s);
  }).ok());
  started.get_future().wait();                     // the lane is busy, its queue empty
  ASSERT_TRUE(lanes.Submit(1, [] {}).ok());        // fills the queue
  const Status full = lanes.Submit(1, [] {}, Deadline::AfterMs(50));
  EXPECT_EQ(full.code(), StatusCode::kDeadlineExceeded) << full.ToString();
  // A waiting submitter gets in once the lane takes the next task.
  std::thread later([&] { EXPECT_TRUE(lanes.Submit(1, [] {}, Deadline::AfterMs(10000)).ok()); });
  release.set_value();
  later.join();
  EXPECT_TRUE(lanes.Drain(Deadline::AfterMs(10000)).ok());
}

TEST(SerialLanesTest, ShutdownRunsQueuedTasksThenRejects) {
  std::atomic<int> ran{0};
  SerialLanes lanes(2);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(lanes.Submit(i, [&] { ++ran; }).ok());
  lanes.Shutdown();
  EXPECT_EQ(ran.load(), 500);
  EXPECT_EQ(lanes.Submit(1, [] {}).code(), StatusCode::kFailedPrecondition);
  lanes.Shutdown();  // idempotent
  EXPECT_TRUE(lanes.Drain(Deadline::AfterMs(100)).ok());
}

TEST(SerialLanesTest, DestructorFinishesQueuedTasks) {
  std::atomic<int> ran{0};
  {
    SerialLanes lanes(2);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(lanes.Submit(i, [&] {
        std::this_thread::sleep_for(100us);
        ++ran;
      }).ok());
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(SerialLanesTest, ThrowingTaskIsReportedByDrainAndLaneSurvives) {
  SerialLanes lanes(1);
  std::atomic<bool> after{false};
  ASSERT_TRUE(lanes.Submit(7, [] { throw std::runtime_error("boom"); }).ok());
  ASSERT_TRUE(lanes.Submit(7, [&] { after = true; }).ok());
  const Status st = lanes.Drain(Deadline::AfterMs(10000));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("boom"), std::string::npos) << st.message();
  EXPECT_TRUE(after.load());
  EXPECT_EQ(lanes.Drain(Deadline::AfterMs(1000)).code(), StatusCode::kInternal);  // sticky
}

TEST(SerialLanesTest, RejectsEmptyTaskAndResolvesLaneCount) {
  SerialLanes lanes(0);
  EXPECT_GE(lanes.num_lanes(), 1);
  EXPECT_EQ(lanes.Submit(1, nullptr).code(), StatusCode::kInvalidArgument);
  for (uint64_t k = 0; k < 100; ++k) EXPECT_LT(lanes.LaneOf(k), static_cast<size_t>(lanes.num_lanes()));
}

TEST(SerialLanesTest, StridedKeysSpreadOverLanes) {
  // Keys one of two servers would own (all even) must not pile onto one lane.
  SerialLanes lanes(2);
  int on_lane0 = 0;
  for (uint64_t k = 0; k < 1000; k += 2) on_lane0 += lanes.LaneOf(k) == 0;
  EXPECT_GT(on_lane0, 150);
  EXPECT_LT(on_lane0, 350);
}

}  // namespace
}  // namespace syncline
