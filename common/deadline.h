// Deadline: a point in time that every blocking wait in Syncline is given.
#pragma once

#include <chrono>

namespace syncline {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

class Deadline {
 public:
  static Deadline After(Clock::duration d) { return Deadline(Clock::now() + d); }
  static Deadline AfterMs(long long ms) { return After(Millis(ms)); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool Expired() const { return Clock::now() >= at_; }
  // Time left, never negative.
  Clock::duration Remaining() const {
    auto left = at_ - Clock::now();
    return left > Clock::duration::zero() ? left : Clock::duration::zero();
  }
  long long RemainingMs() const {
    return std::chrono::duration_cast<Millis>(Remaining()).count();
  }

 private:
  Clock::time_point at_;
};

}  // namespace syncline
