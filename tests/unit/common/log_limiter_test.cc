// LogLimiter: a few lines per window, then silence, then a count of what was left out.
#include "common/log_limiter.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

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
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  for (int i = 0; i < 100000; ++i) SYNCLINE_LOG_WARN_LIMITED("flood line {}", i);
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 10);
  EXPECT_LE(lines, 21);  // 10 per 10 s window (the loop may straddle a boundary), and one count of the rest
  EXPECT_NE(text.find("flood line 0"), std::string::npos);
}

}  // namespace
}  // namespace syncline
