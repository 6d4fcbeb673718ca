#include "common/log_limiter.h"

namespace syncline {

LogLimiter::Verdict LogLimiter::Admit(Clock::time_point now) {
  MutexLock lock(mu_);
  if (now - window_start_ >= window_) {
    window_start_ = now;
    logged_in_window_ = 0;
  }
  if (logged_in_window_ >= lines_per_window_) {
    ++suppressed_;
    return {};
  }
  ++logged_in_window_;
  Verdict v{true, suppressed_};
  suppressed_ = 0;
  return v;
}

}  // namespace syncline
