// StallWatch's decisions, driven with made-up times: stalled only when a
// push_pull has been in flight for the timeout and none ended meanwhile;
// reported once, again when more push_pulls start or a timeout later, and
// cleared when push_pulls move again.
#include "worker/stall_watch.h"

#include <gtest/gtest.h>

#include <vector>

namespace syncline {
namespace {

constexpr Millis kTimeout(1000);

struct Fixture {
  Clock::time_point t0 = Clock::now();
  StallWatch::Sample sample;
  std::vector<StallWatch::Report> reports;
  StallWatch watch{kTimeout, [this] { return sample; }, [this](const StallWatch::Report& r) { reports.push_back(r); }};

  Clock::time_point At(int ms) const { return t0 + Millis(ms); }
};

TEST(StallWatch, NothingInFlightIsNeverAStallHoweverLongTheWorkerIsQuiet) {
  Fixture f;
  f.sample.last_ended = f.At(0);
  f.watch.Tick(f.At(100000));
  EXPECT_TRUE(f.reports.empty());
}

TEST(StallWatch, APushPullInFlightForTheTimeoutWithNoneEndingIsReportedOnceNamingItsTensor) {
  Fixture f;
  f.sample.last_ended = f.At(0);
  f.sample.oldest_started = f.At(100);
  f.sample.oldest_tensor = "layer1.grad";
  f.sample.push_pulls_started = 7;
  f.watch.Tick(f.At(1099));
  EXPECT_TRUE(f.reports.empty()) << "in flight for 999 ms only";
  f.watch.Tick(f.At(1100));
  ASSERT_EQ(f.reports.size(), 1u);
  EXPECT_TRUE(f.reports[0].stalled);
  EXPECT_EQ(f.reports[0].waiting_for, "layer1.grad");
  EXPECT_EQ(f.reports[0].waited, Millis(1000));
  f.watch.Tick(f.At(1500));
  EXPECT_EQ(f.reports.size(), 1u) << "nothing changed: no second report";
}

TEST(StallWatch, AnotherPushPullEndingRecentlyMeansTheWorkerStillMoves) {
  Fixture f;
  f.sample.oldest_started = f.At(0);
  f.sample.last_ended = f.At(900);  // a later push_pull ended: sums still come back
  f.watch.Tick(f.At(1500));
  EXPECT_TRUE(f.reports.empty());
  f.watch.Tick(f.At(1900));
  EXPECT_EQ(f.reports.size(), 1u);
}

TEST(StallWatch, MorePushPullsOrATimeoutLaterReportAgainAndMovingAgainClearsIt) {
  Fixture f;
  f.sample.last_ended = f.At(0);
  f.sample.oldest_started = f.At(0);
  f.sample.push_pulls_started = 3;
  f.watch.Tick(f.At(1000));
  ASSERT_EQ(f.reports.size(), 1u);
  f.sample.push_pulls_started = 4;  // the counts the scheduler compares changed
  f.watch.Tick(f.At(1200));
  ASSERT_EQ(f.reports.size(), 2u);
  f.watch.Tick(f.At(2100));
  EXPECT_EQ(f.reports.size(), 2u);
  f.watch.Tick(f.At(2200));  // a timeout after the last report
  ASSERT_EQ(f.reports.size(), 3u);
  EXPECT_TRUE(f.reports[2].stalled);
  f.sample.oldest_started.reset();  // everything came back
  f.sample.last_ended = f.At(2300);
  f.watch.Tick(f.At(2400));
  ASSERT_EQ(f.reports.size(), 4u);
  EXPECT_FALSE(f.reports[3].stalled);
  f.watch.Tick(f.At(2500));
  EXPECT_EQ(f.reports.size(), 4u) << "moving again is said once";
}

TEST(StallWatch, AZeroTimeoutStartsNothing) {
  int looks = 0;
  StallWatch watch(Millis(0), [&] { ++looks; return StallWatch::Sample{}; }, [](const StallWatch::Report&) {});
  watch.Start();
  EXPECT_EQ(looks, 0);
}

}  // namespace
}  // namespace syncline
