#include "worker/stall_watch.h"

#include <algorithm>

namespace syncline {

StallWatch::StallWatch(Millis timeout, std::function<Sample()> sample, std::function<void(const Report&)> report)
    : timeout_(timeout), sample_(std::move(sample)), report_(std::move(report)) {}

StallWatch::~StallWatch() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void StallWatch::Start() {
  if (timeout_.count() <= 0 || thread_.joinable()) return;
  const Millis period = std::clamp(timeout_ / 4, Millis(10), Millis(1000));
  thread_ = std::thread([this, period] {
    for (;;) {
      {
        MutexLock lock(mu_);
        if (cv_.WaitUntil(mu_, Deadline::After(period), [this]() REQUIRES(mu_) { return stopping_; })) return;
      }
      Tick(Clock::now());
    }
  });
}

void StallWatch::Tick(Clock::time_point now) {
  const Sample s = sample_();
  const bool stalled = s.oldest_started && now - *s.oldest_started >= timeout_ && now - s.last_ended >= timeout_;
  if (!stalled) {
    if (reported_) report_(Report{});
    reported_.reset();
    return;
  }
  if (reported_ && reported_->push_pulls_started == s.push_pulls_started && now - reported_->at < timeout_) return;
  reported_ = Reported{now, s.push_pulls_started};
  report_(Report{true, s.oldest_tensor, std::chrono::duration_cast<Millis>(now - *s.oldest_started)});
}

}  // namespace syncline
