// LogLimiter: at most a few lines per time window from one log site, so that
// a flood of bad input (malformed, forged or stray messages) cannot flood the
// log. The first line after a quiet spell says how many were left out.
// SYNCLINE_LOG_WARN_LIMITED gives each call site a limiter of its own.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/deadline.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace syncline {

class LogLimiter {
 public:
  struct Verdict {
    bool log = false;
    uint64_t suppressed = 0;  // lines left out since the last one logged
  };

  explicit LogLimiter(int lines_per_window = 10, Clock::duration window = std::chrono::seconds(10))
      : lines_per_window_(lines_per_window), window_(window) {}

  // Whether a line may be logged at `now` (tests pass their own clock).
  Verdict Admit(Clock::time_point now = Clock::now());

 private:
  const int lines_per_window_;
  const Clock::duration window_;
  Mutex mu_;
  Clock::time_point window_start_ GUARDED_BY(mu_) = {};
  int logged_in_window_ GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ GUARDED_BY(mu_) = 0;
};

}  // namespace syncline

#define SYNCLINE_LOG_WARN_LIMITED(...)                                                                 \
  do {                                                                                                 \
    static ::syncline::LogLimiter syncline_log_limiter_;                                               \
    if (const auto syncline_log_verdict_ = syncline_log_limiter_.Admit(); syncline_log_verdict_.log) {                             \
      if (syncline_log_verdict_.suppressed > 0)                                                                      \
        SYNCLINE_LOG_WARN("({} more lines like the next were left out)", syncline_log_verdict_.suppressed);          \
      SYNCLINE_LOG_WARN(__VA_ARGS__);                                                                  \
    }                                                                                                  \
  } while (false)
