// LogLimiter: a few lines per window, then silence, then a count of what was left out.
#include "common/log_limiter.h"

#include <gtest/gtest.h>

namespace syncline {
namespace {

TEST(LogLimiter, AdmitsAFewLinesPerWindowAndCountsTheRest) {
  LogLimiter limiter(3, std::chrono::seconds(10));
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) {
    auto v = limiter.Admit(t0 + std::chrono::milliseconds(i));
    EXPECT_TRUE(v.log);
    EXPECT_EQ(v.suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Admit(t0 + std::chrono::seconds(5)).log);
  auto next = limiter.Admit(t0 + std::chrono::seconds(11));  // a new window
  EXPECT_TRUE(next.log);
  EXPECT_EQ(next.suppressed, 1000u);
  EXPECT_EQ(limiter.Admit(t0 + std::chrono::seconds(12)).suppressed, 0u) << "counted once only";
}

TEST(LogLimiter, TheMacroLogsAtMostTheWindowsShareOfAFlood) {
  int logged = 0;
  for (int i = 0; i < 100000; ++i) {
    static LogLimiter limiter;  // what the macro gives each call site
    if (limiter.Admit().log) ++logged;
  }
  EXPECT_LE(logged, 20);  // 10 per 10 s window; the loop may straddle one window boundary
  for (int i = 0; i < 1000; ++i) SYNCLINE_LOG_WARN_LIMITED("flood line {}", i);  // compiles, stays quiet
}

}  // namespace
}  // namespace syncline
